package documents_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

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
	testenv.SkipOnCluster(t, knowledgetest.PlansOnCoordinator)
	b := setup(t)
	const others = 3000
	knowledgetest.FillOrg(b.ctx, t, b.pool, b.org, b.alice.AgentID, others, "note")
	// A document of 40 chapters (the planner weighs a look-up per id
	// against the org's entries it believes few), in the plans made for
	// each call's arguments, then in the plans the connections keep.
	const chapters = 40
	got := knowledgetest.GatherPlans(t, b.db, db.DefaultAppRole, func(m int, mode string, pool *pgxpool.Pool) {
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
	})
	if len(got) < 20 {
		t.Fatalf("%d plans gathered; want every statement of six stores", len(got))
	}
	// The most a pass may read: the document's entry, its sections and
	// their earlier versions; counting the rows a scan's filter removed
	// (ReadScans), but for the two UPDATEs whose target the planner scans
	// itself (SupersedeSections, EndSections), which on tables never
	// analyzed still read the org's rows through another index and keep
	// the ids asked for: those are held to the rows they return.
	wide := knowledgetest.ReadScansBut(got, 2*chapters+10, "-- name: SupersedeSections ", "-- name: EndSections ")
	if len(wide) > 0 {
		t.Fatalf("in an org of %d other entries:\n%s", others, strings.Join(wide, "\n"))
	}
}
