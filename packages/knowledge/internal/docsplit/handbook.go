package docsplit

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Handbook writes a deterministic Markdown handbook of the given number of
// headings for tests and benchmarks: the same seed gives the same text on
// every machine and Go release (math/rand/v2's PCG is specified). 300
// sections make about 1 MiB, the size store_document takes in one call.
//
// It has what real handbooks have and a splitter must get right: chapters
// (##) with sections (###) and subsections (####), a level skipped now and
// then (#### right under ##), fenced code blocks with shell comments that
// look like headings, lists, tables, CRLF-free prose with a few non-ASCII
// words. Every section is shorter than 16,000 runes, so
// Split(Handbook(seed, n), limit) for a limit of at least that gives
// exactly n sections, the first being the title's ("# ...").
func Handbook(seed int64, sections int) string {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed_d0c5))
	var b strings.Builder
	b.Grow(sections * 3600)
	fmt.Fprintf(&b, "# %s handbook\n\n", title(r, 2))
	paragraphs(&b, r, 2)
	chapter, sub := 0, 0
	for i := 1; i < sections; i++ {
		switch n := r.IntN(10); {
		case i == 1 || n == 0:
			chapter, sub = chapter+1, 0
			fmt.Fprintf(&b, "## %d %s\n\n", chapter, title(r, 3))
		case n <= 6 || sub == 0 && n == 7:
			sub++
			fmt.Fprintf(&b, "### %d.%d %s\n\n", chapter, sub, title(r, 4))
		default:
			fmt.Fprintf(&b, "#### %s\n\n", title(r, 3))
		}
		section(&b, r)
	}
	return b.String()
}

// section writes one section's body: paragraphs and, now and then, a code
// block, a list or a table.
func section(b *strings.Builder, r *rand.Rand) {
	start := b.Len()
	paragraphs(b, r, 2+r.IntN(4))
	switch r.IntN(6) {
	case 0:
		b.WriteString("```sh\n# restart the worker (a comment, not a heading)\n")
		for range 2 + r.IntN(6) {
			fmt.Fprintf(b, "ctl %s --%s=%d\n", word(r), word(r), r.IntN(1000))
		}
		b.WriteString("## also not a heading\n```\n\n")
	case 1:
		for range 3 + r.IntN(5) {
			fmt.Fprintf(b, "- %s\n", sentence(r))
		}
		b.WriteString("\n")
	case 2:
		b.WriteString("| setting | default | meaning |\n|---|---|---|\n")
		for range 2 + r.IntN(5) {
			fmt.Fprintf(b, "| `%s_%s` | %d | %s |\n", word(r), word(r), r.IntN(100), sentence(r))
		}
		b.WriteString("\n")
	}
	if b.Len()-start < 7000 { // a paragraph has at most 2,600 bytes: the section stays under 16,000
		paragraphs(b, r, 1+r.IntN(3))
	}
}

// paragraphs writes n paragraphs of 3 to 12 sentences.
func paragraphs(b *strings.Builder, r *rand.Rand, n int) {
	for range n {
		for j := range 3 + r.IntN(8) {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(sentence(r))
		}
		b.WriteString("\n\n")
	}
}

// sentence is 6 to 18 words, capitalised, ending with a full stop.
func sentence(r *rand.Rand) string {
	n := 6 + r.IntN(13)
	w := make([]string, n)
	for i := range w {
		w[i] = word(r)
	}
	w[0] = capital(w[0])
	return strings.Join(w, " ") + "."
}

// title is n capitalised words.
func title(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = capital(word(r))
	}
	return strings.Join(w, " ")
}

// capital is s with its first rune upper case.
func capital(s string) string {
	c, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(c)) + s[n:]
}

func word(r *rand.Rand) string { return vocabulary[r.IntN(len(vocabulary))] }

// vocabulary is the handbook's words: an operations team's, and a few
// with runes of more than one byte.
var vocabulary = strings.Fields(`agent fleet worker queue retry backoff deadline
	token scope tenant org quota budget limit replica primary failover restore
	backup snapshot index vacuum latency throughput p99 incident postmortem
	runbook escalation pager rotation deploy rollback canary release migration
	schema column table query plan cache redis postgres vector embedding model
	search rank recall precision section document heading paragraph source
	metadata kind episode procedure reference audit trail retention purge
	export import cluster shard node disk memory cpu network timeout socket
	certificate secret key vault policy role grant review approval change
	window freeze outage alert threshold dashboard metric trace span log
	naïve café façade Größe über señal déjà-vu smörgåsbord`)
