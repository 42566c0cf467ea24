package docsplit

import (
	"fmt"
	"html"
	"reflect"
	"strings"
	"testing"
)

func TestFromHTMLHeadingsBecomeSections(t *testing.T) {
	t.Parallel()
	page := `<!doctype html><html><head><title>ignored</title><style>p{color:red}</style>
<script>alert("not content")</script></head><body>
<p>Before any heading.</p>
<h1>Guide</h1><p>Intro with <b>bold</b> and <a href="https://example.test/a">a link</a> &amp; more.</p>
<h2>Install</h2><ul><li>one</li><li>two <code>x</code></li></ul>
<pre><code class="language-sh"># a shell comment
ls -l
</code></pre>
<p># not a heading</p>
<h4>Skipped</h4><table><tr><th>key</th><th>value</th></tr><tr><td>a</td><td>1 | 2</td></tr></table>
<h2>Usage</h2><p>東京 café</p></body></html>`
	md, err := FromHTML(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**bold**", "[a link](https://example.test/a)", "- two `x`", "```sh\n# a shell comment\n", "\\# not a heading", "| a   | 1 \\| 2 |", "東京 café"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "alert") || strings.Contains(md, "color:red") || strings.Contains(md, "ignored") {
		t.Errorf("script, style or head text kept:\n%s", md)
	}
	secs := Split(md, 0)
	checkSplit(t, md, 0, secs)
	want := [][]string{{}, {"Guide"}, {"Guide", "Install"}, {"Guide", "Install", "Skipped"}, {"Guide", "Usage"}}
	if got := paths(secs); !reflect.DeepEqual(got, want) {
		t.Fatalf("paths\n got %q\nwant %q\n%s", got, want, md)
	}
}

func TestFromHTMLRefusesTooDeepNesting(t *testing.T) {
	t.Parallel()
	if _, err := FromHTML(strings.Repeat("<div>", 600) + "x"); err == nil || !strings.Contains(err.Error(), "512") {
		t.Fatalf("err = %v, want the parser's nesting limit", err)
	}
}

func FuzzFromHTML(f *testing.F) {
	f.Add("<h1>a</h1><p>b<b>c</p>")
	f.Add("<table><tr><td>1<td>2</table><pre>x</pre>")
	f.Add("<ul><li><h2>in a list</h2></ul>\x00\xff")
	f.Fuzz(func(t *testing.T, page string) {
		md, err := FromHTML(page)
		if err != nil {
			return
		}
		checkSplit(t, md, 50, Split(md, 50))
	})
}

// BenchmarkFromHTML converts a 1 MiB page: the handbook's sections as
// headings and paragraphs.
func BenchmarkFromHTML(b *testing.B) {
	var page strings.Builder
	page.WriteString("<html><body>")
	for _, s := range Split(Handbook(1, 300), 0) {
		n := len(s.HeadingPath)
		_, body, _ := strings.Cut(s.Text, "\n")
		fmt.Fprintf(&page, "<h%d>%s</h%d>\n", n, html.EscapeString(s.HeadingPath[n-1]), n)
		for _, p := range strings.Split(strings.TrimSpace(body), "\n\n") {
			fmt.Fprintf(&page, "<p>%s</p>\n", html.EscapeString(p))
		}
	}
	page.WriteString("</body></html>")
	in := page.String()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromHTML(in); err != nil {
			b.Fatal(err)
		}
	}
}
