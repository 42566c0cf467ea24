package main

import (
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"unicode/utf8"
)

// Variants of a collection (--variant), built from its own documents and
// judgments, for the shapes of search that a collection of short questions
// and abstracts does not test (docs/benchmarks.md, "Collections"). Each is
// deterministic (a fixed seed), so runs compare.
const (
	// VariantLongQueries: whole paragraphs as queries, as in argument
	// retrieval (ArguAna): a document's title and text, cut at
	// longQueryChars, asks for the documents judged relevant to the same
	// query of the source collection as it (co-cited), graded by the
	// weaker of the two links. The query documents leave the corpus.
	VariantLongQueries = "long-queries"
	// VariantLongEntries: the corpus bundled into long entries of
	// bundleDocs documents each (a report of several sections), judged by
	// their best document. An entry must be found by its best passage.
	VariantLongEntries = "long-entries"
	// VariantUnanswerable: a fifth of the queries (drawn among those with
	// at most unanswerableMaxRel relevant documents) have every document
	// judged relevant to them left out of the store, and so do the queries
	// whose relevant documents were all among those; they have no answer,
	// and the report says how well the top score tells them apart from
	// the others (AUC).
	VariantUnanswerable = "unanswerable"

	variantSeed     = 20261126
	longQueries     = 300
	longQueryChars  = 1000
	longQueryMinRel = 3
	bundleDocs      = 8
	// unanswerableMaxRel: a query left without answers has at most this
	// many relevant documents, all taken out of the corpus.
	unanswerableMaxRel = 20
)

// Variants lists the names --variant takes.
var Variants = []string{VariantLongQueries, VariantLongEntries, VariantUnanswerable}

// Variant derives the named variant of ds; "" is ds itself.
func (ds *Dataset) Variant(name string) (*Dataset, error) {
	switch name {
	case "":
		return ds, nil
	case VariantLongQueries:
		return ds.longQueries(), nil
	case VariantLongEntries:
		return ds.longEntries(), nil
	case VariantUnanswerable:
		return ds.unanswerable(), nil
	}
	return nil, fmt.Errorf("--variant %q: must be one of %s", name, strings.Join(Variants, ", "))
}

func (ds *Dataset) rng() *mrand.Rand { return mrand.New(mrand.NewPCG(variantSeed, variantSeed)) }

// longQueries: see VariantLongQueries.
func (ds *Dataset) longQueries() *Dataset {
	// Each document's links: query -> grade.
	links := map[string]map[string]int{}
	for _, q := range ds.Judged() {
		for d, g := range ds.Qrels[q.ID] {
			if g > 0 {
				if links[d] == nil {
					links[d] = map[string]int{}
				}
				links[d][q.ID] = g
			}
		}
	}
	byID := make(map[string]Doc, len(ds.Docs))
	for _, d := range ds.Docs {
		byID[d.ID] = d
	}
	// Candidates: documents with text, co-cited with enough others.
	var cands []string
	for _, d := range ds.Docs {
		if len(links[d.ID]) > 0 && utf8.RuneCountInString(d.Text) >= longQueryChars/2 {
			cands = append(cands, d.ID)
		}
	}
	r := ds.rng()
	r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	out := &Dataset{Name: ds.Name + "-" + VariantLongQueries, Qrels: map[string]Judgments{}}
	asQuery := map[string]bool{}
	for _, id := range cands {
		if len(out.Queries) == longQueries {
			break
		}
		j := Judgments{}
		for q, g := range links[id] {
			for d, g2 := range ds.Qrels[q] {
				if g2 > 0 && d != id && !asQuery[d] {
					j[d] = max(j[d], min(g, g2))
				}
			}
		}
		if j.relevant() < longQueryMinRel {
			continue
		}
		asQuery[id] = true
		d := byID[id]
		out.Queries = append(out.Queries, Query{ID: "LQ-" + id, Text: cutWords(d.Title+". "+d.Text, longQueryChars)})
		out.Qrels["LQ-"+id] = j
	}
	for _, d := range ds.Docs {
		if !asQuery[d.ID] {
			out.Docs = append(out.Docs, d)
		}
	}
	// A query document judged for an earlier query leaves the corpus too;
	// a query left with too few judgments leaves the set.
	kept := out.Queries[:0]
	for _, q := range out.Queries {
		j := out.Qrels[q.ID]
		for d := range j {
			if asQuery[d] {
				delete(j, d)
			}
		}
		if j.relevant() >= longQueryMinRel {
			kept = append(kept, q)
		} else {
			delete(out.Qrels, q.ID)
		}
	}
	out.Queries = kept
	return out
}

// longEntries: see VariantLongEntries.
func (ds *Dataset) longEntries() *Dataset {
	docs := slices.Clone(ds.Docs)
	r := ds.rng()
	r.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	out := &Dataset{Name: ds.Name + "-" + VariantLongEntries, Queries: ds.Queries, Qrels: map[string]Judgments{}}
	bundleOf := map[string]string{}
	for i := 0; i < len(docs); i += bundleDocs {
		part := docs[i:min(i+bundleDocs, len(docs))]
		id := fmt.Sprintf("B-%04d", i/bundleDocs)
		var b strings.Builder
		for _, d := range part {
			bundleOf[d.ID] = id
			fmt.Fprintf(&b, "%s\n\n%s\n\n", d.Title, d.Text)
		}
		out.Docs = append(out.Docs, Doc{ID: id, Title: fmt.Sprintf("Collected abstracts, part %d", i/bundleDocs+1), Text: b.String()})
	}
	for q, j := range ds.Qrels {
		nj := Judgments{}
		for d, g := range j {
			if b, ok := bundleOf[d]; ok {
				if old, seen := nj[b]; !seen || g > old {
					nj[b] = g
				}
			}
		}
		out.Qrels[q] = nj
	}
	return out
}

// unanswerable: see VariantUnanswerable. Unanswerable marks its queries.
func (ds *Dataset) unanswerable() *Dataset {
	qs := ds.Judged()
	r := ds.rng()
	order := r.Perm(len(qs))
	gone := map[string]bool{}
	out := &Dataset{Name: ds.Name + "-" + VariantUnanswerable, Queries: qs, Qrels: map[string]Judgments{}, Unanswerable: map[string]bool{}}
	picked := 0
	for _, i := range order {
		// Queries of many relevant documents would take much of the
		// corpus with them.
		if picked == len(qs)/5 || ds.Qrels[qs[i].ID].relevant() > unanswerableMaxRel {
			continue
		}
		picked++
		out.Unanswerable[qs[i].ID] = true
		for d, g := range ds.Qrels[qs[i].ID] {
			if g > 0 {
				gone[d] = true
			}
		}
	}
	for _, d := range ds.Docs {
		if !gone[d.ID] {
			out.Docs = append(out.Docs, d)
		}
	}
	for _, q := range qs {
		j := Judgments{}
		for d, g := range ds.Qrels[q.ID] {
			if !gone[d] {
				j[d] = g
			}
		}
		if j.relevant() == 0 {
			out.Unanswerable[q.ID] = true
			j = Judgments{}
			for d := range ds.Qrels[q.ID] {
				j[d] = 0 // judged, nothing relevant in the store
			}
		}
		out.Qrels[q.ID] = j
	}
	return out
}

// cutWords keeps at most n runes of s, ending at a word boundary.
func cutWords(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	s = cut(s, n)
	if i := strings.LastIndexByte(s, ' '); i > n/2 {
		s = s[:i]
	}
	return s
}
