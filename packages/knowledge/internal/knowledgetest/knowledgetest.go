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
	"regexp"
	"strconv"
	"strings"
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

// wideScan is a scan of a knowledge table in an auto_explain plan (with
// log_analyze), its rows and loops.
var wideScan = regexp.MustCompile(`(?:Seq|Index|Index Only|Bitmap Heap) Scan (?:using \S+ )?on (knowledge\w*) \w+ .*actual rows=(\d+) loops=(\d+)`)

// statementName is the sqlc name of a plan's statement.
var statementName = regexp.MustCompile(`-- name: (\w+)`)

// WideScans returns the scans of the knowledge tables, in plans gathered
// by testenv's ExplainPool with auto_explain.log_analyze on, that read
// more than most rows in one pass (a scan repeated for each of a batch's
// entries, reading one row each time, is not wide), each named by its
// statement: a statement handed a few ids that reads the org's entries
// instead is a plan that grows with the org (on tables never analyzed the
// planner believes an org's rows are few). The first line of an unnamed
// statement's text names it.
func WideScans(plans []string, most int) []string {
	var out []string
	for _, p := range plans {
		name := ""
		if m := statementName.FindStringSubmatch(p); m != nil {
			name = m[1]
		} else if _, text, ok := strings.Cut(p, "Query Text: "); ok {
			name, _, _ = strings.Cut(text, "\n")
		}
		for _, m := range wideScan.FindAllStringSubmatch(p, -1) {
			rows, _ := strconv.Atoi(m[2])
			if rows > most {
				out = append(out, fmt.Sprintf("%s: %s rows of %s in each of %s passes (%s)", name, m[2], m[1], m[3], strings.TrimSpace(m[0])))
			}
		}
	}
	return out
}
