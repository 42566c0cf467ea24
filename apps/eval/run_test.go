package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

func TestParseArgs(t *testing.T) {
	t.Parallel()
	c, err := parseArgs([]string{"--json", "dir", "--limit-docs", "10", "--keep"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.dir != "dir" || !c.json || !c.keep || c.limitDocs != 10 || c.depth != 100 || c.concurrency != 4 || c.analyze || !c.perTermCheck {
		t.Fatalf("got %+v", c)
	}
	if c, err := parseArgs([]string{"dir", "--per-term-check=false"}, io.Discard); err != nil || c.perTermCheck {
		t.Fatalf("--per-term-check=false: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{}, {"a", "b"}, {"--depth", "0", "d"}, {"--concurrency", "0", "d"}, {"--nope", "d"}, {"--limit-docs", "-1", "d"}} {
		var ue *usageError
		if _, err := parseArgs(bad, io.Discard); !errors.As(err, &ue) {
			t.Errorf("%q: want a usage error, got %v", bad, err)
		}
	}
	if _, err := parseArgs([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: got %v", err)
	}
}

// tinyDataset writes 30 documents on 5 topics (6 each) and one query per
// topic, judged against that topic's documents (graded 2 for the first two).
func tinyDataset(t *testing.T) string {
	t.Helper()
	topics := []struct{ query, words string }{
		{"statin drugs breast cancer", "statin cholesterol breast cancer tumour survival cohort"},
		{"autophagy longevity fasting", "autophagy lysosome fasting longevity ageing cells"},
		{"alkylphenols diet exposure", "alkylphenol nonylphenol plastic exposure dietary fish"},
		{"coffee liver enzymes", "coffee caffeine liver enzymes hepatic cirrhosis"},
		{"broccoli sulforaphane", "broccoli sulforaphane cruciferous glucosinolate sprouts"},
	}
	var corpus, queries, qrels strings.Builder
	qrels.WriteString("query-id\tcorpus-id\tscore\n")
	for ti, tp := range topics {
		w := strings.Fields(tp.words)
		fmt.Fprintf(&queries, `{"_id": "Q-%d", "text": %q}`+"\n", ti, tp.query)
		for i := range 6 {
			id := fmt.Sprintf("D-%d-%d", ti, i)
			title := fmt.Sprintf("%s and %s study %d", w[i%len(w)], w[(i+1)%len(w)], i)
			text := fmt.Sprintf("We studied %s, %s and %s in %d participants. %s", w[i%len(w)], w[(i+2)%len(w)], w[(i+3)%len(w)], 100+i, tp.words)
			if i == 5 {
				title = "" // the harness titles it from the text
			}
			fmt.Fprintf(&corpus, `{"_id": %q, "title": %q, "text": %q}`+"\n", id, title, text)
			fmt.Fprintf(&qrels, "Q-%d\t%s\t%d\n", ti, id, map[bool]int{true: 2, false: 1}[i < 2])
		}
	}
	return writeBEIR(t, corpus.String(), queries.String(), qrels.String())
}

// TestRunOnTinyDataset runs the whole harness against the real local
// PostgreSQL: text report with every row, then JSON with --keep.
func TestRunOnTinyDataset(t *testing.T) {
	t.Parallel()
	dir := tinyDataset(t)
	ctx := context.Background()
	env := map[string]string{"TEST_DATABASE_URL": testenv.DatabaseURL()}
	getenv := func(k string) string { return env[k] }

	var out bytes.Buffer
	if err := run(ctx, []string{dir, "--concurrency", "3"}, getenv, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Log("\n" + text)
	// Every tiny-set query shares words with the corpus, and any shared
	// word is a full-text match.
	if !strings.Contains(text, "answers 5 of 5 queries sharing a non-stop word") {
		t.Errorf("full-text reach: want 5 of 5")
	}
	for _, want := range []string{"nDCG@10", "fused (product)", "vector", "full text", "title", "plain RRF (k=60)", "plain BM25 (reference)", "fused against",
		"Search latency", "nonsense answered", "30 stored, 0 refused", "5 judged", "never analyzed",
		"Per-term bound", "fused, exact", "the bound never bites", "Relevance gate", "0.05 (default)", "top-1 fused score", "full text reach"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}

	out.Reset()
	if err := run(ctx, []string{"--json", "--keep", "--analyze", "--limit-queries", "2", "--limit-docs", "15", dir}, getenv, &out); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if rep.DatabaseURL == "" {
		t.Fatal("--keep did not report the database URL")
	}
	t.Cleanup(func() { dropKept(t, rep.DatabaseURL) })
	if len(rep.Rows) != 6 || rep.Queries != 2 || rep.Docs != 15 || !rep.Limited || rep.Embeddings["ready"] != 15 {
		t.Fatalf("report: %+v", rep)
	}
	for _, r := range rep.Rows {
		if r.NDCG10 < 0 || r.NDCG10 > 1 || r.Recall100 < r.Recall10 {
			t.Errorf("row out of range: %+v", r)
		}
	}
	checkPerTerm(t, &rep)
	checkGate(t, &rep)

	out.Reset()
	if err := run(ctx, []string{"--json", "--per-term-check=false", "--limit-queries", "1", "--limit-docs", "6", dir}, getenv, &out); err != nil {
		t.Fatalf("run --per-term-check=false: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "perTermCheck") {
		t.Error("--per-term-check=false still ran the check")
	}
}

// checkPerTerm: 15 entries cannot have a term over the bound, so the
// exact read must match the bounded one exactly, and its bounded rows must
// be the main scoring's.
func checkPerTerm(t *testing.T, rep *Report) {
	t.Helper()
	b := rep.PerTermCheck
	if b == nil {
		t.Fatal("no per-term check in the report")
	}
	if b.FullText.SameTop10 != 1 || b.Fused.SameTop10 != 1 || b.Terms.OverBound != 0 || b.Terms.QueryTerms == 0 || b.Terms.MaxDF == 0 {
		t.Errorf("per-term check: %+v", b)
	}
	for _, pair := range []BoundPair{b.FullText, b.Fused} {
		if pair.Exact != withName(pair.Bounded, pair.Exact.Name) {
			t.Errorf("exact differs from bounded: %+v", pair)
		}
	}
	if b.FullText.Bounded != withName(rep.Rows[2], b.FullText.Bounded.Name) || b.Fused.Bounded != withName(rep.Rows[0], b.Fused.Bounded.Name) {
		t.Errorf("bounded rows differ from the main scoring: %+v vs %+v", b, rep.Rows)
	}
}

func withName(r Row, name string) Row {
	r.Name = name
	return r
}

// checkGate: at the default minScore, SearchLists at the gate's depth must
// answer exactly the queries Search answered with default options.
func checkGate(t *testing.T, rep *Report) {
	t.Helper()
	g := rep.Gate
	if g == nil || len(g.Rows) != len(GateThresholds) || g.Queries != rep.Queries || g.Nonsense != nonsenseN {
		t.Fatalf("gate: %+v", g)
	}
	for _, r := range g.Rows {
		if !r.Default {
			continue
		}
		if got := int(r.Answered*float64(g.Queries) + 0.5); got != rep.Answered || r.NonsenseAnswered != rep.Nonsense.Answered {
			t.Errorf("gate at the default answers %d real and %d nonsense queries, Search %d and %d",
				got, r.NonsenseAnswered, rep.Answered, rep.Nonsense.Answered)
		}
	}
}

// dropKept drops the database a --keep run left.
func dropKept(t *testing.T, u string) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Error(err)
		return
	}
	s := &scratch{name: cfg.Database, admin: testenv.DatabaseURL()}
	if err := s.drop(context.Background()); err != nil {
		t.Error(err)
	}
}
