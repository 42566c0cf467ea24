package entries_test

import (
	"context"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/entries"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
)

// conceptEmbedder is a fake provider (not in-process, so stores go through
// the embed budget and reuse their vectors) that maps paraphrases close:
// a text's vector is the axis of the first concept whose cue it holds,
// plus a little of the hash of its words (so different texts of one
// concept are close, cosine ~0.99, not identical); a text of no concept
// is its words' hash alone (near-orthogonal to everything else). A
// non-nil hold holds every call until it is closed (the budget tests: a
// provider that has not answered, whatever the machine's load); answered
// counts the calls that returned.
type conceptEmbedder struct {
	hold     chan struct{}
	calls    atomic.Int64
	answered atomic.Int64
}

// holdCalls makes e hold its calls until t ends.
func (e *conceptEmbedder) holdCalls(t *testing.T) {
	e.hold = make(chan struct{})
	t.Cleanup(func() { close(e.hold) })
}

const conceptDims = 128

// concepts: a text holding any cue of concept i points along axis i.
var concepts = [][]string{
	{"on-call", "page", "paged", "escalat"},
	{"backup", "snapshot"},
}

func (*conceptEmbedder) Model() string   { return "fake-concepts" }
func (*conceptEmbedder) Dimensions() int { return conceptDims }
func (e *conceptEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.calls.Add(1)
	defer e.answered.Add(1)
	if e.hold != nil {
		select {
		case <-e.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float64, conceptDims)
		low := strings.ToLower(t)
		concept := -1
		for c, cues := range concepts {
			for _, cue := range cues {
				if strings.Contains(low, cue) {
					concept = c
				}
			}
			if concept >= 0 {
				break
			}
		}
		noise := 1.0
		if concept >= 0 {
			v[concept] = 1
			noise = 0.1
		}
		words := strings.Fields(low)
		for _, w := range words {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[len(concepts)+int(h.Sum32()%uint32(conceptDims-len(concepts)))] += noise / math.Sqrt(float64(len(words)))
		}
		var n float64
		for _, x := range v {
			n += x * x
		}
		out[i] = make([]float32, conceptDims)
		for j, x := range v {
			out[i][j] = float32(x / math.Sqrt(n))
		}
	}
	return out, nil
}

const (
	escalationTitle = "On-call escalation policy"
	escalationBody  = "If the primary on-call engineer does not acknowledge a page within 15 minutes, the alert escalates to the secondary, then to the team lead."
	pageTitle       = "Who to page when the on-call does not acknowledge"
	pageBody        = "When nobody answers an alert for a quarter of an hour it goes to the backup responder and then to the manager of the team."
)

func withConcepts(e *conceptEmbedder) option {
	return func(o *testOptions) {
		o.Searcher.Embedder = e
		o.Searcher.QueryEmbedBudget = inTime
	}
}

// pastBudget is a Service of b's database whose embedder e holds every
// call: its stores are always past the embed budget (20 ms), while the
// held call (EmbedTimeout inTime) is still running when they answer.
func pastBudget(t *testing.T, b *bundle, e *conceptEmbedder) *facade {
	e.holdCalls(t)
	return newFacade(b.pool, testOptions{Options: entries.Options{Enqueuer: b.enq, SimilarBudget: inTime},
		Searcher: search.Options{Embedder: e, QueryEmbedBudget: 20 * time.Millisecond, EmbedTimeout: inTime}})
}

