package knowledge_test

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

func TestRRFScore(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ranks []int
		want  float64
	}{
		{[]int{1, 1, 1}, 1},
		{[]int{1, 0, 0}, 1 / 1.6},
		{[]int{0, 1, 1}, 1.3 / 1.6},
		{[]int{2, 0, 0}, 61.0 / 62 / 1.6},
		{[]int{1, 2, 3}, (1 + 0.3*(61.0/62+61.0/63)) / 1.6},
		{[]int{40, 40, 40}, 61.0 / 100},
		{[]int{0, 0, 0}, 0},
	}
	for _, c := range cases {
		if got := knowledge.RRFScore(c.ranks...); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("RRFScore(%v) = %v, want %v", c.ranks, got, c.want)
		}
	}
	// Rank 1 in one list beats rank 2 in it; another list agreeing adds;
	// the strongest list leads: two lists' rank 50 do not beat one's rank 1.
	if knowledge.RRFScore(1, 0, 0) <= knowledge.RRFScore(2, 0, 0) || knowledge.RRFScore(1, 1, 0) <= knowledge.RRFScore(1, 0, 0) ||
		knowledge.RRFScore(0, 50, 50) >= knowledge.RRFScore(1, 0, 0) {
		t.Error("RRF order broken")
	}
}

func TestNormaliseTag(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"  Go_Lang ":  "go-lang",
		"PGX  Pool":   "pgx-pool",
		"a__b--c":     "a-b-c",
		"a - b":       "a-b",
		"Ünïcode":     "ünïcode", // lowercased, then refused as not kebab by Store
		"already-ok1": "already-ok1",
	} {
		if got := knowledge.NormaliseTag(in); got != want {
			t.Errorf("NormaliseTag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSnippet(t *testing.T) {
	t.Parallel()
	long := func(prefix int, mid string, suffix int) string {
		return strings.Repeat("a", prefix) + mid + strings.Repeat("z", suffix)
	}
	t.Run("short body whole", func(t *testing.T) {
		if got := knowledge.Snippet("short body", "nothing"); got != "short body" {
			t.Fatal(got)
		}
	})
	t.Run("centred on the query, case-insensitive", func(t *testing.T) {
		body := long(1000, " NEEDLE here ", 1000)
		got := knowledge.Snippet(body, "needle HERE")
		if utf8.RuneCountInString(got) != knowledge.SnippetChars {
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
		got := knowledge.Snippet(body, "alpha beta gamma")
		if !strings.Contains(got, "beta") {
			t.Fatalf("%q", got)
		}
	})
	t.Run("no match: the start", func(t *testing.T) {
		body := long(1000, "", 1000)
		got := knowledge.Snippet(body, "nothing")
		if !strings.HasPrefix(got, "aaaa") || !strings.HasSuffix(got, "…") || utf8.RuneCountInString(got) != 240 {
			t.Fatalf("%q", got)
		}
	})
	t.Run("match near the end keeps 240 characters", func(t *testing.T) {
		body := long(1000, "needle", 3)
		got := knowledge.Snippet(body, "needle")
		if !strings.HasSuffix(got, "needlezzz") || utf8.RuneCountInString(got) != 240 {
			t.Fatalf("%q", got)
		}
	})
	t.Run("rune safe", func(t *testing.T) {
		// Multi-byte characters everywhere, including ones whose lowercase
		// has another byte length (İ, K as Kelvin sign).
		body := strings.Repeat("日本語😀İK", 200) + " Trouvé ÉLAN " + strings.Repeat("ß€", 300)
		for _, q := range []string{"élan", "trouvé", "😀", "zzz", "İ"} {
			got := knowledge.Snippet(body, q)
			if !utf8.ValidString(got) || utf8.RuneCountInString(got) > knowledge.SnippetChars {
				t.Fatalf("query %q: invalid or too long snippet", q)
			}
		}
		if got := knowledge.Snippet(body, "élan"); !strings.Contains(got, "ÉLAN") {
			t.Fatalf("case-insensitive multi-byte match missing: %q", got)
		}
	})
	t.Run("ASCII bodies take a byte path that cuts the same", func(t *testing.T) {
		ascii := strings.Repeat("Some Words about Kafka and LAG. ", 60) + "the WHOLE query here. " + strings.Repeat("more filler text ", 60)
		// One non-ASCII character far past any window sends the body down
		// the rune path; the snippets must not differ.
		mixed := ascii + strings.Repeat("x", 300) + "é"
		for _, q := range []string{"whole QUERY", "kafka", "nothing at all", "why is lag", "filler", "about"} {
			a, m := knowledge.Snippet(ascii, q), knowledge.Snippet(mixed, q)
			if a != m {
				t.Fatalf("query %q:\nbytes %q\nrunes %q", q, a, m)
			}
		}
	})
}
