package documents

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/erasure"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// The hook is a package variable, set once here before any test runs; it
// dispatches on the store's source, which is unique to each test, so
// parallel tests (and the external tests, which register none) pass
// straight through.
var txStartedHooks sync.Map // source -> func()

func init() {
	testHookTxStarted = func(source string) {
		if f, ok := txStartedHooks.Load(source); ok {
			f.(func())()
		}
	}
}

// A store whose transaction started before others of its source committed
// (it waited for the source's lock behind them) makes its sections no
// earlier than those committed ends: here a replacement ends a section of
// the heading after the store started, and a forget erases the live
// document, so the store finds no live document to read times from. A
// heading's versions follow each other in time whatever the documents
// they were in.
func TestStoreMakesItsSectionsAfterWhatCommittedWhileItWaited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	org := testfactory.Org(ctx, t, db.Pool, &testfactory.OrgOpts{Name: "late"}).ID
	c := domain.Caller{OrgID: org, AgentID: testfactory.Agent(ctx, t, db.Pool, &testfactory.AgentOpts{OrgID: org, Name: "writer"}).ID}
	d := data.New(db.AppPool(t))
	docs, er := New(d, Options{}), erasure.New(d, erasure.Options{})
	ctx = data.AsOrg(ctx, org)
	source := "docs/late-" + uuid.NewString() + ".md"
	store := func(title string, v int) (*domain.DocumentResult, error) {
		return docs.StoreDocument(ctx, c, domain.DocumentInput{Title: title, Source: source, Content: fmt.Sprintf("# Part\n\nVersion %d of the part.\n", v)})
	}
	for v, title := range []string{"Manual A", "Manual B"} {
		if _, err := store(title, v); err != nil {
			t.Fatal(err)
		}
	}

	// The late store starts its transaction, then waits.
	held, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	txStartedHooks.Store(source, func() {
		if first.CompareAndSwap(false, true) {
			close(held)
			<-release
		}
	})
	type answer struct {
		res *domain.DocumentResult
		err error
	}
	late := make(chan answer, 1)
	go func() {
		res, err := store("Manual D", 4)
		late <- answer{res, err}
	}()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the late store did not start within a minute")
	}
	// Meanwhile a replacement ends the heading's section, and the document
	// it made is forgotten: the source has no live document.
	c3, err := store("Manual C", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := er.Forget(ctx, c, c3.ID, "wrong manual", false); err != nil {
		t.Fatal(err)
	}
	close(release)
	var a answer
	select {
	case a = <-late:
	case <-time.After(time.Minute):
		t.Fatal("the late store did not answer within a minute of its release")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.res.Replaced || len(a.res.Sections) != 1 {
		t.Fatalf("the late store answered %+v; want a first document of one section", a.res)
	}
	var made time.Time
	var endedAfter int
	if err := db.Pool.QueryRow(ctx, `SELECT k.created_at,
		(SELECT count(*) FROM knowledge_sections s JOIN knowledge_documents d ON d.org_id = s.org_id AND d.id = s.document_id
		 WHERE d.org_id = k.org_id AND d.source = $2 AND s.id <> k.id AND s.ended_at > k.created_at)
		FROM knowledge k WHERE k.id = $1`, a.res.Sections[0].ID, source).Scan(&made, &endedAfter); err != nil {
		t.Fatal(err)
	}
	if endedAfter != 0 {
		t.Fatalf("the late store's section was made at %s, before %d earlier sections of its heading ended", made, endedAfter)
	}
}
