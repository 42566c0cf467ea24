package search_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// filterSearchCorpus stores the same varied entries in c's org (ids
// returned) and, as decoys with the same fields, in another org: words
// shared across entries so every list ranks many of them, and fields that
// split them several ways.
func filterSearchCorpus(t *testing.T, b *bundle, c knowledge.Caller) []uuid.UUID {
	t.Helper()
	words := []string{"billing", "outage", "database", "cache", "deploy", "latency"}
	var ids []uuid.UUID
	for i := range 24 {
		in := knowledge.StoreInput{
			Title: fmt.Sprintf("note %d %s %s", i, words[i%6], words[(i+1)%6]),
			Body: fmt.Sprintf("the %s service saw %s and %s during shift %d; %s again", words[i%6], words[(i+2)%6], words[(i+3)%6], i,
				words[(i*5)%6]),
			Kind:     knowledge.Kinds[i%4],
			Metadata: map[string]any{"env": []string{"prod", "staging"}[i%2], "team": fmt.Sprintf("t%d", i%3)},
			Tags:     []string{fmt.Sprintf("tag%d", i%2)},
		}
		switch i % 3 {
		case 0:
			in.Source = fmt.Sprintf("wiki/ops/%d", i)
		case 1:
			in.Source = fmt.Sprintf("jira:OPS-%d", i)
		}
		r, err := b.svc.Store(b.ctx, c, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// passes is the filters' rule applied in Go to an entry as Get reads it.
func passes(e *knowledge.Entry, f knowledge.Filters, tags []string) bool {
	if f.Kind != "" && e.Kind != f.Kind || f.Source != "" && e.Source != f.Source {
		return false
	}
	if f.SourcePrefix != "" && (len(e.Source) < len(f.SourcePrefix) || e.Source[:len(f.SourcePrefix)] != f.SourcePrefix) {
		return false
	}
	for k, v := range f.Metadata {
		if got, ok := e.Metadata[k]; !ok || fmt.Sprint(got) != fmt.Sprint(v) {
			return false
		}
	}
	for _, tag := range tags {
		if !slices.Contains(e.Tags, tag) {
			return false
		}
	}
	return true
}

// A filtered search ranks exactly the filter's entries among the unfiltered
// ranking, in the same order, in each list, whether the filter's matches
// are read first (a filter few entries pass, a document) or tested on the
// lists' candidates (Testing.FilterMatches 1 sends every filter with more
// than one match that way); both answer the same hits; another org's
// entries with the same fields never appear. The indexer gives every
// posting its entry's metadata signature, which the lexical lists drop
// rejected entries by; an entry whose postings' signature is not known
// (written by a build before db/migrations/00051) or holds every bit (as
// a colliding one may) is ranked the same.
func TestFilteredSearchIsTheFilteredSubset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mine := filterSearchCorpus(t, b, b.alice)
	theirs := filterSearchCorpus(t, b, b.eve)
	doc := b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Billing runbook", Content: manual(5, func(i int) string {
		return fmt.Sprintf("When billing latency rises, check the cache and the database (step %d).", i)
	}), Metadata: map[string]any{"env": "prod"}})
	eveDoc := b.storeDoc(t, b.eve, knowledge.DocumentInput{Title: "Billing runbook", Content: manual(2, same)})
	b.embedPending(t)
	b.indexAll(t)
	broad := knowledge.New(b.db.AppPool(t), knowledge.Options{Testing: knowledge.TestingKnobs{FilterMatches: 1}})
	entries := map[uuid.UUID]*knowledge.Entry{}
	for _, id := range append(append(slices.Clone(mine), doc.ID), sectionIDs(doc)...) {
		e, err := b.svc.Get(b.ctx, b.alice, id)
		if err != nil {
			t.Fatal(err)
		}
		entries[id] = e
	}
	foreign := map[uuid.UUID]bool{}
	for _, id := range append(theirs, sectionIDs(eveDoc)...) {
		foreign[id] = true
	}
	cases := []filterCase{
		{"metadata", knowledge.Filters{Metadata: map[string]any{"env": "prod"}}, nil, nil},
		{"metadata two keys", knowledge.Filters{Metadata: map[string]any{"env": "staging", "team": "t1"}}, nil, nil},
		{"kind", knowledge.Filters{Kind: knowledge.KindProcedural}, nil, nil},
		{"source", knowledge.Filters{Source: "wiki/ops/6"}, nil, nil},
		{"source prefix", knowledge.Filters{SourcePrefix: "wiki/"}, nil, nil},
		{"kind and metadata", knowledge.Filters{Kind: knowledge.KindSemantic, Metadata: map[string]any{"env": "prod"}}, nil, nil},
		{"metadata and tags", knowledge.Filters{Metadata: map[string]any{"team": "t2"}}, []string{"tag1"}, nil},
		{"no match", knowledge.Filters{Metadata: map[string]any{"env": "dev"}}, nil, nil},
		{"document", knowledge.Filters{}, nil, &doc.ID},
		{"document and metadata", knowledge.Filters{Metadata: map[string]any{"env": "prod"}}, nil, &doc.ID},
		{"another org's document", knowledge.Filters{}, nil, &eveDoc.ID},
	}
	var wrong, signed int
	if err := b.pool.QueryRow(b.ctx, `SELECT count(*) FILTER (WHERE p.msig IS DISTINCT FROM knowledge_metadata_sig(k.metadata)),
		       count(*) FILTER (WHERE p.msig <> 0)
		FROM knowledge_postings p JOIN knowledge k ON k.org_id = p.org_id AND k.id = p.entry_id
		WHERE p.org_id = $1`, b.org).Scan(&wrong, &signed); err != nil || wrong != 0 || signed == 0 {
		t.Fatalf("postings' signatures: %d not their entry's, %d of entries with metadata (%v)", wrong, signed, err)
	}
	for _, state := range []string{"as indexed", "signatures unknown or colliding"} {
		if state != "as indexed" {
			var unknown []uuid.UUID
			for i, id := range append(append(slices.Clone(mine), doc.ID), sectionIDs(doc)...) {
				if i%2 == 0 {
					unknown = append(unknown, id)
				}
			}
			if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge_postings SET msig = CASE WHEN entry_id = ANY($2) THEN NULL ELSE -1 END
				WHERE org_id = $1`, b.org, unknown); err != nil {
				t.Fatal(err)
			}
		}
		filteredSubset(t, b, broad, state, entries, foreign, cases, doc)
	}
}

type filterCase struct {
	name string
	f    knowledge.Filters
	tags []string
	doc  *uuid.UUID
}

// filteredSubset checks each case's lists and hits against the unfiltered
// lists of three queries (TestFilteredSearchIsTheFilteredSubset).
func filteredSubset(t *testing.T, b *bundle, broad *knowledge.Service, state string, entries map[uuid.UUID]*knowledge.Entry,
	foreign map[uuid.UUID]bool, cases []filterCase, doc *knowledge.DocumentResult) {
	t.Helper()
	for _, query := range []string{"billing cache latency", "database outage", "deploy"} {
		all, err := knowledge.SearchLists(b.ctx, b.svc, b.alice, knowledge.SearchInput{Query: query}, knowledge.MaxListDepth)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			in := knowledge.SearchInput{Query: query, Filters: tc.f, Tags: tc.tags, DocumentID: tc.doc, MinScore: ptr(0.0)}
			keep := func(id uuid.UUID) bool {
				e := entries[id]
				inDoc := tc.doc == nil || (*tc.doc == doc.ID && slices.Contains(sectionIDs(doc), id))
				return e != nil && inDoc && passes(e, tc.f, tc.tags)
			}
			var answers [2][]knowledge.Hit
			for i, svc := range []*knowledge.Service{b.svc, broad} {
				got, err := knowledge.SearchLists(b.ctx, svc, b.alice, in, knowledge.MaxListDepth)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range []struct {
					name      string
					all, some []knowledge.ListHit
				}{{"vector", all.Vector, got.Vector}, {"full text", all.FullText, got.FullText}, {"title", all.Title, got.Title}} {
					want := slices.DeleteFunc(slices.Clone(l.all), func(h knowledge.ListHit) bool { return !keep(h.ID) })
					if fmt.Sprint(l.some) != fmt.Sprint(want) {
						t.Fatalf("%s: %q %s (service %d): %s list\n got %v\nwant %v", state, query, tc.name, i, l.name, l.some, want)
					}
				}
				res, err := svc.Search(b.ctx, b.alice, in)
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range res.Hits {
					if foreign[h.ID] || !keep(h.ID) {
						t.Fatalf("%s: %q %s (service %d): hit %s does not pass the filter", state, query, tc.name, i, h.ID)
					}
				}
				answers[i] = res.Hits
			}
			if fmt.Sprint(hitIDs(answers[0])) != fmt.Sprint(hitIDs(answers[1])) {
				t.Fatalf("%s: %q %s: the two paths answer differently:\n%v\n%v", state, query, tc.name, hitIDs(answers[0]), hitIDs(answers[1]))
			}
		}
	}
}

func sectionIDs(d *knowledge.DocumentResult) []uuid.UUID {
	out := make([]uuid.UUID, len(d.Sections))
	for i, s := range d.Sections {
		out[i] = s.ID
	}
	return out
}

func hitIDs(hits []knowledge.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = fmt.Sprintf("%s %.6f", h.ID, h.Score)
	}
	return out
}

// A search of a document's sections finds them by words and by meaning,
// and nothing else of the org; hops stay within the document.
func TestSearchByDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc := b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Pump manual", Content: manual(3, same)})
	other := b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Valve manual", Content: manual(3, same)})
	plain := b.store(t, b.alice, "valves and pumps", "a plain entry about valves and pumps")
	b.embedPending(t)
	for _, mode := range knowledge.Modes {
		res, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "valves and pumps", DocumentID: &doc.ID, Mode: mode, MinScore: ptr(0.0), Limit: ptr(50)})
		if err != nil {
			t.Fatal(err)
		}
		// Its three chapters say it (the preface may not).
		if len(res.Hits) < 3 {
			t.Fatalf("mode %s: %d hits, want the document's 3 chapters: %v", mode, len(res.Hits), hitIDs(res.Hits))
		}
		for _, h := range res.Hits {
			if !slices.Contains(sectionIDs(doc), h.ID) || h.Document == nil || h.Document.ID != doc.ID {
				t.Fatalf("mode %s: hit %s is not a section of the document (%+v)", mode, h.ID, h.Document)
			}
		}
	}
	// A related entry outside the document is not added by hops.
	if _, err := b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: doc.Sections[1].ID, ToID: plain, Type: "RELATES_TO"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: doc.Sections[1].ID, ToID: other.Sections[1].ID, Type: "RELATES_TO"}); err != nil {
		t.Fatal(err)
	}
	res, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "chapter 0", DocumentID: &doc.ID, Hops: 2, Limit: ptr(50), MinScore: ptr(0.0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		if !slices.Contains(sectionIDs(doc), h.ID) {
			t.Fatalf("hops added %s, outside the document", h.ID)
		}
	}
	// Another org's search for the document finds nothing, as its
	// listing lists nothing: the id behaves as a missing one.
	res, err = b.svc.Search(b.ctx, b.eve, knowledge.SearchInput{Query: "valves and pumps", DocumentID: &doc.ID, MinScore: ptr(0.0)})
	if err != nil || len(res.Hits) != 0 {
		t.Fatalf("another org's search of the document: %v, %v", hitIDs(res.Hits), err)
	}
}

// The vector list of a filter read first ranks an entry by its best
// vector, its chunks' included, exactly as the unfiltered exact plan does:
// entries long enough to be embedded in chunks, each with a word of its own
// in its last chunk only.
func TestFilteredSearchRanksChunks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []uuid.UUID
	for i := range 12 {
		body := strings.Repeat(fmt.Sprintf("routine maintenance note %d about pumps and valves. ", i), 12) +
			[]string{"zebra crossing", "zebra migration", "llama backfill"}[i%3]
		r, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: fmt.Sprintf("maintenance %d", i), Body: body,
			Metadata: map[string]any{"env": []string{"prod", "staging"}[i%2]}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	h := jobs.NewEmbedHandler(b.pool, embed.NewLocal(), jobs.HandlerOptions{Chunk: knowledge.ChunkOptions{Chars: 200, Overlap: 25}})
	var js []knowledge.EmbeddingJob
	for _, id := range ids {
		js = append(js, knowledge.EmbeddingJob{OrgID: b.org, EntryID: id, Generation: 1})
	}
	if err := h.Process(b.ctx, js); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_chunks WHERE org_id = $1", b.org); n < 2*len(ids) {
		t.Fatalf("%d chunks; want the entries embedded in chunks", n)
	}
	prod := map[uuid.UUID]bool{}
	for i, id := range ids {
		prod[id] = i%2 == 0
	}
	broad := knowledge.New(b.db.AppPool(t), knowledge.Options{Testing: knowledge.TestingKnobs{FilterMatches: 1}})
	for _, q := range []string{"zebra migration", "llama backfill"} {
		all, err := knowledge.SearchLists(b.ctx, b.svc, b.alice, knowledge.SearchInput{Query: q, Mode: knowledge.ModeSemantic}, 100)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.DeleteFunc(slices.Clone(all.Vector), func(h knowledge.ListHit) bool { return !prod[h.ID] })
		for i, svc := range []*knowledge.Service{b.svc, broad} {
			got, err := knowledge.SearchLists(b.ctx, svc, b.alice, knowledge.SearchInput{Query: q, Mode: knowledge.ModeSemantic,
				Filters: knowledge.Filters{Metadata: map[string]any{"env": "prod"}}}, 100)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Vector) != fmt.Sprint(want) {
				t.Fatalf("%q (service %d): vector list\n got %v\nwant %v", q, i, got.Vector, want)
			}
		}
	}
}

// A filtered search records, after its answer, the pairs its org searched
// (knowledge_search_stats.searched_pairs: what Upkeep gives an HNSW index
// of its own), as the pairs' keys with the time; another org's record is
// untouched; a number is the pair of any of its spellings.
func TestAFilteredSearchRecordsItsPairs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	filterSearchCorpus(t, b, b.alice)
	filterSearchCorpus(t, b, b.eve)
	b.indexAll(t)
	b.search(t, b.alice, knowledge.SearchInput{Query: "billing outage", Mode: knowledge.ModeLexical,
		Filters: knowledge.Filters{Metadata: map[string]any{"team": "t1", "n": 42.0}}})
	recorded := func(org uuid.UUID) []string {
		t.Helper()
		rows, err := b.pool.Query(b.ctx, `SELECT k FROM knowledge_search_stats s, jsonb_object_keys(s.searched_pairs) k
			WHERE s.org_id = $1 AND (s.searched_pairs ->> k)::bigint BETWEEN extract(epoch FROM now())::bigint - 60 AND extract(epoch FROM now())::bigint ORDER BY k`, org)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	rows, err := b.pool.Query(b.ctx, `SELECT k::text FROM unnest(knowledge_metadata_pair_keys('{"team": "t1", "n": 42}')) k ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(want) != 2 {
		t.Fatalf("pair keys %v: %v", want, err)
	}
	for deadline := time.Now().Add(10 * time.Second); !slices.Equal(recorded(b.alice.OrgID), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("recorded %v, want the filter's pairs %v", recorded(b.alice.OrgID), want)
		}
	}
	if got := recorded(b.eve.OrgID); len(got) != 0 {
		t.Fatalf("another org's record holds %v", got)
	}
}