// With ifSimilar: report a paraphrase in other words is listed by meaning
// in the answer; the stored entry got the vector its check made (ready at
// once), so the worker has nothing left to embed, and nothing is owed.
func TestSimilarByMeaning(t *testing.T) {
	t.Parallel()
	e := &conceptEmbedder{}
	b := setup(t, withConcepts(e))
	first, err := b.svc.Store(b.ctx, b.alice, domain.StoreInput{Title: escalationTitle, Body: escalationBody, IfSimilar: domain.IfSimilarReport})
	if err != nil {
		t.Fatal(err)
	}
	if first.EmbeddingStatus != "ready" || first.SimilarCheck != entries.SimilarCheckWordsMeaning || len(first.Similar) != 0 || first.SimilarPending {
		t.Fatalf("first store: %+v", first)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE id = $1 AND embedding_status = 'ready' AND embedding_model = 'fake-concepts' AND vector_dims(embedding) = $2", first.ID, conceptDims); n != 1 {
		t.Fatalf("the check's vector was not written as the entry's")
	}
	if len(b.enq.All()) != 0 {
		t.Fatalf("a ready entry was enqueued: %+v", b.enq.All())
	}
	// The worker, handed the entry anyway (a reconciler's late job),
	// finds nothing pending and does not call the provider.
	calls := e.calls.Load()
	h := jobs.NewEmbedHandler(b.pool, e, jobs.HandlerOptions{})
	if err := h.Process(b.ctx, []domain.EmbeddingJob{{OrgID: b.org, EntryID: first.ID, Generation: 1}}); err != nil {
		t.Fatal(err)
	}
	if e.calls.Load() != calls {
		t.Fatalf("the worker embedded a ready entry again")
	}

	if j := entries.SimilarScore(escalationTitle, escalationBody, pageTitle, pageBody); j >= entries.SimilarThreshold {
		t.Fatalf("the pair shares too many words for this test: %.2f", j)
	}
	r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: pageTitle, Body: pageBody, IfSimilar: domain.IfSimilarReport})
	if err != nil {
		t.Fatal(err)
	}
	if r.SimilarCheck != entries.SimilarCheckWordsMeaning || len(r.Similar) != 1 || r.Similar[0].ID != first.ID ||
		r.Similar[0].Score < entries.SimilarThreshold || r.Similar[0].Title != escalationTitle || r.SimilarPending {
		t.Fatalf("paraphrase: %+v", r)
	}
	if g, err := b.svc.Get(b.ctx, b.bob, r.ID); err != nil || g.Similar != nil {
		t.Fatalf("an entry whose store answered the whole check shows one owed: %+v, %v", g, err)
	}
	// Unrelated text is not listed, by either measure.
	r, err = b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: "Go build cache", Body: "The CI runners clean the Go build cache nightly.", IfSimilar: domain.IfSimilarReport})
	if err != nil || len(r.Similar) != 0 {
		t.Fatalf("unrelated: %+v, %v", r, err)
	}
	// The other org's paraphrase lists nothing of this org.
	r, err = b.svc.Store(b.ctx, b.eve, domain.StoreInput{Title: pageTitle, Body: pageBody, IfSimilar: domain.IfSimilarReport})
	if err != nil || len(r.Similar) != 0 || r.SimilarCheck != entries.SimilarCheckWordsMeaning {
		t.Fatalf("other org: %+v, %v", r, err)
	}
	// The same text again, without asking: its vector is at hand in this
	// process (the report above made it), so the check is by meaning too,
	// and nothing is left to the worker.
	calls = e.calls.Load()
	r, err = b.svc.Store(b.ctx, b.eve, domain.StoreInput{Title: pageTitle, Body: pageBody})
	if err != nil || r.SimilarCheck != entries.SimilarCheckWordsMeaning || r.SimilarPending || e.calls.Load() != calls {
		t.Fatalf("a vector at hand: %+v, %v (provider calls %d -> %d)", r, err, calls, e.calls.Load())
	}
}

