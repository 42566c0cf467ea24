package documents_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// A replacement reads and locks the live document's entries
// (CurrentSections: the document's, its sections' and their earlier
// versions') by their ids, whatever the size of the org: on tables never
// analyzed, in the plan a connection keeps for it (generic), it reads a
// few buffers an entry it locks. Written as `id IN (a union)`, the plan ran
// the union once for every entry of the org.
func TestReplacementReadsOnlyTheDocumentsEntries(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "EXPLAINs the statement's generic plan, which Citus cannot route (could not create distributed plan)")
	b := setup(t)
	in := domain.DocumentInput{Title: "Pump manual", Content: manual(4, same), Source: "docs/pumps.md"}
	b.storeDoc(t, b.alice, in)
	for v := range 2 { // earlier versions of half the sections
		in.Content = manual(4, func(i int) string {
			if i%2 == 0 {
				return fmt.Sprintf("Version %d of chapter %d, about valves.", v, i)
			}
			return same(i)
		})
		b.storeDoc(t, b.alice, in)
	}
	const others = 3000
	if _, err := b.pool.Exec(b.ctx, `INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
		SELECT $1, 'note ' || i, 'the body of note ' || i, $2 FROM generate_series(1, $3::int) i`,
		b.org, b.alice.AgentID, others); err != nil {
		t.Fatal(err)
	}
	var doc uuid.UUID
	if err := b.pool.QueryRow(b.ctx, `SELECT id FROM knowledge_documents WHERE org_id = $1 AND source = 'docs/pumps.md' AND live`,
		b.org).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	rows, err := b.pool.Query(b.ctx, `SELECT id FROM knowledge_sections
		WHERE org_id = $1 AND document_id = $2 AND ended_at IS NULL ORDER BY position`, b.org, doc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}

	conn, notices := testenv.ExplainConn(t, b.pool, "SET auto_explain.log_analyze = on", "SET auto_explain.log_buffers = on",
		"SET auto_explain.log_timing = off", "SET plan_cache_mode = force_generic_plan")
	tx, err := conn.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sqlc.New(tx).CurrentSections(b.ctx, sqlc.CurrentSectionsParams{OrgID: b.org, DocumentID: doc})
	if err != nil {
		t.Fatal(err)
	}
	// The plan is logged as the statement's portal closes: at the end of
	// the transaction.
	if err := tx.Rollback(b.ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(want) != 5 {
		t.Fatalf("%d current sections read; want the %d live ones (5: the preface and 4 chapters)", len(got), len(want))
	}
	for i, r := range got {
		if r.ID != want[i] {
			t.Fatalf("section %d is %s; want %s (in position order)", i, r.ID, want[i])
		}
	}
	plan := strings.Join(*notices, "\n")
	scans := regexp.MustCompile(`Scan (?:using \S+ )?on knowledge \w+ .*actual rows=(\d+) loops=(\d+)`).FindAllStringSubmatch(plan, -1)
	if len(scans) == 0 {
		t.Fatalf("no scan of knowledge in the plan:\n%s", plan)
	}
	for _, m := range scans {
		rows, _ := strconv.Atoi(m[1])
		loops, _ := strconv.Atoi(m[2])
		if rows*loops > 50 {
			t.Fatalf("a scan of knowledge read %d rows in an org of %d entries (%s); want only the document's, by their ids:\n%s",
				rows*loops, others, m[0], plan)
		}
	}
}
