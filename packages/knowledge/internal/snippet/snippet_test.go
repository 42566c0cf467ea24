package snippet

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOf(t *testing.T) {
	t.Parallel()
	long := func(prefix int, mid string, suffix int) string {
		return strings.Repeat("a", prefix) + mid + strings.Repeat("z", suffix)
	}
	t.Run("short body whole", func(t *testing.T) {
		if got := Of("short body", "nothing"); got != "short body" {
			t.Fatal(got)
		}
	})
	t.Run("centred on the query, case-insensitive", func(t *testing.T) {
		body := long(1000, " NEEDLE here ", 1000)
		got := Of(body, "needle HERE")
		if utf8.RuneCountInString(got) != Chars {
			t.Fatalf("%d chars", utf8.RuneCountInString(got))
		}
		i := strings.Index(got, "NEEDLE here")
		if i < 0 {
			t.Fatalf("match missing: %q", got)
		}
		centre := utf8.RuneCountInString(got[:i]) + len("NEEDLE here")/2
		if centre < 110 || centre > 130 {
			t.Fatalf("match centred at %d of 240", centre)
		}
		if !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") {
			t.Fatalf("cut sides must show an ellipsis: %q", got)
		}
	})
	t.Run("first matching word", func(t *testing.T) {
		body := long(1000, " beta ", 1000)
		got := Of(body, "alpha beta gamma")
		if !strings.Contains(got, "beta") {
			t.Fatalf("%q", got)
		}
	})
	t.Run("no match: the start", func(t *testing.T) {
		body := long(1000, "", 1000)
		got := Of(body, "nothing")
		if !strings.HasPrefix(got, "aaaa") || !strings.HasSuffix(got, "…") || utf8.RuneCountInString(got) != 240 {
			t.Fatalf("%q", got)
		}
	})
	t.Run("match near the end keeps 240 characters", func(t *testing.T) {
		body := long(1000, "needle", 3)
		got := Of(body, "needle")
		if !strings.HasSuffix(got, "needlezzz") || utf8.RuneCountInString(got) != 240 {
			t.Fatalf("%q", got)
		}
	})
	t.Run("rune safe", func(t *testing.T) {
		// Multi-byte characters everywhere, including ones whose lowercase
		// has another byte length (İ, K as Kelvin sign).
		body := strings.Repeat("日本語😀İK", 200) + " Trouvé ÉLAN " + strings.Repeat("ß€", 300)
		for _, q := range []string{"élan", "trouvé", "😀", "zzz", "İ"} {
			got := Of(body, q)
			if !utf8.ValidString(got) || utf8.RuneCountInString(got) > Chars {
				t.Fatalf("query %q: invalid or too long snippet", q)
			}
		}
		if got := Of(body, "élan"); !strings.Contains(got, "ÉLAN") {
			t.Fatalf("case-insensitive multi-byte match missing: %q", got)
		}
	})
	t.Run("ASCII bodies take a byte path that cuts the same", func(t *testing.T) {
		ascii := strings.Repeat("Some Words about Kafka and LAG. ", 60) + "the WHOLE query here. " + strings.Repeat("more filler text ", 60)
		// One non-ASCII character far past any window sends the body down
		// the rune path; the snippets must not differ.
		mixed := ascii + strings.Repeat("x", 300) + "é"
		for _, q := range []string{"whole QUERY", "kafka", "nothing at all", "why is lag", "filler", "about"} {
			a, m := Of(ascii, q), Of(mixed, q)
			if a != m {
				t.Fatalf("query %q:\nbytes %q\nrunes %q", q, a, m)
			}
		}
	})
}

func TestInCentredOnThePart(t *testing.T) {
	t.Parallel()
	body := "river " + strings.Repeat("filler ", 800) + "the zebra crossing at the river " + strings.Repeat("filler ", 200)
	rs := []rune(body)
	from := strings.Index(body, "the zebra") - 300
	sp := struct{ Start, End int }{from, from + 600}
	// Of alone centres on the first query word in the body ("river",
	// at the start); In on its match inside the chunk.
	if s := Of(body, "river zebra"); strings.Contains(s, "zebra") {
		t.Fatalf("plain snippet %q", s)
	}
	s := In(body, "river zebra", sp.Start, sp.End)
	if !strings.Contains(s, "zebra crossing") || len([]rune(s)) > Chars {
		t.Fatalf("chunk snippet %q", s)
	}
	// No query word in the part: its middle.
	s = In(body, "nothing here", 2000, 2600)
	if want := string(rs[2300-Chars/2+1 : 2300-Chars/2+10]); !strings.Contains(s, want) {
		t.Fatalf("middle of the chunk: %q", s)
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	if got := Cut("short", 10); got != "short" {
		t.Fatalf("%q", got)
	}
	if got := Cut("日本語のテキスト", 4); got != "日本語…" {
		t.Fatalf("%q", got)
	}
	if got := Cut("anything", 0); got != "" {
		t.Fatalf("%q", got)
	}
}

func TestPassage(t *testing.T) {
	t.Parallel()
	filler := func(n int) string { return strings.Repeat("lorem ", n/6) }
	t.Run("short body whole", func(t *testing.T) {
		if got := Passage("a short note", "anything", 100, -1, -1); got != "a short note" {
			t.Fatal(got)
		}
	})
	t.Run("the window with the most distinct query words", func(t *testing.T) {
		// "key" alone early, "rotate" and "key" and "signing" together late.
		body := filler(600) + " key " + filler(3000) + " rotate the signing key " + filler(3000)
		got := Passage(body, "How do I rotate the signing KEY?", 200, -1, -1)
		if utf8.RuneCountInString(got) != 200 || !strings.Contains(got, "rotate the signing key") {
			t.Fatalf("%q", got)
		}
	})
	t.Run("the nearest chunk when no word occurs", func(t *testing.T) {
		body := filler(3000) + "MIDDLE" + filler(3000)
		at := strings.Index(body, "MIDDLE")
		got := Passage(body, "nothing matches", 100, at-50, at+56)
		if !strings.Contains(got, "MIDDLE") {
			t.Fatalf("%q", got)
		}
		if got := Passage(body, "nothing matches", 100, -1, -1); got != body[:100] {
			t.Fatalf("no match, no chunk: %q, want the start", got)
		}
	})
	t.Run("runes, never bytes", func(t *testing.T) {
		body := strings.Repeat("é", 5000) + " Schlüssel " + strings.Repeat("ü", 5000)
		got := Passage(body, "schlüssel", 300, -1, -1)
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) != 300 || !strings.Contains(got, "Schlüssel") {
			t.Fatalf("%d runes, valid %v", utf8.RuneCountInString(got), utf8.ValidString(got))
		}
	})
}

// A reranked search cuts the passages of up to 30 candidates: what one of
// a 32,000-character body with a paragraph-long query costs.
func BenchmarkPassage(b *testing.B) {
	body := strings.Repeat("the quick brown fox jumps over the lazy dog while it rains. ", 540)[:32000]
	query := strings.Repeat("which animals jump over sleeping dogs in the rain and why do foxes ", 4)
	for b.Loop() {
		Passage(body, query, 1000, -1, -1)
	}
}