// By default a store never calls the provider: with none of its vector at
// hand (the provider hanging here), it answers the check by words, says
// the check by meaning is pending, and enqueues the entry. get_knowledge
// shows the check pending; once the worker has embedded the entry it has
// run the check by meaning and recorded it: the paraphrase, listed on
// get_knowledge. The entry listed is then erased: it leaves the listing.
func TestStoreLeavesTheMeaningToTheWorker(t *testing.T) {
	t.Parallel()
	e := &conceptEmbedder{}
	b := setup(t, withConcepts(e))
	first, err := b.svc.Store(b.ctx, b.alice, domain.StoreInput{Title: escalationTitle, Body: escalationBody, IfSimilar: domain.IfSimilarReport})
	if err != nil || first.EmbeddingStatus != "ready" {
		t.Fatalf("first: %+v, %v", first, err)
	}
	e.holdCalls(t) // hangs until the test ends: a store that called it would not answer
	calls := e.calls.Load()
	r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: pageTitle, Body: pageBody})
	if err != nil {
		t.Fatal(err)
	}
	if e.calls.Load() != calls {
		t.Fatalf("the store called the provider (%d calls)", e.calls.Load()-calls)
	}
	if r.SimilarCheck != entries.SimilarCheckWords || !r.SimilarPending || len(r.Similar) != 0 || r.EmbeddingStatus != "pending" {
		t.Fatalf("store: %+v", r)
	}
	if jobs := b.enq.All(); len(jobs) != 1 || jobs[0].EntryID != r.ID {
		t.Fatalf("enqueued: %+v", jobs)
	}
	g, err := b.svc.Get(b.ctx, b.bob, r.ID)
	if err != nil || g.Similar == nil || g.Similar.Check != domain.SimilarPending || g.Similar.CheckedAt != nil || len(g.Similar.Entries) != 0 {
		t.Fatalf("get before the worker: %+v, %v", g.Similar, err)
	}
	// Another org reads neither the entry nor its check.
	if _, err := b.svc.Get(b.ctx, b.eve, r.ID); err == nil {
		t.Fatal("another org read the entry")
	}

	// The worker, with a provider that answers (the same vectors).
	h := jobs.NewEmbedHandler(b.pool, &conceptEmbedder{}, jobs.HandlerOptions{})
	if err := h.Process(b.ctx, b.enq.All()); err != nil {
		t.Fatal(err)
	}
	g, err = b.svc.Get(b.ctx, b.bob, r.ID)
	if err != nil || g.EmbeddingStatus != "ready" || g.Similar == nil || g.Similar.Check != domain.SimilarDone || g.Similar.CheckedAt == nil ||
		len(g.Similar.Entries) != 1 || g.Similar.Entries[0].ID != first.ID || g.Similar.Entries[0].Title != escalationTitle ||
		g.Similar.Entries[0].Score < entries.SimilarThreshold {
		t.Fatalf("get after the worker: %+v %+v, %v", g, g.Similar, err)
	}
	// Done once: the job again records nothing new.
	if err := h.Process(b.ctx, []domain.EmbeddingJob{{OrgID: b.org, EntryID: r.ID, Generation: 1}}); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_similar WHERE entry_id = $1", r.ID); n != 1 {
		t.Fatalf("%d listings recorded", n)
	}
	// The entry it lists is erased (the cascade from its row; forget and
	// purge delete the row so: packages/knowledge's tests): it leaves the
	// listing, the check stays done.
	erase := func(id uuid.UUID) {
		t.Helper()
		if _, err := b.pool.Exec(b.ctx, "DELETE FROM knowledge_index_queue WHERE entry_id = $1", id); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(b.ctx, "DELETE FROM knowledge WHERE id = $1", id); err != nil {
			t.Fatal(err)
		}
	}
	erase(first.ID)
	g, err = b.svc.Get(b.ctx, b.bob, r.ID)
	if err != nil || g.Similar == nil || g.Similar.Check != domain.SimilarDone || len(g.Similar.Entries) != 0 {
		t.Fatalf("get after the listed entry's erasure: %+v, %v", g.Similar, err)
	}
	// Erasing the entry itself erases its check.
	erase(r.ID)
	if n := b.count(t, "SELECT (SELECT count(*) FROM knowledge_similar_checks) + (SELECT count(*) FROM knowledge_similar)"); n != 0 {
		t.Fatalf("%d rows of erased entries' checks left", n)
	}
}

// MeaningScore: nothing below the model's full point, SimilarThreshold at
// it, SkipThreshold two thirds of the way to 1, 1 at cosine 1.
func TestMeaningScore(t *testing.T) {
	t.Parallel()
	cal := search.VectorCalibration{Floor: 0.25, Full: 0.7}
	for _, c := range []struct{ cos, want float64 }{
		{0.1, 0}, {0.69, 0}, {0.7, entries.SimilarThreshold}, {0.9, entries.SkipThreshold}, {1, 1},
	} {
		if got := entries.MeaningScore(cal, c.cos); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("cosine %.2f: %.3f, want %.3f", c.cos, got, c.want)
		}
	}
}

