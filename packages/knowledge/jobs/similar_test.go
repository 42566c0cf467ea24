package jobs_test

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// subjectProvider is an OpenAI-compatible provider (httptest) whose
// vectors put texts about paging the on-call close together (cosine about
// 0.99) and everything else apart, as a real model does for paraphrases.
// While hung it holds every request until released (or until the caller
// gives up); it counts the requests it was sent.
type subjectProvider struct {
	srv      *httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	hung     chan struct{} // non-nil: requests wait for it to close
}

const subjectDims = 128

func newSubjectProvider(t *testing.T) *subjectProvider {
	p := &subjectProvider{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		hung := p.hung
		p.mu.Unlock()
		if hung != nil {
			select {
			case <-hung:
			case <-r.Context().Done():
				return
			}
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []item `json:"data"`
		}
		for i, text := range req.Input {
			out.Data = append(out.Data, item{i, subjectVector(text)})
		}
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(func() {
		p.release()
		p.srv.Close()
	})
	return p
}

// hang holds the requests from now on; release answers them.
func (p *subjectProvider) hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hung == nil {
		p.hung = make(chan struct{})
	}
}

func (p *subjectProvider) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hung != nil {
		close(p.hung)
		p.hung = nil
	}
}

func (p *subjectProvider) embedder(t *testing.T) embed.Embedder {
	e, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: p.srv.URL, Model: "subject-test-v1", Dimensions: subjectDims, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// subjectVector: the on-call axis plus a little of the words' hash for a
// text about paging the on-call, the words' hash alone otherwise.
func subjectVector(text string) []float32 {
	low := strings.ToLower(text)
	v := make([]float64, subjectDims)
	noise := 1.0
	for _, cue := range []string{"on-call", "page", "escalat"} {
		if strings.Contains(low, cue) {
			v[0], noise = 1, 0.1
			break
		}
	}
	words := strings.Fields(low)
	for _, w := range words {
		h := fnv.New32a()
		h.Write([]byte(w))
		v[1+int(h.Sum32()%(subjectDims-1))] += noise / math.Sqrt(float64(len(words)))
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	out := make([]float32, subjectDims)
	for i, x := range v {
		out[i] = float32(x / math.Sqrt(n))
	}
	return out
}

// With the embedding provider hanging, a store answers without calling
// it: the check by words, the check by meaning pending. A store that asks
// for the check (ifSimilar: report) waits the embed budget, no longer, and
// answers the same. The worker, started while the provider hangs, embeds
// both entries once it answers again and finishes both checks: each lists
// the entry it paraphrases, on get_knowledge.
func TestStoresDoNotWaitForAHangingProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := newSubjectProvider(t)
	emb := p.embedder(t)
	svc := knowledge.New(b.pool, knowledge.Options{Embedder: emb, Enqueuer: b.enq,
		Config:  knowledge.Config{QueryEmbedBudget: 200 * time.Millisecond},
		Testing: knowledge.TestingKnobs{SimilarBudget: time.Minute}})
	c := knowledge.Caller{OrgID: b.org, AgentID: b.agent}

	first, err := svc.Store(ctx, c, knowledge.StoreInput{Title: "On-call escalation policy",
		Body: "If the primary on-call engineer does not acknowledge a page within 15 minutes, the alert escalates to the secondary.", IfSimilar: knowledge.IfSimilarReport})
	if err != nil || first.EmbeddingStatus != "ready" || first.SimilarPending {
		t.Fatalf("first store, the provider answering: %+v, %v", first, err)
	}

	p.hang()
	sent := p.requests.Load()
	start := time.Now()
	r, err := svc.Store(ctx, c, knowledge.StoreInput{Title: "Who to page when nobody acknowledges",
		Body: "When nobody answers an alert for a quarter of an hour it goes to the backup responder, then to the team's manager."})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if p.requests.Load() != sent {
		t.Fatalf("the default store sent the provider %d requests", p.requests.Load()-sent)
	}
	if r.SimilarCheck != knowledge.SimilarCheckWords || !r.SimilarPending || r.EmbeddingStatus != "pending" {
		t.Fatalf("default store: %+v", r)
	}
	t.Logf("default store with the provider hanging answered in %v", took)

	asked, err := svc.Store(ctx, c, knowledge.StoreInput{Title: "Paging the on-call: the escalation chain",
		Body: "An unacknowledged page moves to the secondary after fifteen minutes and then up to the lead.", IfSimilar: knowledge.IfSimilarReport})
	if err != nil {
		t.Fatal(err)
	}
	if asked.SimilarCheck != knowledge.SimilarCheckWords || !asked.SimilarPending || p.requests.Load() != sent+1 {
		t.Fatalf("report past the budget: %+v (%d requests)", asked, p.requests.Load()-sent)
	}
	for _, id := range []uuid.UUID{r.ID, asked.ID} {
		g, err := svc.Get(ctx, c, id)
		if err != nil || g.Similar == nil || g.Similar.Check != knowledge.SimilarPending {
			t.Fatalf("get while hanging: %+v, %v", g, err)
		}
	}

	b.worker(t, emb, nil)
	for deadline := time.Now().Add(30 * time.Second); p.requests.Load() == sent+1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker sent the provider nothing in 30 s")
		}
	}
	p.release() // the worker's batch was held until now
	b.waitStatus(t, "ready", 30*time.Second, r.ID, asked.ID)
	for _, id := range []uuid.UUID{r.ID, asked.ID} {
		g := waitSimilarDone(t, svc, c, id)
		found := false
		for _, x := range g.Entries {
			found = found || x.ID == first.ID
		}
		if !found || g.CheckedAt == nil {
			t.Fatalf("check of %s: %+v; want %s listed", id, g, first.ID)
		}
	}
}

