package search_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

type corpus struct {
	pool, redis, bread, foreign uuid.UUID
}

func seed(t *testing.T, b *bundle) corpus {
	t.Helper()
	var c corpus
	c.pool = b.store(t, b.alice, "Postgres connection pool exhausted",
		"When pgxpool reaches MaxConns, Acquire blocks until a connection is released back to the pool.", "postgres", "pgx")
	c.redis = b.store(t, b.bob, "Redis eviction policy",
		"allkeys-lru evicts keys when maxmemory is reached; the connection pool of the client is unaffected.", "redis")
	c.bread = b.store(t, b.alice, "Banana bread", "Mix flour, eggs and ripe bananas; bake for an hour.", "cooking")
	c.foreign = b.store(t, b.eve, "Postgres connection pool exhausted",
		"When pgxpool reaches MaxConns, Acquire blocks until a connection is released back to the pool.", "postgres", "pgx")
	b.embedPending(t)
	return c
}

func has(hits []knowledge.Hit, id uuid.UUID) *knowledge.Hit {
	for i := range hits {
		if hits[i].ID == id {
			return &hits[i]
		}
	}
	return nil
}

func TestSearchHybrid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := seed(t, b)
	r := b.search(t, b.bob, knowledge.SearchInput{Query: "connection pool"})
	if !r.VectorSearch || r.Notice != "" {
		t.Fatalf("vector search should run: %+v", r)
	}
	if len(r.Hits) == 0 || r.Hits[0].ID != c.pool {
		t.Fatalf("want the pool entry first, got %v", ids(r.Hits))
	}
	top := r.Hits[0]
	if top.VectorRank != 1 || top.FullTextRank != 1 || top.TitleRank != 1 || top.Score < 0.9 || !top.Signals.TitleContains {
		t.Fatalf("the best hit of all three lists, holding the query in its title, scores near 1: %+v", top)
	}
	if h := has(r.Hits, c.redis); h == nil || h.FullTextRank == 0 || h.TitleRank != 0 {
		t.Fatalf("redis entry should be a full-text hit only by words: %+v", h)
	}
	if has(r.Hits, c.foreign) != nil {
		t.Fatal("another org's entry leaked into the results")
	}
	// The other org sees only its own entry.
	r = b.search(t, b.eve, knowledge.SearchInput{Query: "connection pool"})
	if got := ids(r.Hits); len(got) != 1 || got[0] != c.foreign {
		t.Fatalf("eve sees %v", got)
	}
	// limit
	r = b.search(t, b.bob, knowledge.SearchInput{Query: "pool", Limit: new(1)})
	if len(r.Hits) != 1 {
		t.Fatalf("limit 1 gave %d hits", len(r.Hits))
	}
	// efSearch extremes are accepted and still find the entry.
	for _, ef := range []int{1, 200} {
		r = b.search(t, b.bob, knowledge.SearchInput{Query: "banana bread", EfSearch: new(ef)})
		if len(r.Hits) == 0 || r.Hits[0].ID != c.bread {
			t.Fatalf("efSearch %d: %v", ef, ids(r.Hits))
		}
	}
}

func TestSearchPendingFoundByWords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seed(t, b)
	pending := b.store(t, b.alice, "Tuning the connection pool", "Set MaxConns to twice the cores.")
	r := b.search(t, b.alice, knowledge.SearchInput{Query: "connection pool"})
	h := has(r.Hits, pending)
	if h == nil || h.EmbeddingStatus != "pending" || h.VectorRank != 0 || h.FullTextRank == 0 || h.TitleRank == 0 {
		t.Fatalf("pending entry: %+v", h)
	}
}

func TestSearchFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := seed(t, b)
	// tags: all of, lowercased and normalised like Store's.
	r := b.search(t, b.alice, knowledge.SearchInput{Query: "pool", Tags: []string{"Postgres", "PGX"}})
	if got := ids(r.Hits); len(got) != 1 || got[0] != c.pool {
		t.Fatalf("tags postgres+pgx: %v", got)
	}
	r = b.search(t, b.alice, knowledge.SearchInput{Query: "pool", Tags: []string{"postgres", "redis"}})
	if len(r.Hits) != 0 {
		t.Fatalf("no entry has both tags: %v", ids(r.Hits))
	}

	// superseded: left out by default, included on request naming the head.
	newer := b.store(t, b.alice, "Connection pool sizing", "Size the pool to the database's cores.")
	b.embedPending(t)
	if _, err := b.svc.Supersede(b.ctx, b.alice, c.pool, newer); err != nil {
		t.Fatal(err)
	}
	r = b.search(t, b.alice, knowledge.SearchInput{Query: "connection pool"})
	if has(r.Hits, c.pool) != nil || has(r.Hits, newer) == nil {
		t.Fatalf("superseded entry must be left out: %v", ids(r.Hits))
	}
	r = b.search(t, b.alice, knowledge.SearchInput{Query: "connection pool", IncludeSuperseded: true})
	if h := has(r.Hits, c.pool); h == nil || !h.Superseded || h.HeadID == nil || *h.HeadID != newer {
		t.Fatalf("superseded hit must name its head: %+v", h)
	}

	// expired: expires_at <= now is left out by default.
	if _, err := b.pool.Exec(b.ctx, "UPDATE knowledge SET expires_at = now() - interval '1 second' WHERE id = $1", c.redis); err != nil {
		t.Fatal(err)
	}
	r = b.search(t, b.alice, knowledge.SearchInput{Query: "eviction"})
	if has(r.Hits, c.redis) != nil {
		t.Fatal("expired entry must be left out")
	}
	r = b.search(t, b.alice, knowledge.SearchInput{Query: "eviction", IncludeExpired: true})
	if has(r.Hits, c.redis) == nil {
		t.Fatal("includeExpired must find it")
	}

	// minScore drops hits below it.
	all := b.search(t, b.alice, knowledge.SearchInput{Query: "connection pool", IncludeSuperseded: true})
	if len(all.Hits) < 2 || all.Hits[0].Score == all.Hits[len(all.Hits)-1].Score {
		t.Fatalf("want hits of different scores: %+v", all.Hits)
	}
	ms := (all.Hits[0].Score + all.Hits[len(all.Hits)-1].Score) / 2
	r = b.search(t, b.alice, knowledge.SearchInput{Query: "connection pool", IncludeSuperseded: true, MinScore: &ms})
	if len(r.Hits) == 0 || len(r.Hits) >= len(all.Hits) {
		t.Fatalf("minScore %v kept %d of %d hits", ms, len(r.Hits), len(all.Hits))
	}
	for _, h := range r.Hits {
		if h.Score < ms {
			t.Fatalf("hit below minScore: %+v", h)
		}
	}
}

