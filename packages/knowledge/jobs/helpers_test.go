package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// fakeEmbedder wraps the local embedder with scripted failures, latency and
// blocking, and records its calls. It stands in for a remote provider; the
// provider's HTTP behaviour itself is tested in package embed.
type fakeEmbedder struct {
	local   *embed.Local
	model   string
	latency time.Duration
	// fail, when set, decides the error of call n (1-based) for texts.
	fail func(n int, texts []string) error
	// block, when set, makes calls wait for it (or for ctx).
	block chan struct{}

	mu      sync.Mutex
	calls   int
	batches []int
	started chan struct{} // closed at the first call
	once    sync.Once
}

func newFake() *fakeEmbedder {
	return &fakeEmbedder{local: embed.NewLocal(), model: "fake-v1", started: make(chan struct{})}
}

func (f *fakeEmbedder) Model() string   { return f.model }
func (f *fakeEmbedder) Dimensions() int { return embed.Dimensions }

func (f *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.batches = append(f.batches, len(texts))
	f.mu.Unlock()
	f.once.Do(func() { close(f.started) })
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.latency > 0 {
		select {
		case <-time.After(f.latency):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.fail != nil {
		if err := f.fail(n, texts); err != nil {
			return nil, err
		}
	}
	return f.local.Embed(ctx, texts)
}

func (f *fakeEmbedder) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// bundle is the per-test world: a fresh database, a leased Redis database,
// an org and an agent, a client and an enqueuer.
type bundle struct {
	pool   *pgxpool.Pool
	redis  asynq.RedisClientOpt
	rdb    *testenv.Redis
	client *asynq.Client
	insp   *asynq.Inspector
	enq    *jobs.Enqueuer
	org    uuid.UUID
	agent  uuid.UUID
}

func setup(t testing.TB) *bundle {
	t.Helper()
	pg := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	opt := asynq.RedisClientOpt{Addr: r.Options.Addr, Password: r.Options.Password, DB: r.DB}
	b := &bundle{pool: pg.Pool, redis: opt, rdb: r, client: asynq.NewClient(opt), insp: asynq.NewInspector(opt)}
	t.Cleanup(func() { b.client.Close(); b.insp.Close() })
	b.enq = jobs.NewEnqueuer(b.client)
	a := testfactory.Agent(context.Background(), t, b.pool, nil)
	b.org, b.agent = a.OrgID, a.ID
	return b
}

// insert stores an entry with plain SQL (the knowledge Service's Store is
// another package's concern) and returns its job, without enqueuing it.
func (b *bundle) insert(t testing.TB, title, body string) knowledge.EmbeddingJob {
	t.Helper()
	e := testfactory.Entry(context.Background(), t, b.pool, &testfactory.EntryOpts{OrgID: b.org, AgentID: b.agent, Title: title, Body: body})
	return knowledge.EmbeddingJob{OrgID: e.OrgID, EntryID: e.ID, Generation: e.Generation}
}

// store is insert followed by the enqueue the Service does after commit.
func (b *bundle) store(t testing.TB, title, body string) knowledge.EmbeddingJob {
	t.Helper()
	j := b.insert(t, title, body)
	if err := b.enq.EnqueueEmbedding(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j
}

type state struct {
	Status     string
	Model      *string
	Error      *string
	Generation int32
	HasVector  bool
}

func (b *bundle) state(t testing.TB, id uuid.UUID) state {
	t.Helper()
	var s state
	err := b.pool.QueryRow(context.Background(),
		`SELECT embedding_status, embedding_model, embedding_error, embedding_generation, embedding IS NOT NULL
		 FROM knowledge WHERE org_id = $1 AND id = $2`, b.org, id).
		Scan(&s.Status, &s.Model, &s.Error, &s.Generation, &s.HasVector)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitStatus polls until every entry has status, or fails after timeout.
func (b *bundle) waitStatus(t testing.TB, status string, timeout time.Duration, ids ...uuid.UUID) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var n int
		err := b.pool.QueryRow(context.Background(),
			"SELECT count(*) FROM knowledge WHERE org_id = $1 AND id = ANY($2) AND embedding_status = $3",
			b.org, ids, status).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d entries %s after %s", n, len(ids), status, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// worker starts a worker tuned for tests (1s grace: asynq's minimum; fast
// retries, looked for as often; fast reconciler) and stops it when t ends.
func (b *bundle) worker(t testing.TB, emb embed.Embedder, mod func(*jobs.WorkerOptions)) *jobs.Worker {
	t.Helper()
	o := jobs.WorkerOptions{
		Concurrency:       4,
		BatchSize:         32,
		BatchGrace:        time.Second,
		BatchMaxDelay:     2 * time.Second,
		MaxRetry:          5,
		RetryDelay:        func(int) time.Duration { return 100 * time.Millisecond },
		PollInterval:      100 * time.Millisecond, // the retries come due at once
		ShutdownTimeout:   time.Second,
		ReconcileInterval: time.Hour, // tests that need it turn it on
		Reconciler:        jobs.ReconcilerOptions{Grace: time.Hour},
	}
	if mod != nil {
		mod(&o)
	}
	w := jobs.NewWorker(b.redis, b.pool, emb, o)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Shutdown)
	return w
}

func ids(js ...knowledge.EmbeddingJob) []uuid.UUID {
	out := make([]uuid.UUID, len(js))
	for i, j := range js {
		out[i] = j.EntryID
	}
	return out
}

var errFlaky = errors.New("provider: 503 service unavailable")

func permanentIf(substr string) func(int, []string) error {
	return func(_ int, texts []string) error {
		for _, t := range texts {
			if contains(t, substr) {
				return fmt.Errorf("provider: 400 input refused: %w", embed.ErrPermanent)
			}
		}
		return nil
	}
}

func contains(s, sub string) bool {
	return strings.Contains(s, sub)
}

// countingEmbedder counts provider calls.
type countingEmbedder struct {
	embed.Embedder
	n atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.n.Add(1)
	return c.Embedder.Embed(ctx, texts)
}
