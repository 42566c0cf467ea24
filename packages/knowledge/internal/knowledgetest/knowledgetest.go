// Package knowledgetest holds what the tests of the knowledge packages
// share: the check of a refusal's code and field, an embeddings queue that
// records what it is handed, and a count read from the database. Each
// package's own helpers_test.go builds its bundle (the services it tests)
// from these, so one rule of the tests lives in one place.
package knowledgetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

// WantCode fails t unless err is an *errs.Error of code on field, and
// returns it.
func WantCode(t testing.TB, err error, code errs.Code, field string) *errs.Error {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("want %s error on %q, got %v", code, field, err)
	}
	if e.Code != code || e.Field != field {
		t.Fatalf("want %s on %q, got %s on %q: %v", code, field, e.Code, e.Field, e)
	}
	return e
}

// Enqueuer is an embeddings queue that records the jobs it is handed
// instead of sending them, or refuses them while failing (the queue down).
type Enqueuer struct {
	mu      sync.Mutex
	jobs    []domain.EmbeddingJob
	failing bool
}

// EnqueueEmbedding records j, or fails while SetFailing(true).
func (r *Enqueuer) EnqueueEmbedding(_ context.Context, j domain.EmbeddingJob) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing {
		return fmt.Errorf("queue down")
	}
	r.jobs = append(r.jobs, j)
	return nil
}

// SetFailing makes the queue refuse (true) or take (false) what follows.
func (r *Enqueuer) SetFailing(failing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = failing
}

// All is every job taken so far, in order.
func (r *Enqueuer) All() []domain.EmbeddingJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]domain.EmbeddingJob(nil), r.jobs...)
}

// Count runs sql, which selects one number, and returns it.
func Count(ctx context.Context, t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
