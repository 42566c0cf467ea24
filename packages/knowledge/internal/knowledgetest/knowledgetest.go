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
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/testenv"
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

// removed is a scan's rows its filter or recheck removed, per pass (as
// EXPLAIN prints them, divided by the loops).
var removed = regexp.MustCompile(`^\s*Rows Removed by (?:Filter|Index Recheck): (\d+)`)

// statementName is the sqlc name of a plan's statement.
var statementName = regexp.MustCompile(`-- name: (\w+)`)

// WideScans returns the scans of the knowledge tables, in plans gathered
// by testenv's ExplainPool with auto_explain.log_analyze on, that return
// more than most rows in one pass (a scan repeated for each of a batch's
// entries, reading one row each time, is not wide), each named by its
// statement: a statement handed a few ids that reads the org's entries
// instead is a plan that grows with the org (on tables never analyzed the
// planner believes an org's rows are few). The first line of an unnamed
// statement's text names it. A scan that reads the org's rows and keeps
// the few asked for by a filter returns few: ReadScans counts those.
func WideScans(plans []string, most int) []string {
	return scans(plans, most, "", false)
}

// WideScansOf is WideScans of the scans of table alone (every knowledge
// table's when table is "").
func WideScansOf(plans []string, most int, table string) []string {
	return scans(plans, most, table, false)
}

// ReadScans is WideScans counting the rows a pass read: those it returned
// and those its filter removed (an index scan of the org's 3,000 pending
// entries that keeps the one it was asked for read them all).
func ReadScans(plans []string, most int) []string {
	return scans(plans, most, "", true)
}

// ReadScansBut is ReadScans of plans, but for the plans whose text holds
// one of known (a statement's "-- name: X " line, or its text): those,
// statements known to read the org's rows through another index and keep
// the few asked for, are held to the rows they return (WideScans), so the
// test still fails if they grow worse.
func ReadScansBut(plans []string, most int, known ...string) []string {
	var lenient, rest []string
	for _, p := range plans {
		if slices.ContainsFunc(known, func(k string) bool { return strings.Contains(p, k) }) {
			lenient = append(lenient, p)
		} else {
			rest = append(rest, p)
		}
	}
	return append(scans(rest, most, "", true), scans(lenient, most, "", false)...)
}

func scans(plans []string, most int, table string, read bool) []string {
	var out []string
	for _, p := range plans {
		name := ""
		if m := statementName.FindStringSubmatch(p); m != nil {
			name = m[1]
		} else if _, text, ok := strings.Cut(p, "Query Text: "); ok {
			name, _, _ = strings.Cut(text, "\n")
		}
		lines := strings.Split(p, "\n")
		for i, line := range lines {
			m := wideScan.FindStringSubmatch(line)
			if m == nil || (table != "" && m[1] != table) {
				continue
			}
			rows, _ := strconv.Atoi(m[2])
			// The node's own lines follow it, more indented than its
			// arrow, up to its first child or the next node.
			indent := len(line) - len(strings.TrimLeft(line, " \t"))
			for _, l := range lines[i+1:] {
				if !read || len(l)-len(strings.TrimLeft(l, " \t")) <= indent || strings.Contains(l, "->") {
					break
				}
				if r := removed.FindStringSubmatch(l); r != nil {
					n, _ := strconv.Atoi(r[1])
					rows += n
				}
			}
			if rows > most {
				out = append(out, fmt.Sprintf("%s: %d rows of %s in each of %s passes (%s)", name, rows, m[1], m[3], strings.TrimSpace(m[0])))
			}
		}
	}
	return out
}

// PlanModes are the plans a plan test runs each statement in: the one
// made for each call's arguments, then the generic one a connection keeps
// for a statement once it has run five times.
var PlanModes = []string{"force_custom_plan", "force_generic_plan"}

// PlansOnCoordinator is why a plan test skips on a Citus cluster.
const PlansOnCoordinator = "reads auto_explain's plans on the coordinator, where Citus routes each statement whole"

// PlanPool is d's testenv ExplainPool as role, with the plan tests'
// settings: auto_explain's analyze (rows, without timing) and the plan
// mode, one of PlanModes.
func PlanPool(t testing.TB, d *testenv.Database, role, mode string) (*pgxpool.Pool, *testenv.Plans) {
	t.Helper()
	return d.ExplainPool(t, role, "auto_explain.log_analyze=on", "auto_explain.log_timing=off", "plan_cache_mode="+mode)
}

// GatherPlans runs each once per plan mode (PlanModes, in order: the plans
// made for each call's arguments, then the ones a connection keeps), on a
// PlanPool of d as role made for that mode, and returns the plans of the
// statements it sent, the modes' in turn.
func GatherPlans(t testing.TB, d *testenv.Database, role string, each func(round int, mode string, pool *pgxpool.Pool)) []string {
	t.Helper()
	var plans []string
	for round, mode := range PlanModes {
		pool, ps := PlanPool(t, d, role, mode)
		each(round, mode, pool)
		plans = append(plans, ps.All()...)
	}
	return plans
}

// FillOrg writes n plain entries of org by agent, in one statement: the
// other entries of a plan test's org (waiting for the indexer and for
// their vectors).
func FillOrg(ctx context.Context, t testing.TB, pool *pgxpool.Pool, org, agent uuid.UUID, n int, title string) {
	t.Helper()
	if _, err := pool.Exec(ctx, `INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
		SELECT $1, $4 || ' ' || i, 'the body of ' || $4 || ' ' || i, $2 FROM generate_series(1, $3::int) i`,
		org, agent, n, title); err != nil {
		t.Fatal(err)
	}
}
