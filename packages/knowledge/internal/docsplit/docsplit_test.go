package docsplit

import (
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// checkSplit asserts what every split must keep: the sections join to the
// input, none is empty or over maxChars, Starts increase and point at
// their text, and a section of white space alone has no neighbour with
// room for it.
func checkSplit(t *testing.T, text string, maxChars int, secs []Section) {
	t.Helper()
	if text == "" {
		if len(secs) != 0 {
			t.Fatalf("empty input: %d sections", len(secs))
		}
		return
	}
	var joined strings.Builder
	runes := make([]int, len(secs))
	for i, s := range secs {
		runes[i] = utf8.RuneCountInString(s.Text)
		switch {
		case s.Text == "":
			t.Fatalf("section %d is empty", i)
		case maxChars > 0 && runes[i] > maxChars:
			t.Fatalf("section %d has %d runes, over %d", i, runes[i], maxChars)
		case s.Start != joined.Len():
			t.Fatalf("section %d starts at %d, its text is at %d", i, s.Start, joined.Len())
		case s.HeadingPath == nil || len(s.HeadingPath) > 6:
			t.Fatalf("section %d has the heading path %q", i, s.HeadingPath)
		}
		for _, h := range s.HeadingPath {
			if h == "" || strings.ContainsFunc(h, unicode.IsControl) || strings.TrimSpace(h) != h {
				t.Fatalf("section %d has the heading %q", i, h)
			}
		}
		joined.WriteString(s.Text)
	}
	if joined.String() != text {
		t.Fatalf("sections join to %d bytes, not the input's %d", joined.Len(), len(text))
	}
	for i, s := range secs {
		if strings.TrimSpace(s.Text) != "" || maxChars < 1 {
			if maxChars < 1 && strings.TrimSpace(s.Text) == "" && len(secs) > 1 {
				t.Fatalf("no limit, yet blank section %d stands alone", i)
			}
			continue
		}
		if i > 0 && runes[i-1]+runes[i] <= maxChars {
			t.Fatalf("blank section %d (%d runes) fits in the one before (%d runes)", i, runes[i], runes[i-1])
		}
		if i+1 < len(secs) && runes[i+1]+runes[i] <= maxChars {
			t.Fatalf("blank section %d (%d runes) fits in the one after (%d runes)", i, runes[i], runes[i+1])
		}
	}
}

func paths(secs []Section) [][]string {
	out := make([][]string, len(secs))
	for i, s := range secs {
		out[i] = s.HeadingPath
	}
	return out
}

func TestSplitHeadingPaths(t *testing.T) {
	t.Parallel()
	text := "Intro before any heading.\n\n" +
		"# Guide\ntext\n" +
		"## Install \t guide\x00\x1f ##\nsteps\n" +
		"#### Skipped a level\ndeep\n" +
		"### Third\nmore\n" +
		"```sh\n# a shell comment\n## not a heading\n```\n" +
		"~~~~\n# tilde fenced\n~~~\n# still inside: closed only by 4 or more\n~~~~\n" +
		"    # indented code\n" +
		"#hashtag is text\n" +
		"#\n" +
		"## Usage\nrun it\n" +
		"# Reference #\nlast\n"
	secs := Split(text, 0)
	checkSplit(t, text, 0, secs)
	want := [][]string{
		{},
		{"Guide"},
		{"Guide", "Install guide"},
		{"Guide", "Install guide", "Skipped a level"},
		{"Guide", "Install guide", "Third"},
		{"Guide", "Usage"},
		{"Reference"},
	}
	if got := paths(secs); !reflect.DeepEqual(got, want) {
		t.Fatalf("paths\n got %q\nwant %q", got, want)
	}
	if !strings.HasPrefix(secs[4].Text, "### Third\n") || !strings.Contains(secs[4].Text, "# indented code\n#hashtag is text\n#\n") {
		t.Fatalf("the fenced and indented lines belong to Third: %q", secs[4].Text)
	}
}

func TestSplitSetextHeadings(t *testing.T) {
	t.Parallel()
	text := "---\ntitle: front matter\n---\n" +
		"Title\n=====\nabout\n\n" +
		"Part one\n--------\nbody\n\n" +
		"- a list item\n---\n" +
		"two lines of\nparagraph\n---\n" +
		"### Deep\nx\n\n" +
		"***\n---\n" +
		"Part two\n---\nend\n"
	secs := Split(text, 0)
	checkSplit(t, text, 0, secs)
	want := [][]string{
		{},
		{"Title"},
		{"Title", "Part one"},
		{"Title", "Part one", "Deep"},
		{"Title", "Part two"},
	}
	if got := paths(secs); !reflect.DeepEqual(got, want) {
		t.Fatalf("paths\n got %q\nwant %q", got, want)
	}
	if secs[0].Text != "---\ntitle: front matter\n---\n" || !strings.HasPrefix(secs[1].Text, "Title\n=====\n") {
		t.Fatalf("front matter is the preamble, the setext heading starts at its text: %q / %q", secs[0].Text, secs[1].Text)
	}
}

func TestSplitPlainTextHasOnePathlessSection(t *testing.T) {
	t.Parallel()
	text := "Just prose.\n\nNo headings here at all.\n"
	secs := Split(text, 1000)
	checkSplit(t, text, 1000, secs)
	if len(secs) != 1 || len(secs[0].HeadingPath) != 0 || secs[0].Text != text {
		t.Fatalf("got %+v", secs)
	}
	if Split("", 10) != nil || SplitText("", 10) != nil {
		t.Fatal("an empty text has sections")
	}
	// SplitText reads no headings: cut for size alone, at the same
	// boundaries, every path empty.
	text = "\n# Not a heading in plain text\n\nSome prose. " + strings.Repeat("More prose here. ", 20) + "\n```\nunclosed fence\n"
	secs = SplitText(text, 100)
	checkSplit(t, text, 100, secs)
	if len(secs) < 3 || !strings.HasPrefix(secs[0].Text, "\n# Not a heading") {
		t.Fatalf("got %+v", secs)
	}
	for i, s := range secs {
		if len(s.HeadingPath) != 0 {
			t.Fatalf("section %d of plain text has the path %q", i, s.HeadingPath)
		}
	}
}

func TestSplitCRLF(t *testing.T) {
	t.Parallel()
	text := "# Top\r\n\r\n" + strings.Repeat("A line of text.\r\n", 20) + "\r\n## Sub #\r\n" +
		strings.Repeat("word ", 30) + "\r\n\r\n" + strings.Repeat("more words ", 20) + "\r\n"
	secs := Split(text, 120)
	checkSplit(t, text, 120, secs)
	for i, s := range secs {
		for _, h := range s.HeadingPath {
			if strings.ContainsAny(h, "\r\n") {
				t.Fatalf("section %d: heading %q keeps a line end", i, h)
			}
		}
		if strings.HasSuffix(s.Text, "\r") || strings.HasPrefix(s.Text, "\n") {
			t.Fatalf("section %d splits a CRLF: %q", i, s.Text)
		}
		if len(s.HeadingPath) == 1 && !strings.HasSuffix(s.Text, "\r\n") {
			t.Fatalf("section %d of lines is not cut after a CRLF: %q", i, s.Text)
		}
	}
	if got := secs[len(secs)-1].HeadingPath; !reflect.DeepEqual(got, []string{"Top", "Sub"}) {
		t.Fatalf("last path %q", got)
	}
}

// A body of one paragraph is cut at sentence ends, every piece but the
// last ending with ". " and at least half the limit long.
func TestSplitGiantParagraphAtSentences(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("## Notes\n")
	for i := 0; b.Len() < 50000; i++ {
		b.WriteString("The agent retried the call after the deadline")
		b.WriteString(strings.Repeat(" again", i%7))
		b.WriteString(". ")
	}
	text := b.String()
	const limit = 2000
	secs := Split(text, limit)
	checkSplit(t, text, limit, secs)
	if len(secs) < 25 {
		t.Fatalf("%d sections", len(secs))
	}
	for i, s := range secs[:len(secs)-1] {
		n := utf8.RuneCountInString(s.Text)
		if !strings.HasSuffix(s.Text, ". ") || n < limit/2 {
			t.Fatalf("section %d (%d runes) ends %q", i, n, s.Text[len(s.Text)-10:])
		}
		if !reflect.DeepEqual(s.HeadingPath, []string{"Notes"}) {
			t.Fatalf("section %d path %q", i, s.HeadingPath)
		}
	}
}

// Each boundary class wins over the ones after it, in the window's second
// half; a word longer than the limit is cut where the room ends.
func TestSplitCutPreference(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, text, first string }{
		{"paragraph", "aaaa bbbb. cccc\ndddd\n\neeee ffff. gggg hhhh iiii", "aaaa bbbb. cccc\ndddd\n\n"},
		{"line", "aaaa bbbb. cccc dddd\neeee ffff. gggg hhhh iiii", "aaaa bbbb. cccc dddd\n"},
		{"sentence", "aaaa bbbb cccc dddd. eeee ffff gggg hhhh iiii", "aaaa bbbb cccc dddd. "},
		{"word", "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii", "aaaa bbbb cccc dddd eeee "},
		{"first half", "aa\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "aa\n"},
		{"rune", strings.Repeat("x", 40), strings.Repeat("x", 25)},
	}
	for _, c := range cases {
		secs := Split(c.text, 25)
		checkSplit(t, c.text, 25, secs)
		if secs[0].Text != c.first {
			t.Errorf("%s: first piece %q, want %q", c.name, secs[0].Text, c.first)
		}
	}
}

func TestSplitMultibyteOnRuneBoundaries(t *testing.T) {
	t.Parallel()
	// Japanese prose has no spaces: cut after 。 when the window has one.
	ja := strings.Repeat("東京の会議は午後三時に始まります。", 40)
	secs := Split(ja, 100)
	checkSplit(t, ja, 100, secs)
	for i, s := range secs {
		if !utf8.ValidString(s.Text) {
			t.Fatalf("piece %d is not valid UTF-8", i)
		}
		if i+1 < len(secs) && !strings.HasSuffix(s.Text, "。") {
			t.Fatalf("piece %d not cut at a full stop: %q", i, s.Text)
		}
	}
	// No boundary at all: every piece is exactly the limit in runes, never
	// half a rune.
	emoji := strings.Repeat("🙂é漢", 50)
	secs = Split(emoji, 7)
	checkSplit(t, emoji, 7, secs)
	for i, s := range secs {
		if !utf8.ValidString(s.Text) || (i+1 < len(secs) && utf8.RuneCountInString(s.Text) != 7) {
			t.Fatalf("piece %d: %q", i, s.Text)
		}
	}
}

func TestSplitBlankSectionsAreMerged(t *testing.T) {
	t.Parallel()
	text := "\n\n\n# A\nshort\n"
	secs := Split(text, 100)
	checkSplit(t, text, 100, secs)
	if len(secs) != 1 || secs[0].Start != 0 || !reflect.DeepEqual(secs[0].HeadingPath, []string{"A"}) {
		t.Fatalf("leading blank lines not merged into the first section: %+v", secs)
	}
	// A run of blank lines longer than the limit must stand alone.
	text = "# A\nx\n" + strings.Repeat("\n", 30) + "y\n"
	secs = Split(text, 10)
	checkSplit(t, text, 10, secs)
	// Nothing but white space is still kept.
	text = strings.Repeat(" \n", 20)
	secs = Split(text, 8)
	checkSplit(t, text, 8, secs)
	if len(secs) != 5 {
		t.Fatalf("%d sections of white space", len(secs))
	}
}

func TestHandbook(t *testing.T) {
	t.Parallel()
	h := Handbook(1, 300)
	if h != Handbook(1, 300) || h == Handbook(2, 300) {
		t.Fatal("Handbook is not deterministic per seed")
	}
	if n := len(h); n < 900<<10 || n > 1200<<10 {
		t.Fatalf("Handbook(1, 300) is %d bytes, want about 1 MiB", n)
	}
	secs := Split(h, 16000)
	checkSplit(t, h, 16000, secs)
	if len(secs) != 300 {
		t.Fatalf("%d sections, want 300", len(secs))
	}
	depth := map[int]int{}
	for i, s := range secs {
		depth[len(s.HeadingPath)]++
		if len(s.HeadingPath) == 0 || strings.Contains(s.HeadingPath[len(s.HeadingPath)-1], "not a heading") {
			t.Fatalf("section %d path %q", i, s.HeadingPath)
		}
	}
	if depth[2] == 0 || depth[3] == 0 || depth[4] == 0 {
		t.Fatalf("path depths %v: want chapters, sections and subsections", depth)
	}
	for _, limit := range []int{100, 1000, 32000} {
		checkSplit(t, h, limit, Split(h, limit))
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("# A\ntext\n## B\n\nmore. text\n", 8)
	f.Add("\r\n\r\n# A\r\n\r\nx. y\r\n", 3)
	f.Add("```\n# x\n```\nTitle\n===\n", 5)
	f.Add("東京の会議は午後三時に始まります。🙂", 4)
	f.Add("   \n\n\t\n", 2)
	f.Add("---\na: b\n---\n# H\n", 1)
	f.Add("a\xffb\xc3", 2)
	f.Add(Handbook(3, 5), 300)
	f.Fuzz(func(t *testing.T, text string, maxChars int) {
		maxChars %= 2000
		checkSplit(t, text, maxChars, Split(text, maxChars))
		plain := SplitText(text, maxChars)
		checkSplit(t, text, maxChars, plain)
		for i, s := range plain {
			if len(s.HeadingPath) != 0 {
				t.Fatalf("plain section %d has the path %q", i, s.HeadingPath)
			}
		}
	})
}

// BenchmarkSplit splits the 1 MiB handbook at the entry body limit.
func BenchmarkSplit(b *testing.B) {
	h := Handbook(1, 300)
	b.SetBytes(int64(len(h)))
	for b.Loop() {
		Split(h, 32000)
	}
}

// BenchmarkSplitCut splits it with a limit that cuts every section.
func BenchmarkSplitCut(b *testing.B) {
	h := Handbook(1, 300)
	b.SetBytes(int64(len(h)))
	for b.Loop() {
		Split(h, 1000)
	}
}