func TestSearchTitleEscapesLikeMetacharacters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pct := b.store(t, b.alice, "Sale 50% off", "body one")
	b.store(t, b.alice, "Sale 50 percent off", "body two")
	under := b.store(t, b.alice, "snake a_b case", "body three")
	b.store(t, b.alice, "snake axb case", "body four")
	back := b.store(t, b.alice, `path C:\temp`, "body five")
	b.store(t, b.alice, `path C:temp`, "body six")
	for q, want := range map[string]uuid.UUID{"50%": pct, "a_b": under, `C:\temp`: back} {
		r := b.search(t, b.alice, knowledge.SearchInput{Query: q})
		// Titles sharing a word rank too; only the literal match holds
		// the whole query, and it ranks first in the title list.
		var contains []uuid.UUID
		for _, h := range r.Hits {
			if h.Signals.TitleContains {
				contains = append(contains, h.ID)
			}
		}
		if len(contains) != 1 || contains[0] != want || has(r.Hits, want).TitleRank != 1 {
			t.Fatalf("query %q: titles holding the query %v, want only %v at title rank 1", q, contains, want)
		}
	}
	if got := knowledge.LikePattern(`5%_\`); got != `%5\%\_\\%` {
		t.Fatalf("LikePattern: %q", got)
	}
}

// The lexical lists walk the best entries first and stop at the list's
// depth: the full-text list sorts only the best twice its depth at first,
// the title list tests only the best 50 titles for holding the whole query
// (containsChecked). When filters leave fewer than the depth among those,
// both go on in BM25 order, so a filtered search still finds entries below
// them.
func TestSearchListsReachPastTheirFirstPart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := map[uuid.UUID]bool{}
	for i := range 90 {
		other[b.store(t, b.alice, fmt.Sprintf("zephyr gale %d", i), fmt.Sprintf("note number %d", i), "other")] = true
	}
	wanted := map[uuid.UUID]bool{}
	for i := range 8 {
		wanted[b.store(t, b.alice, fmt.Sprintf("gale seen long before the first zephyr of spring %d", i),
			fmt.Sprintf("observation %d", i), "wanted")] = true
	}
	b.indexAll(t)

	l, err := knowledge.SearchLists(b.ctx, b.svc, b.alice, knowledge.SearchInput{Query: "zephyr gale", Tags: []string{"wanted"}}, 40)
	if err != nil {
		t.Fatal(err)
	}
	for name, list := range map[string][]knowledge.ListHit{"title": l.Title, "full text": l.FullText} {
		if len(list) != len(wanted) {
			t.Fatalf("%s list: %d entries, want the %d tagged ones", name, len(list), len(wanted))
		}
		for i, h := range list {
			if !wanted[h.ID] || (i > 0 && h.Score > list[i-1].Score) {
				t.Fatalf("%s list: entry %d %v (score %v) is not tagged or out of order: %+v", name, i, h.ID, h.Score, list)
			}
		}
	}

	// Unfiltered, the 40 places go to titles holding the whole query.
	r := b.search(t, b.alice, knowledge.SearchInput{Query: "zephyr gale", Limit: new(40)})
	for _, h := range r.Hits {
		if h.TitleRank > 0 && (!other[h.ID] || !h.Signals.TitleContains) {
			t.Fatalf("title rank %d: %q (contains %v), want a title holding the query", h.TitleRank, h.Title, h.Signals.TitleContains)
		}
	}
}

type failingEmbedder struct{ dims int }

func (failingEmbedder) Model() string     { return "broken" }
func (f failingEmbedder) Dimensions() int { return f.dims }
func (f failingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if f.dims != 768 {
		return [][]float32{make([]float32, f.dims)}, nil
	}
	return nil, errors.New("provider down")
}

type slowEmbedder struct{ failingEmbedder }

func (slowEmbedder) Embed(ctx context.Context, _ []string) ([][]float32, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestSearchEmbedderFailureFallsBackToWords(t *testing.T) {
	t.Parallel()
	for name, e := range map[string]option{
		"error":      func(o *knowledge.Options) { o.Embedder = failingEmbedder{768} },
		"wrong dims": func(o *knowledge.Options) { o.Embedder = failingEmbedder{32} }, // outside 64..3072
		"timeout": func(o *knowledge.Options) {
			o.Embedder = slowEmbedder{failingEmbedder{768}}
			o.EmbedTimeout = 50 * time.Millisecond
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, e)
			c := seed(t, b)
			r := b.search(t, b.alice, knowledge.SearchInput{Query: "connection pool"})
			if r.VectorSearch || r.Notice == "" {
				t.Fatalf("must say vector search is off: %+v", r)
			}
			if name == "wrong dims" && !strings.Contains(r.Notice, "32-dimensional") {
				t.Fatalf("notice should name the width: %q", r.Notice)
			}
			if len(r.Hits) == 0 || r.Hits[0].ID != c.pool {
				t.Fatalf("lexical lists should still find it: %v", ids(r.Hits))
			}
			for _, h := range r.Hits {
				if h.VectorRank != 0 || h.Score > knowledge.RRFScore(0, 1, 1)+1e-12 {
					t.Fatalf("no vector list, yet %+v", h)
				}
			}
		})
	}
}

func TestSearchValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ok := knowledge.SearchInput{Query: "q"}
	with := func(f func(*knowledge.SearchInput)) knowledge.SearchInput {
		in := ok
		f(&in)
		return in
	}
	tags17 := make([]string, 17)
	for i := range tags17 {
		tags17[i] = "t"
	}
	cases := []struct {
		name  string
		in    knowledge.SearchInput
		field string
	}{
		{"empty query", with(func(in *knowledge.SearchInput) { in.Query = "" }), "query"},
		{"blank query", with(func(in *knowledge.SearchInput) { in.Query = "   " }), "query"},
		{"query 2001 chars", with(func(in *knowledge.SearchInput) { in.Query = strings.Repeat("ü", 2001) }), "query"},
		{"query NUL", with(func(in *knowledge.SearchInput) { in.Query = "a\x00" }), "query"},
		{"query bad UTF-8", with(func(in *knowledge.SearchInput) { in.Query = "\xc3" }), "query"},
		{"limit -1", with(func(in *knowledge.SearchInput) { in.Limit = new(-1) }), "limit"},
		{"limit 0", with(func(in *knowledge.SearchInput) { in.Limit = new(0) }), "limit"},
		{"limit 51", with(func(in *knowledge.SearchInput) { in.Limit = new(51) }), "limit"},
		{"17 tags", with(func(in *knowledge.SearchInput) { in.Tags = tags17 }), "tags"},
		{"bad tag", with(func(in *knowledge.SearchInput) { in.Tags = []string{"ok", "no!"} }), "tags[1]"},
		{"minScore -0.1", with(func(in *knowledge.SearchInput) { in.MinScore = ptr(-0.1) }), "minScore"},
		{"minScore 1.1", with(func(in *knowledge.SearchInput) { in.MinScore = ptr(1.1) }), "minScore"},
		{"minScore NaN", with(func(in *knowledge.SearchInput) { in.MinScore = ptr(math.NaN()) }), "minScore"},
		{"efSearch -1", with(func(in *knowledge.SearchInput) { in.EfSearch = new(-1) }), "efSearch"},
		{"efSearch 0", with(func(in *knowledge.SearchInput) { in.EfSearch = new(0) }), "efSearch"},
		{"efSearch 201", with(func(in *knowledge.SearchInput) { in.EfSearch = new(201) }), "efSearch"},
		{"maxTokens 0", with(func(in *knowledge.SearchInput) { in.MaxTokens = new(0) }), "maxTokens"},
		{"hops 3", with(func(in *knowledge.SearchInput) { in.Hops = 3 }), "hops"},
		{"17 relation types", with(func(in *knowledge.SearchInput) { in.Hops, in.RelationTypes = 1, make([]string, 17) }), "relationTypes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.svc.Search(b.ctx, b.alice, tc.in)
			wantCode(t, err, errs.CodeInvalidArgument, tc.field)
		})
	}
	// Edges that are allowed.
	for _, in := range []knowledge.SearchInput{
		{Query: strings.Repeat("ü", 2000), Limit: new(50), EfSearch: new(200), MinScore: ptr(1.0)},
		{Query: "x", Limit: new(1), EfSearch: new(1), MinScore: ptr(0.0), Tags: []string{"a"}},
	} {
		if _, err := b.svc.Search(b.ctx, b.alice, in); err != nil {
			t.Fatalf("%v", err)
		}
	}
}