// A store that asks for the check by meaning (ifSimilar: report) waits
// for the provider at most the embed budget: past it the check is by
// words only, and the answer says so and that the meaning is pending: an
// exact copy is still listed, a paraphrase is not; the entry waits for
// the worker as before. The store answers without waiting for the
// provider's answer: its call is still held when the store has answered.
func TestSimilarPastBudgetIsByWords(t *testing.T) {
	t.Parallel()
	e := &conceptEmbedder{}
	b := setup(t, withConcepts(e))
	first := b.storeReported(t, b.alice, escalationTitle, escalationBody) // with its vector
	slow := pastBudget(t, b, e)
	answered := e.answered.Load()
	r, err := slow.Store(b.ctx, b.bob, domain.StoreInput{Title: pageTitle, Body: pageBody, IfSimilar: domain.IfSimilarReport})
	if err != nil {
		t.Fatal(err)
	}
	if r.SimilarCheck != entries.SimilarCheckWords || len(r.Similar) != 0 || r.EmbeddingStatus != "pending" || !r.SimilarPending {
		t.Fatalf("paraphrase past the budget: %+v", r)
	}
	if e.answered.Load() != answered {
		t.Fatal("the store waited for the provider's answer")
	}
	r, err = slow.Store(b.ctx, b.bob, domain.StoreInput{Title: escalationTitle, Body: escalationBody, IfSimilar: domain.IfSimilarReport})
	if err != nil || r.SimilarCheck != entries.SimilarCheckWords || len(r.Similar) != 1 || r.Similar[0].ID != first {
		t.Fatalf("copy past the budget: %+v, %v", r, err)
	}
	if jobs := b.enq.All(); len(jobs) != 2 {
		t.Fatalf("entries without a vector must go to the worker: %+v", jobs)
	}
}

// Each statement of the duplicate check is bounded (similarBudget): past
// it the store still stores, and answers that no check was made rather
// than that nothing is similar. (A budget of 1 ns: every statement is past
// it before it is sent, whatever the load.)
func TestSimilarPastItsStatementBudgetStoresUnchecked(t *testing.T) {
	t.Parallel()
	e := &conceptEmbedder{}
	b := setup(t, withConcepts(e), func(o *testOptions) { o.SimilarBudget = time.Nanosecond })
	first := b.storeReported(t, b.alice, escalationTitle, escalationBody)
	r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: escalationTitle, Body: escalationBody})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID == first || r.SimilarCheck != entries.SimilarCheckNone || len(r.Similar) != 0 {
		t.Fatalf("a copy past the check's budget: %+v; want stored, similarCheck none", r)
	}
	if n := b.entries(t); n != 2 {
		t.Fatalf("%d entries; want 2", n)
	}
}

// ifSimilar: skip answers the existing entry and stores nothing: no row,
// no quota unit (an org at its limit is still answered), the same answer
// twice, and never an entry of another org.
func TestIfSimilarSkip(t *testing.T) {
	t.Parallel()
	e := &conceptEmbedder{}
	b := setup(t, withConcepts(e))
	first := b.storeReported(t, b.alice, escalationTitle, escalationBody) // with its vector
	b.setQuota(t, b.org, int64(b.quotaUsed(t, b.org)))                    // at its limit
	rows := b.entries(t)
	var ids []uuid.UUID
	for range 2 {
		r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: pageTitle, Body: pageBody, IfSimilar: domain.IfSimilarSkip})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Skipped || r.ID != first || r.Title != escalationTitle || r.SimilarCheck != entries.SimilarCheckWordsMeaning ||
			len(r.Similar) == 0 || r.Similar[0].ID != first || r.Similar[0].Score < entries.SkipThreshold {
			t.Fatalf("skip: %+v", r)
		}
		ids = append(ids, r.ID)
	}
	if ids[0] != ids[1] || b.entries(t) != rows || b.quotaUsed(t, b.org) != 1 {
		t.Fatalf("skips stored something: ids %v, rows %d -> %d, quota %d", ids, rows, b.entries(t), b.quotaUsed(t, b.org))
	}
	// Below SkipThreshold (or nothing similar) it stores, and here the
	// quota refuses it.
	_, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: "Go build cache", Body: "The CI runners clean the Go build cache nightly.", IfSimilar: domain.IfSimilarSkip})
	wantCode(t, err, errs.CodeQuotaExceeded, "")
	// Another org's entry is never similar: eve's copy is stored.
	r, err := b.svc.Store(b.ctx, b.eve, domain.StoreInput{Title: escalationTitle, Body: escalationBody, IfSimilar: domain.IfSimilarSkip})
	if err != nil || r.Skipped || r.ID == first || len(r.Similar) != 0 {
		t.Fatalf("other org: %+v, %v", r, err)
	}
	// "store" stores the paraphrase and lists the entry: the skip's check
	// left the paraphrase's vector at hand in this process.
	b.setQuota(t, b.org, 100)
	r, err = b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: pageTitle, Body: pageBody, IfSimilar: domain.IfSimilarStore})
	if err != nil || r.Skipped || r.ID == first || len(r.Similar) != 1 || r.Similar[0].ID != first {
		t.Fatalf("store: %+v, %v", r, err)
	}
}

