package documents_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge/documents"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/knowledgetest"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// A document's store and replacements read the entries they write or lock
// by their ids, whatever the size of the org: in an org of 3,000 other
// entries, on tables never analyzed, no statement of the path reads more
// rows of a knowledge table in one pass than the document's entries and
// their earlier versions. Written as a join of the org's entries to the
// ids (or `id IN (a union)`), the planner, believing an org's rows few,
// read every entry of the org in each of six statements.
func TestDocumentStoresReadOnlyTheirEntries(t *testing.T) {
	t.Parallel()
	testenv.SkipOnCluster(t, "reads auto_explain's plans on the coordinator, where Citus routes each statement whole")
	b := setup(t)
	const others = 3000
	if _, err := b.pool.Exec(b.ctx, `INSERT INTO knowledge (org_id, title, body, created_by_agent_id)
		SELECT $1, 'note ' || i, 'the body of note ' || i, $2 FROM generate_series(1, $3::int) i`,
		b.org, b.alice.AgentID, others); err != nil {
		t.Fatal(err)
	}
	// A document of 40 chapters (the planner weighs a look-up per id
	// against the org's entries it believes few), in the plans made for
	// each call's arguments, then in the plans the connections keep.
	const chapters = 40
	var got []string
	for m, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		pool, plans := b.db.ExplainPool(t, db.DefaultAppRole, "auto_explain.log_analyze=on", "auto_explain.log_timing=off",
			"plan_cache_mode="+mode)
		svc := server{documents.New(data.New(pool), documents.Options{Enqueuer: b.enq})}
		in := domain.DocumentInput{Title: "Pump manual", Content: manual(chapters, same), Source: fmt.Sprintf("docs/pumps-%d.md", m)}
		for v := range 3 { // the first store, then replacements changing half the sections
			if v > 0 {
				in.Content = manual(chapters, func(i int) string {
					if i%2 == 0 {
						return fmt.Sprintf("Version %d of chapter %d, about valves.", v, i)
					}
					return same(i)
				})
			}
			if _, err := svc.StoreDocument(b.ctx, b.alice, in); err != nil {
				t.Fatalf("%s, store %d: %v", mode, v, err)
			}
		}
		got = append(got, plans.All()...)
	}
	if len(got) < 20 {
		t.Fatalf("%d plans gathered; want every statement of six stores", len(got))
	}
	// The most a pass may read: the document's entry, its sections and
	// their earlier versions.
	if wide := knowledgetest.WideScans(got, 2*chapters+10); len(wide) > 0 {
		t.Fatalf("in an org of %d other entries:\n%s", others, strings.Join(wide, "\n"))
	}
}