// waitSimilarDone polls get_knowledge until the entry's check is done:
// the worker records it right after writing the vector.
func waitSimilarDone(t *testing.T, svc *knowledge.Service, c knowledge.Caller, id uuid.UUID) *knowledge.EntrySimilar {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, err := svc.Get(context.Background(), c, id)
		if err != nil {
			t.Fatal(err)
		}
		if g.Similar != nil && g.Similar.Check == knowledge.SimilarDone {
			return g.Similar
		}
		if time.Now().After(deadline) {
			t.Fatalf("check of %s still %+v after 30 s", id, g.Similar)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The sweep finishes a check the handler did not: an entry made ready
// without it (here, its vector written as a worker stopped before the
// check would have), once the reconciler's grace has passed.
func TestSimilarSweepFinishesLeftoverChecks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := newSubjectProvider(t)
	emb := p.embedder(t)
	svc := knowledge.New(b.pool, knowledge.Options{Embedder: emb, Testing: knowledge.TestingKnobs{SimilarBudget: time.Minute}})
	c := knowledge.Caller{OrgID: b.org, AgentID: b.agent}
	first, err := svc.Store(ctx, c, knowledge.StoreInput{Title: "On-call escalation policy",
		Body: "An unacknowledged page escalates to the secondary after 15 minutes.", IfSimilar: knowledge.IfSimilarReport})
	if err != nil {
		t.Fatal(err)
	}
	r, err := svc.Store(ctx, c, knowledge.StoreInput{Title: "Paging when nobody answers", Body: "The page goes to the backup responder after a quarter of an hour."})
	if err != nil || !r.SimilarPending {
		t.Fatalf("%+v, %v", r, err)
	}
	// The vector written, the check not run (what a worker stopped between
	// the two leaves).
	vs, err := emb.Embed(ctx, []string{r.Title + "\n\n" + "The page goes to the backup responder after a quarter of an hour."})
	if err != nil {
		t.Fatal(err)
	}
	out := knowledge.NewOutbox(b.pool)
	rows, err := out.Pending(ctx, []knowledge.EmbeddingJob{{OrgID: b.org, EntryID: r.ID, Generation: 1}})
	if err != nil || len(rows) != 1 {
		t.Fatalf("pending: %v, %v", rows, err)
	}
	if _, err := out.WriteVectors(ctx, emb.Model(), rows, []knowledge.EntryVectors{{Vecs: vs}}); err != nil {
		t.Fatal(err)
	}
	b.worker(t, emb, func(o *jobs.WorkerOptions) {
		o.ReconcileInterval = 100 * time.Millisecond
		o.Reconciler.Grace = time.Millisecond
	})
	g := waitSimilarDone(t, svc, c, r.ID)
	if len(g.Entries) != 1 || g.Entries[0].ID != first.ID {
		t.Fatalf("swept check: %+v", g)
	}
}