// ifSimilar: skip waits for the provider when the new text's vector is not
// at hand, and refuses a duplicate by meaning: a paraphrase with no word
// evidence, its vector never made before.
func TestIfSimilarSkipWaitsForTheMeaning(t *testing.T) {
	t.Parallel()
	e := &conceptEmbedder{}
	b := setup(t, withConcepts(e))
	first := b.storeReported(t, b.alice, escalationTitle, escalationBody)
	calls := e.calls.Load()
	r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: pageTitle + " (again)", Body: pageBody, IfSimilar: domain.IfSimilarSkip})
	if err != nil || !r.Skipped || r.ID != first || r.SimilarCheck != entries.SimilarCheckWordsMeaning || r.SimilarPending {
		t.Fatalf("skip: %+v, %v", r, err)
	}
	if e.calls.Load() != calls+1 {
		t.Fatalf("%d provider calls; want the skip's one", e.calls.Load()-calls)
	}
}

// With the meaning unavailable, skip acts on word evidence only: an exact
// copy is skipped, a paraphrase (no evidence) is stored; both answers say
// the check was by words.
func TestIfSimilarSkipByWordsOnly(t *testing.T) {
	t.Parallel()
	e := &conceptEmbedder{}
	b := setup(t, withConcepts(e))
	first := b.store(t, b.alice, escalationTitle, escalationBody)
	slow := pastBudget(t, b, e)
	r, err := slow.Store(b.ctx, b.bob, domain.StoreInput{Title: escalationTitle, Body: escalationBody, IfSimilar: domain.IfSimilarSkip})
	if err != nil || !r.Skipped || r.ID != first || r.SimilarCheck != entries.SimilarCheckWords {
		t.Fatalf("copy: %+v, %v", r, err)
	}
	r, err = slow.Store(b.ctx, b.bob, domain.StoreInput{Title: pageTitle, Body: pageBody, IfSimilar: domain.IfSimilarSkip})
	if err != nil || r.Skipped || r.ID == first || r.SimilarCheck != entries.SimilarCheckWords {
		t.Fatalf("paraphrase: %+v, %v", r, err)
	}
}

// A bad ifSimilar is refused before anything is stored, naming the
// argument and its values.
func TestIfSimilarBadValue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.svc.Store(b.ctx, b.alice, domain.StoreInput{Title: "t", Body: "b", IfSimilar: "merge"})
	e := wantCode(t, err, errs.CodeInvalidArgument, "ifSimilar")
	for _, w := range []string{"store", "report", "skip", "merge"} {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("message lacks %q: %q", w, e.Message)
		}
	}
	if b.entries(t) != 0 || b.quotaUsed(t, b.org) != 0 {
		t.Fatal("a refused store stored something")
	}
	for _, v := range []string{domain.IfSimilarSkip, domain.IfSimilarReport} {
		_, err = b.svc.Correct(b.ctx, b.alice, uuid.New(), domain.StoreInput{Title: "t", Body: "b", IfSimilar: v})
		wantCode(t, err, errs.CodeInvalidArgument, "replacement.ifSimilar")
	}
}

// The in-process (local) embedder's vectors hash character trigrams: the
// check is by words with it, and says so.
func TestSimilarWithLocalEmbedderIsByWords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.store(t, b.alice, escalationTitle, escalationBody)
	for _, v := range []string{domain.IfSimilarStore, domain.IfSimilarReport} {
		r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: escalationTitle, Body: escalationBody, IfSimilar: v})
		listed := slices.ContainsFunc(r.Similar, func(x domain.Similar) bool { return x.ID == first })
		if err != nil || r.SimilarCheck != entries.SimilarCheckWords || !listed || r.EmbeddingStatus != "pending" || r.SimilarPending {
			t.Fatalf("%s: %+v, %v", v, r, err)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_similar_checks"); n != 0 {
		t.Fatalf("%d checks owed with an embedder whose check is by words", n)
	}
}
