package search_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
)

// fakeReranker answers as a reranking server does, in the Cohere shape or
// TEI's: a document holding "GOLDEN" scores 0.99, any other 0.01. It can
// be told to fail (a status) or to hang until the client gives up, and it
// records what it was sent.
type fakeReranker struct {
	tei    bool
	status atomic.Int64 // answer with this status (0: 200)
	hang   atomic.Bool
	calls  atomic.Int64
	mu     sync.Mutex
	docs   [][]string // each request's documents
}

// serve serves f for the test's life and returns its URL.
func (f *fakeReranker) serve(t *testing.T) string {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (f *fakeReranker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	var req struct {
		Query     string   `json:"query"`
		Documents []string `json:"documents"`
		Texts     []string `json:"texts"`
		TopN      int      `json:"top_n"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	docs := req.Documents
	if f.tei {
		docs = req.Texts
	}
	f.mu.Lock()
	f.docs = append(f.docs, docs)
	f.mu.Unlock()
	if f.hang.Load() {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	}
	if s := f.status.Load(); s != 0 {
		http.Error(w, `{"message":"model not loaded"}`, int(s))
		return
	}
	type result struct {
		Index int     `json:"index"`
		Score float64 `json:"relevance_score"`
		TEI   float64 `json:"score"`
	}
	out := make([]result, len(docs))
	for i, d := range docs {
		s := 0.01
		if strings.Contains(d, "GOLDEN") {
			s = 0.99
		}
		out[i] = result{Index: i, Score: s, TEI: s}
	}
	if f.tei {
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"results": out})
}

func (f *fakeReranker) requests() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.docs)
}

// rerankCorpus stores ten notes holding the query's words, and the one
// the fake reranker prefers (GOLDEN) holding fewer of them, so the lists
// rank it below the first place; one long report whose only match is deep
// in its body; and filler.
func rerankCorpus(t *testing.T, b *bundle) (golden, long uuid.UUID) {
	t.Helper()
	for i := range 10 {
		b.store(t, b.alice, fmt.Sprintf("Service %d note", i),
			fmt.Sprintf("The signing key rotation of service %d runs every quarter.", i))
	}
	golden = b.store(t, b.alice, "Signing key runbook", "GOLDEN: the steps, one by one, for the signing key.")
	long = b.store(t, b.alice, "Quarterly report", strings.Repeat("Nothing about keys here at all. ", 200)+
		"Appendix: signing key rotation was done twice. "+strings.Repeat("More unrelated text follows. ", 200))
	b.filler(t, b.alice, 20)
	b.indexAll(t)
	b.embedPending(t)
	return golden, long
}

// rerankService is a Service on b's database (the application's role)
// whose reranker is srv's, with topN candidates and the given budget.
func rerankService(t *testing.T, b *bundle, preset, url string, topN int, budget time.Duration) *knowledge.Service {
	t.Helper()
	rr, err := rerank.New(rerank.Config{Preset: preset, BaseURL: url, Model: "fake-reranker"})
	if err != nil {
		t.Fatal(err)
	}
	return knowledge.New(b.db.AppPool(t), knowledge.Options{Reranker: rr,
		Config: knowledge.Config{RerankTopN: topN, RerankBudget: budget, QueryEmbedBudget: inTime}})
}

func searchWith(t *testing.T, b *bundle, svc *knowledge.Service, in knowledge.SearchInput) *knowledge.SearchResult {
	t.Helper()
	r, err := svc.Search(b.ctx, b.alice, in)
	if err != nil {
		t.Fatalf("search %q: %v", in.Query, err)
	}
	return r
}

// The reranker's order is the answer's: the entry it prefers comes first,
// with a score that says it answers the query; it reads at most topN
// candidates, each as its title and a passage of at most
// RerankPassageChars (a long body's passage is where the query's words
// are). Both APIs.
func TestRerankOrdersTheFusedTop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	golden, long := rerankCorpus(t, b)
	const q = "signing key rotation"
	fused := b.search(t, b.alice, knowledge.SearchInput{Query: q, Limit: ptr(20)})
	if fused.Reranked || fused.RerankReason != knowledge.RerankNotConfigured {
		t.Fatalf("no reranker configured: reranked %v, reason %q", fused.Reranked, fused.RerankReason)
	}
	at := slices.Index(ids(fused.Hits), golden)
	if at <= 0 || at >= 12 {
		t.Fatalf("the fixture wants the golden note below the first place and within 12: at %d", at)
	}
	for _, tei := range []bool{false, true} {
		f := &fakeReranker{tei: tei}
		preset := "vllm"
		if tei {
			preset = "tei"
		}
		svc := rerankService(t, b, preset, f.serve(t), 12, time.Minute)
		r := searchWith(t, b, svc, knowledge.SearchInput{Query: q, Limit: ptr(20)})
		if !r.Reranked || r.RerankReason != "" {
			t.Fatalf("tei %v: reranked %v, reason %q", tei, r.Reranked, r.RerankReason)
		}
		if r.Hits[0].ID != golden || r.Hits[0].RerankRank != 1 || r.Hits[0].Signals.Rerank == nil || *r.Hits[0].Signals.Rerank != 0.99 {
			t.Fatalf("tei %v: first hit %+v, want the golden note, reranked first", tei, r.Hits[0])
		}
		if r.Hits[0].Score < knowledge.ScoreStrong {
			t.Errorf("tei %v: the reranker's sure answer scores %v, under %v", tei, r.Hits[0].Score, knowledge.ScoreStrong)
		}
		fusedScore := map[uuid.UUID]float64{}
		for _, h := range fused.Hits {
			fusedScore[h.ID] = h.Score
		}
		for i, h := range r.Hits {
			if h.Score < fusedScore[h.ID]-1e-12 {
				t.Errorf("tei %v: %s reranked to %v, under its fused %v", tei, h.Title, h.Score, fusedScore[h.ID])
			}
			if i > 0 && h.Score > r.Hits[i-1].Score {
				t.Errorf("tei %v: not best first at %d", tei, i)
			}
		}
		reqs := f.requests()
		if len(reqs) != 1 || len(reqs[0]) != 12 {
			t.Fatalf("tei %v: requests %d, documents %d, want 1 of topN 12", tei, len(reqs), len(reqs[0]))
		}
		sawLong := false
		for _, d := range reqs[0] {
			title, passage, ok := strings.Cut(d, "\n\n")
			if !ok || title == "" || utf8.RuneCountInString(passage) > knowledge.RerankPassageChars {
				t.Errorf("tei %v: a document is not title + passage of at most %d: %d characters", tei, knowledge.RerankPassageChars, utf8.RuneCountInString(d))
			}
			if title == "Quarterly report" {
				sawLong = true
				if !strings.Contains(passage, "signing key rotation") {
					t.Errorf("tei %v: the long report's passage misses its match: %q", tei, passage)
				}
			}
		}
		if has(fused.Hits, long) != nil && slices.Index(ids(fused.Hits), long) < 12 && !sawLong {
			t.Errorf("tei %v: the long report was among the top 12 but not sent", tei)
		}
	}
}

// Past the budget (counted from the search's start), on a 5xx, and with
// the breaker open, the fused order stands and the answer says why; after BreakerFailures failures the
// provider is not called at all. rerank: false skips it.
func TestRerankFallbacks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rerankCorpus(t, b)
	in := knowledge.SearchInput{Query: "signing key rotation"}
	want := ids(b.search(t, b.alice, in).Hits)
	same := func(name string, r *knowledge.SearchResult, reason string) {
		t.Helper()
		if r.Reranked || r.RerankReason != reason {
			t.Errorf("%s: reranked %v, reason %q, want false, %q", name, r.Reranked, r.RerankReason, reason)
		}
		if !slices.Equal(ids(r.Hits), want) {
			t.Errorf("%s: the fused order did not stand", name)
		}
		for _, h := range r.Hits {
			if h.RerankRank != 0 || h.Signals.Rerank != nil {
				t.Errorf("%s: %s carries a rerank signal", name, h.Title)
			}
		}
	}

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		f := &fakeReranker{}
		f.hang.Store(true)
		svc := rerankService(t, b, "vllm", f.serve(t), 0, 50*time.Millisecond)
		same("timeout", searchWith(t, b, svc, in), knowledge.RerankTimeout)
	})
	// The budget is the search's, from its start: a ranking that spent
	// it leaves the fused order without calling the reranker at all, and
	// the breaker does not count it (the provider did not fail).
	t.Run("budget spent by the ranking", func(t *testing.T) {
		t.Parallel()
		f := &fakeReranker{}
		svc := rerankService(t, b, "vllm", f.serve(t), 0, time.Nanosecond)
		for i := range rerank.BreakerFailures + 2 {
			same(fmt.Sprintf("budget spent %d", i+1), searchWith(t, b, svc, in), knowledge.RerankTimeout)
		}
		if n := f.calls.Load(); n != 0 {
			t.Errorf("the provider was called %d times past the search's budget", n)
		}
	})
	t.Run("5xx, then the breaker", func(t *testing.T) {
		t.Parallel()
		f := &fakeReranker{}
		f.status.Store(http.StatusServiceUnavailable)
		svc := rerankService(t, b, "vllm", f.serve(t), 0, time.Minute)
		for i := range rerank.BreakerFailures {
			same(fmt.Sprintf("failure %d", i+1), searchWith(t, b, svc, in), knowledge.RerankError)
		}
		calls := f.calls.Load()
		for range 3 {
			same("breaker", searchWith(t, b, svc, in), knowledge.RerankBreakerOpen)
		}
		if n := f.calls.Load() - calls; n != 0 {
			t.Errorf("the provider was called %d times with the breaker open", n)
		}
	})
	t.Run("rerank false", func(t *testing.T) {
		t.Parallel()
		f := &fakeReranker{}
		svc := rerankService(t, b, "vllm", f.serve(t), 0, time.Minute)
		off := in
		off.Rerank = ptr(false)
		same("rerank false", searchWith(t, b, svc, off), knowledge.RerankNotRequested)
		if f.calls.Load() != 0 {
			t.Errorf("rerank: false called the provider")
		}
		r := searchWith(t, b, svc, knowledge.SearchInput{Query: "zzqx unknownword"})
		if r.Reranked || r.RerankReason != knowledge.RerankNoHits || f.calls.Load() != 0 {
			t.Errorf("no hits: reranked %v, reason %q, calls %d", r.Reranked, r.RerankReason, f.calls.Load())
		}
	})
}

// Every mode reranks: the mode chooses the lists that find candidates,
// the reranker orders them.
func TestRerankModes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	golden, _ := rerankCorpus(t, b)
	f := &fakeReranker{}
	svc := rerankService(t, b, "infinity", f.serve(t), 0, time.Minute)
	for _, mode := range knowledge.Modes {
		r := searchWith(t, b, svc, knowledge.SearchInput{Query: "signing key rotation", Mode: mode})
		if !r.Reranked || len(r.Hits) == 0 || r.Hits[0].ID != golden {
			t.Errorf("mode %s: reranked %v (%q), first %v", mode, r.Reranked, r.RerankReason, ids(r.Hits))
		}
	}
	l, err := knowledge.SearchLists(b.ctx, svc, b.alice, knowledge.SearchInput{Query: "signing key rotation"}, 50)
	if err != nil {
		t.Fatal(err)
	}
	if l.RerankReason != "" || len(l.Reranked) != len(l.Fused) || l.Reranked[0].ID != golden {
		t.Errorf("SearchLists: reason %q, %d reranked of %d fused", l.RerankReason, len(l.Reranked), len(l.Fused))
	}
}
