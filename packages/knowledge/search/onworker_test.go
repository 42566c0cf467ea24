package search_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// On a Citus cluster the ranking statements run on the org's worker
// through knowledge_run_org (onworker.go): they must rank exactly what the
// same statements rank when the coordinator routes them, for every list,
// on the first call (the worker prepares) and the next ones (its kept
// plan), and see nothing of another org on the same worker or the other.
func TestRankingOnWorkerIsTheRoutedStatements(t *testing.T) {
	if !testenv.IsCluster() {
		t.Skip("a Citus cluster's path (go tool task test:cluster)")
	}
	t.Parallel()
	ctx := context.Background()
	d := testenv.Postgres(t)
	emb := embed.NewLocal()
	svc := knowledge.New(d.AppPool(t), knowledge.Options{Embedder: emb})
	owner := search.New(data.New(d.Pool), search.Options{Embedder: emb})
	app := search.New(data.New(d.AppPool(t)), search.Options{Embedder: emb})
	var orgs []domain.Caller
	for range 6 { // orgs on both workers
		a := testfactory.Agent(ctx, t, d.Pool, nil)
		orgs = append(orgs, domain.Caller{OrgID: a.OrgID, AgentID: a.ID})
	}
	words := []string{"shard", "worker", "router", "plan", "vector", "index", "tenant", "coordinator", "replica", "lease"}
	for i, c := range orgs {
		for j := range 12 {
			title := fmt.Sprintf("%s %s note %d", words[(i+j)%10], words[(i+2*j)%10], j)
			body := fmt.Sprintf("%s %s %s of org %d, entry %d", words[j%10], words[(j+3)%10], words[(i+j+5)%10], i, j)
			storeEmbedded(ctx, t, d.Pool, svc, emb, c, title, body)
		}
	}
	if _, err := maint(knowledge.New(d.Pool, knowledge.Options{Embedder: emb})).IndexAll(ctx); err != nil {
		t.Fatal(err)
	}
	qv, err := emb.Embed(ctx, []string{"shard router plan"})
	if err != nil {
		t.Fatal(err)
	}
	vec := pgvector.NewVector(qv[0])
	a := &domain.SearchArgs{Query: "shard router plan", Tags: []string{}, EfSearch: domain.DefaultEfSearch, Limit: 10}
	conn, err := d.Pool.Acquire(ctx) // the routed statements, as the owner on one connection
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range orgs {
		for _, lists := range []int{domain.ListsLexical, domain.ListVector} {
			want, err := owner.Candidates(ctx, conn, c, a, 20, 1, lists, &vec)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatalf("org %s, lists %d: the routed statement found nothing: the test proves nothing", c.OrgID, lists)
			}
			for call := range 3 { // prepared on the worker, then its kept plan
				got, err := app.Candidates(ctx, nil, c, a, 20, 1, lists, &vec)
				if err != nil {
					t.Fatalf("org %s, lists %d, call %d: %v", c.OrgID, lists, call, err)
				}
				if !slices.EqualFunc(got, want, sameCandidate) {
					t.Fatalf("org %s, lists %d, call %d: on the worker %v, routed %v", c.OrgID, lists, call, rowIDs(got), rowIDs(want))
				}
			}
		}
	}
}

func sameCandidate(a, b search.CandidateRow) bool {
	return a.ID == b.ID && a.VectorRank == b.VectorRank && a.FullTextRank == b.FullTextRank && a.TitleRank == b.TitleRank &&
		a.BM25 == b.BM25 && a.Cosine == b.Cosine && a.Title == b.Title
}

func rowIDs(rows []search.CandidateRow) []uuid.UUID {
	out := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// On the org's worker the exact vector list (knowledge_vector_exact, a
// small org's) runs a statement its session prepared once for the org's
// shards, on the generic plan it keeps (migration 00052), not a statement
// planned on every call: it ranks the same entries each call as the
// coordinator's routed call does, and the session holds one such statement
// that never took a custom plan.
func TestExactVectorListKeepsItsPlanOnTheWorker(t *testing.T) {
	if !testenv.IsCluster() {
		t.Skip("a Citus cluster's path (go tool task test:cluster)")
	}
	t.Parallel()
	ctx := context.Background()
	d := testenv.Postgres(t)
	emb := embed.NewLocal()
	svc := knowledge.New(d.AppPool(t), knowledge.Options{Embedder: emb})
	a := testfactory.Agent(ctx, t, d.Pool, nil)
	c := domain.Caller{OrgID: a.OrgID, AgentID: a.ID}
	for j := range 8 {
		title, body := fmt.Sprintf("shard note %d", j), fmt.Sprintf("the worker keeps plan %d of the exact list", j)
		storeEmbedded(ctx, t, d.Pool, svc, emb, c, title, body)
	}
	qv, err := emb.Embed(ctx, []string{"worker plan"})
	if err != nil {
		t.Fatal(err)
	}
	const exact = `SELECT id FROM knowledge_vector_exact($1, $2, $3, '{}', false, false, 5, NULL, NULL, NULL, NULL)`
	args := []any{c.OrgID, pgvector.NewVector(qv[0]), emb.Model()}
	want := queryIDs(ctx, t, d.Pool, exact, args...) // routed by the coordinator
	if len(want) != 5 {
		t.Fatalf("the routed exact list found %d entries, want 5: the test proves nothing", len(want))
	}
	worker, _ := data.New(d.Pool).Router().Route(ctx, c.OrgID) // the org's worker, as the owner
	if worker == d.Pool {
		t.Fatal("no route to the org's worker: the test proves nothing")
	}
	conn, err := worker.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	const calls = 4
	for call := range calls {
		if got := queryIDs(ctx, t, conn, exact, args...); !slices.Equal(got, want) {
			t.Fatalf("call %d on the worker: %v, routed %v", call, got, want)
		}
	}
	var stmts, generic, custom int64
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
		FROM pg_prepared_statements WHERE name LIKE 'knowledge\_vexact\_%'`).Scan(&stmts, &generic, &custom); err != nil {
		t.Fatal(err)
	}
	if stmts != 1 || custom != 0 || generic != calls {
		t.Fatalf("the worker's session holds %d exact-list statements, run %d times on their generic plan and %d on custom plans; want one, %d and 0",
			stmts, generic, custom, calls)
	}
}

// storeEmbedded stores an entry and writes its vector as the embeddings
// worker would (markReady, on the owner's pool), so that the vector lists
// see it without a worker running.
func storeEmbedded(ctx context.Context, t *testing.T, owner *pgxpool.Pool, svc *knowledge.Service, emb embed.Embedder, c domain.Caller, title, body string) {
	t.Helper()
	r, err := svc.Store(ctx, c, domain.StoreInput{Title: title, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	v, err := emb.Embed(ctx, []string{title + "\n" + body})
	if err != nil {
		t.Fatal(err)
	}
	markReady(ctx, t, owner, c.OrgID, r.ID, v[0], emb.Model())
}
