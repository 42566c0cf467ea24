package entries

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/simkeys"
	"github.com/agentfleet/orchestrator/packages/knowledge/maintenance"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// Each way to the candidates alone: the locality-sensitive keys find a
// reworded copy made only of words common in the org, and an entry not
// indexed yet; the rare terms find a copy of an indexed entry. Another
// org's copy is never found.
func TestSimilarCandidatesEachWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	svc := newTestEntries(db.Pool, Options{SkipSimilar: true})
	mk := func() domain.Caller {
		a := testfactory.Agent(ctx, t, db.Pool, nil)
		return domain.Caller{OrgID: a.OrgID, AgentID: a.ID}
	}
	c, other := mk(), mk()
	words := []string{"service", "config", "error", "timeout", "retry", "queue", "worker", "deploy", "cache", "proxy", "token", "schema"}
	var ids []uuid.UUID
	for i := range 12 {
		// Entry i: eight of the twelve common words, a different eight each.
		var w []string
		for j := range 8 {
			w = append(w, words[(i+j)%len(words)])
		}
		r, err := svc.Store(data.AsOrg(ctx, c.OrgID), c, domain.StoreInput{Title: fmt.Sprintf("%s %s", w[0], w[1]), Body: fmt.Sprint(w)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if _, err := svc.Store(data.AsOrg(ctx, other.OrgID), other, domain.StoreInput{Title: "service config", Body: fmt.Sprint(words[:8])}); err != nil {
		t.Fatal(err)
	}
	if _, err := maintenance.New(data.New(db.Pool), maintenance.Options{}).IndexAll(ctx); err != nil {
		t.Fatal(err)
	}
	probe := func(name string, override pgx.NamedArgs, title, body string, want uuid.UUID) {
		t.Helper()
		got, err := svc.similarWith(data.AsOrg(ctx, c.OrgID), c.OrgID, title, body, simkeys.WordsOf(c.OrgID, title, body), override)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || got[0].ID != want {
			t.Errorf("%s: %+v, want %s first", name, got, want)
		}
	}
	copy0 := fmt.Sprint(words[:8])
	probe("keys alone", pgx.NamedArgs{"rare_terms": 0}, "config service", copy0, ids[0])
	probe("rare terms alone", pgx.NamedArgs{"keys": []int64{}}, "service config", copy0, ids[0])
	fresh, err := svc.Store(data.AsOrg(ctx, c.OrgID), c, domain.StoreInput{Title: "zebra crossing rules", Body: "pedestrians first at the zebra crossing"})
	if err != nil {
		t.Fatal(err)
	}
	probe("keys alone, not indexed yet", pgx.NamedArgs{"rare_terms": 0}, "zebra crossing rules", "pedestrians first at the zebra crossing", fresh.ID)
	zt, zb := "zebra crossing rules", "pedestrians first at the zebra crossing"
	if got, err := svc.similarWith(data.AsOrg(ctx, c.OrgID), c.OrgID, zt, zb, simkeys.WordsOf(c.OrgID, zt, zb), pgx.NamedArgs{"keys": []int64{}}); err != nil || len(got) != 0 {
		t.Errorf("rare terms alone, an entry not indexed yet: %+v %v", got, err)
	}
}
