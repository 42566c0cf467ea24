package main

import (
	"fmt"
	"strings"
	"testing"
)

// synthetic is a collection of 40 queries, each with 5 relevant documents
// of its own and one shared with the next query, and 100 unjudged ones.
func synthetic() *Dataset {
	ds := &Dataset{Name: "syn", Qrels: map[string]Judgments{}}
	for d := range 300 {
		ds.Docs = append(ds.Docs, Doc{ID: fmt.Sprintf("d%d", d), Title: fmt.Sprintf("title %d", d),
			Text: strings.Repeat(fmt.Sprintf("words of document %d. ", d), 40)})
	}
	for q := range 40 {
		id := fmt.Sprintf("q%d", q)
		ds.Queries = append(ds.Queries, Query{ID: id, Text: fmt.Sprintf("query %d", q)})
		j := Judgments{}
		for i := range 5 {
			j[fmt.Sprintf("d%d", q*5+i)] = 1 + i%2
		}
		j[fmt.Sprintf("d%d", (q+1)*5%200)] = 1
		ds.Qrels[id] = j
	}
	return ds
}

func TestVariantsAreDeterministic(t *testing.T) {
	t.Parallel()
	for _, v := range Variants {
		a, err := synthetic().Variant(v)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := synthetic().Variant(v)
		if fmt.Sprint(a.Docs) != fmt.Sprint(b.Docs) || fmt.Sprint(a.Queries) != fmt.Sprint(b.Queries) || fmt.Sprint(a.Qrels) != fmt.Sprint(b.Qrels) {
			t.Errorf("%s differs between two runs", v)
		}
	}
	if _, err := synthetic().Variant("nope"); err == nil || !strings.Contains(err.Error(), "long-queries") {
		t.Errorf("an unknown variant must be refused naming the known ones: %v", err)
	}
}

// Long queries: each is a document's text, which leaves the corpus, and
// asks for the documents co-cited with it, never itself.
func TestVariantLongQueries(t *testing.T) {
	t.Parallel()
	ds, _ := synthetic().Variant(VariantLongQueries)
	inCorpus := map[string]bool{}
	for _, d := range ds.Docs {
		inCorpus[d.ID] = true
	}
	if len(ds.Queries) == 0 {
		t.Fatal("no long query")
	}
	for _, q := range ds.Queries {
		doc := strings.TrimPrefix(q.ID, "LQ-")
		if inCorpus[doc] || len([]rune(q.Text)) > longQueryChars || len(q.Text) < longQueryChars/2 {
			t.Fatalf("query %s: its document in the corpus %v, %d characters", q.ID, inCorpus[doc], len(q.Text))
		}
		j := ds.Qrels[q.ID]
		if j.relevant() < longQueryMinRel || j[doc] != 0 {
			t.Fatalf("query %s: judgments %v", q.ID, j)
		}
		for d := range j {
			if !inCorpus[d] {
				t.Fatalf("query %s judges %s, which is not in the corpus", q.ID, d)
			}
		}
	}
}

// Unanswerable: no document relevant to an unanswerable query is left;
// every other query keeps at least one.
func TestVariantUnanswerable(t *testing.T) {
	t.Parallel()
	full := synthetic()
	ds, _ := full.Variant(VariantUnanswerable)
	inCorpus := map[string]bool{}
	for _, d := range ds.Docs {
		inCorpus[d.ID] = true
	}
	if n := len(ds.Unanswerable); n < len(full.Queries)/5 || n == len(full.Queries) {
		t.Fatalf("%d of %d queries unanswerable", n, len(full.Queries))
	}
	for _, q := range ds.Judged() {
		left := 0
		for d, g := range full.Qrels[q.ID] {
			if g > 0 && inCorpus[d] {
				left++
			}
		}
		if ds.Unanswerable[q.ID] != (left == 0) || ds.Qrels[q.ID].relevant() != left {
			t.Fatalf("query %s: unanswerable %v, %d relevant documents left, judged %v", q.ID, ds.Unanswerable[q.ID], left, ds.Qrels[q.ID])
		}
	}
}

// Long entries: every document is in exactly one bundle, and a bundle is
// judged by its best document.
func TestVariantLongEntries(t *testing.T) {
	t.Parallel()
	full := synthetic()
	ds, _ := full.Variant(VariantLongEntries)
	if want := (len(full.Docs) + bundleDocs - 1) / bundleDocs; len(ds.Docs) != want {
		t.Fatalf("%d bundles, want %d", len(ds.Docs), want)
	}
	for _, q := range full.Judged() {
		for d, g := range full.Qrels[q.ID] {
			found := false
			for _, b := range ds.Docs {
				if strings.Contains(b.Text, fmt.Sprintf("words of document %s. ", strings.TrimPrefix(d, "d"))) {
					found = true
					if ds.Qrels[q.ID][b.ID] < g {
						t.Fatalf("bundle %s judged %d for %s, its document %s %d", b.ID, ds.Qrels[q.ID][b.ID], q.ID, d, g)
					}
				}
			}
			if !found {
				t.Fatalf("document %s in no bundle", d)
			}
		}
	}
}

func TestAUC(t *testing.T) {
	t.Parallel()
	if a := AUC([]float64{0.9, 0.8}, []float64{0.1, 0.2}); a != 1 {
		t.Errorf("separated: %v", a)
	}
	if a := AUC([]float64{0.5}, []float64{0.5}); a != 0.5 {
		t.Errorf("tied: %v", a)
	}
	if a := AUC([]float64{0.1, 0.9}, []float64{0.5}); a != 0.5 {
		t.Errorf("half: %v", a)
	}
}

// A variant written in the BEIR layout reads back the same.
func TestWriteBEIRRoundTrip(t *testing.T) {
	t.Parallel()
	ds, _ := synthetic().Variant(VariantUnanswerable)
	dir := t.TempDir()
	if err := ds.WriteBEIR(dir); err != nil {
		t.Fatal(err)
	}
	got, err := ReadBEIR(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Docs) != fmt.Sprint(ds.Docs) || fmt.Sprint(got.Queries) != fmt.Sprint(ds.Queries) || fmt.Sprint(got.Qrels) != fmt.Sprint(ds.Qrels) {
		t.Fatal("the collection read back differs")
	}
}
