package main

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// wordsAnalyzer splits on spaces: each word a term, counted.
func wordsAnalyzer(_ context.Context, texts []string) ([]map[string]int, error) {
	out := make([]map[string]int, len(texts))
	for i, t := range texts {
		out[i] = map[string]int{}
		for _, w := range strings.Fields(t) {
			out[i][w]++
		}
	}
	return out, nil
}

// The reference's score is the textbook formula over title and text as one
// text, with the query's repeated terms counted again; ranks go best
// first, ties by id, cut at the depth.
func TestBM25RefScoresTheTextbookFormula(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	docs := []Doc{
		{ID: "d1", Title: "zebra", Text: "zebra migration"}, // len 3
		{ID: "d2", Text: "migration of geese now"},          // len 4
		{ID: "d3", Title: "llama", Text: "llama llama"},     // len 3
		{ID: "d0", Text: "migration geese"},                 // len 2
	}
	ref, err := NewBM25Ref(ctx, docs, wordsAnalyzer)
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Log(1 + 3.5/1.5); math.Abs(IDF(4, 1)-want) > 1e-12 {
		t.Fatalf("IDF(4, 1) = %v, want %v", IDF(4, 1), want)
	}
	avg := (3.0 + 4 + 3 + 2) / 4
	part := func(tf, dl float64) float64 { return tf * (refK1 + 1) / (tf + refK1*(1-refB+refB*dl/avg)) }
	want := []float64{ // by document number
		2*IDF(4, 1)*part(2, 3) + IDF(4, 3)*part(1, 3),
		IDF(4, 3) * part(1, 4),
		0,
		IDF(4, 3) * part(1, 2),
	}
	score := make([]float64, len(docs))
	if hit := ref.score(map[string]int{"zebra": 2, "migration": 1, "unknown": 1}, score); len(hit) != 3 {
		t.Errorf("documents found %v, want 3", hit)
	}
	for i := range want {
		if math.Abs(score[i]-want[i]) > 1e-12 {
			t.Errorf("%s: score %v, want %v", docs[i].ID, score[i], want[i])
		}
	}

	got, err := ref.Rank(ctx, []string{"zebra zebra migration", "nothing shared", "geese", "migration"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range [][]string{{"d1", "d0"}, {}, {"d0", "d2"}, {"d0", "d1"}} {
		if !slices.Equal(got[i], w) {
			t.Errorf("query %d: %v, want %v", i, got[i], w)
		}
	}
	// Equal scores go by id.
	ref2, _ := NewBM25Ref(ctx, []Doc{{ID: "b", Text: "x y"}, {ID: "a", Text: "x y"}, {ID: "c", Text: "y z"}}, wordsAnalyzer)
	if got, _ := ref2.Rank(ctx, []string{"x"}, 10); !slices.Equal(got[0], []string{"a", "b"}) {
		t.Errorf("tie by id: %v", got[0])
	}
}

// The analysis is PostgreSQL's english configuration: stop words out,
// words stemmed, a repeated word counted, over several statements.
func TestPgAnalyzerIsToTsvector(t *testing.T) {
	t.Parallel()
	db := testenv.EmptyPostgres(t)
	texts := make([]string, analyzeBatch+2)
	texts[0] = "The runners were running, and the runner ran."
	texts[analyzeBatch+1] = "Statins and cholesterol"
	got, err := pgAnalyzer(db.Pool, "english")(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(texts) {
		t.Fatalf("%d results for %d texts", len(got), len(texts))
	}
	if want := map[string]int{"runner": 2, "run": 1, "ran": 1}; !maps.Equal(got[0], want) {
		t.Errorf("first text: %v, want %v", got[0], want)
	}
	if want := map[string]int{"statin": 1, "cholesterol": 1}; !maps.Equal(got[analyzeBatch+1], want) {
		t.Errorf("last text: %v, want %v", got[analyzeBatch+1], want)
	}
	if len(got[1]) != 0 {
		t.Errorf("an empty text has terms: %v", got[1])
	}
	if _, err := pgAnalyzer(db.Pool, "klingon")(context.Background(), texts[:1]); err == nil {
		t.Error("an unknown configuration gave no error")
	}
}
