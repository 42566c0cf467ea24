package knowledge_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// sectionWorld is one org's agent writing documents through the facade.
type sectionWorld struct {
	t      *testing.T
	ctx    context.Context
	d      *testenv.Database
	svc    *knowledge.Service
	ops    *knowledge.Service
	org    uuid.UUID
	a      knowledge.Caller
	source string
}

func newSectionWorld(t *testing.T) *sectionWorld {
	t.Helper()
	ctx := context.Background()
	d := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	o := knowledge.Options{Redis: r.Client, Testing: knowledge.TestingKnobs{SimilarBudget: time.Minute}}
	w := &sectionWorld{t: t, ctx: ctx, d: d, svc: knowledge.New(d.AppPool(t), o), ops: knowledge.New(d.Pool, o), source: "manuals/pump.md"}
	w.org = testfactory.Org(ctx, t, d.Pool, &testfactory.OrgOpts{Name: "pumps"}).ID
	w.a = knowledge.Caller{OrgID: w.org, AgentID: testfactory.Agent(ctx, t, d.Pool, &testfactory.AgentOpts{OrgID: w.org, Name: "writer"}).ID}
	return w
}

// store stores the pump manual with the given version of each part (1 and
// 2), titled title; it returns the answer and the section of each part.
func (w *sectionWorld) store(title string, v1, v2 int) (*knowledge.DocumentResult, map[string]uuid.UUID) {
	w.t.Helper()
	content := fmt.Sprintf("## Pump part 1\n\nVersion %d of part 1.\n\n## Pump part 2\n\nVersion %d of part 2.\n", v1, v2)
	res, err := w.svc.StoreDocument(w.ctx, w.a, knowledge.DocumentInput{Title: title, Source: w.source, Content: content, Format: "markdown"})
	if err != nil {
		w.t.Fatal(err)
	}
	parts := map[string]uuid.UUID{}
	for _, s := range res.Sections {
		parts[s.HeadingPath[len(s.HeadingPath)-1]] = s.ID
	}
	return res, parts
}

func (w *sectionWorld) get(id uuid.UUID) *knowledge.Entry {
	w.t.Helper()
	e, err := w.svc.Get(w.ctx, w.a, id)
	if err != nil {
		w.t.Fatalf("get %s: %v", id, err)
	}
	return e
}

// wantNotCurrent fails unless id is out of the current knowledge (expired
// or superseded), and its section, if it has one, says how it ended.
func (w *sectionWorld) wantNotCurrent(what string, id uuid.UUID, ended string) {
	w.t.Helper()
	e := w.get(id)
	if e.State == knowledge.StateHead {
		w.t.Fatalf("%s: %s is current again (state %s, supersededBy %v)", what, id, e.State, e.SupersededBy)
	}
	if ended != "" && (e.Section == nil || e.Section.Ended != ended) {
		w.t.Fatalf("%s: %s's section %+v, want ended %q", what, id, e.Section, ended)
	}
}

// wantSections fails unless get_knowledge of doc and list_knowledge
// {documentId} both name exactly want.
func (w *sectionWorld) wantSections(what string, doc uuid.UUID, want ...uuid.UUID) {
	w.t.Helper()
	var got []uuid.UUID
	for _, s := range w.get(doc).Document.Sections {
		got = append(got, s.ID)
	}
	l, err := w.svc.List(w.ctx, w.a, knowledge.ListInput{DocumentID: &doc})
	if err != nil {
		w.t.Fatal(err)
	}
	var listed []uuid.UUID
	for _, h := range l.Hits {
		listed = append(listed, h.ID)
	}
	for _, s := range [][]uuid.UUID{got, listed, want} {
		slices.SortFunc(s, compareUUID)
	}
	if !slices.Equal(got, want) || !slices.Equal(listed, want) {
		w.t.Fatalf("%s: get_knowledge lists %v, list_knowledge {documentId} %v; want %v", what, got, listed, want)
	}
}

// TestSectionsFollowTheirDocument: a section a replacement changed never
// becomes current again, whichever path erases or replaces what came
// after it (forget, purge, supersede); the heading is without a current
// section until the next replacement, and the document's list, its
// listing and get_knowledge agree throughout.
func TestSectionsFollowTheirDocument(t *testing.T) {
	t.Parallel()
	w := newSectionWorld(t)
	doc, v1 := w.store("Pump manual", 1, 1)
	_, v2 := w.store("Pump manual", 1, 2) // part 2 changed
	if v2["Pump part 1"] != v1["Pump part 1"] || v2["Pump part 2"] == v1["Pump part 2"] {
		t.Fatalf("replacement: %v then %v", v1, v2)
	}

	// Forget the current section: its predecessor stays ended.
	if _, err := w.svc.Forget(w.ctx, w.a, v2["Pump part 2"], "wrong", false); err != nil {
		t.Fatal(err)
	}
	w.wantNotCurrent("after forgetting its successor", v1["Pump part 2"], "changed")
	w.wantSections("after the forget", doc.ID, v1["Pump part 1"])

	// The next replacement gives the heading a section again.
	_, v3 := w.store("Pump manual", 1, 3)
	w.wantSections("after the next replacement", doc.ID, v1["Pump part 1"], v3["Pump part 2"])
	w.wantNotCurrent("after the next replacement", v1["Pump part 2"], "changed")

	// Purge (ctl purge) of the current section's entry: the same.
	_, v4 := w.store("Pump manual", 1, 4)
	if _, err := w.ops.Operations().Purge(w.ctx, w.org, knowledge.PurgeScope{Entry: v4["Pump part 2"]}, false); err != nil {
		t.Fatal(err)
	}
	w.wantNotCurrent("after purging its successor", v3["Pump part 2"], "changed")
	w.wantSections("after the purge", doc.ID, v1["Pump part 1"])

	// A section superseded by a call of its own leaves its document as a
	// changed one does; forgetting what superseded it does not bring it back.
	note, err := w.svc.Store(w.ctx, w.a, knowledge.StoreInput{Title: "Part 1, corrected", Body: "Open the valve two turns."})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Supersede(w.ctx, w.a, v1["Pump part 1"], note.ID); err != nil {
		t.Fatal(err)
	}
	w.wantNotCurrent("superseded by a call of its own", v1["Pump part 1"], "changed")
	w.wantSections("after the supersession", doc.ID)
	var open int
	if err := w.d.Pool.QueryRow(w.ctx, `SELECT count(*) FROM knowledge_relations WHERE from_id = $1 AND type = 'PART_OF' AND valid_to IS NULL`,
		v1["Pump part 1"]).Scan(&open); err != nil || open != 0 {
		t.Fatalf("the superseded section's open PART_OF: %d, %v", open, err)
	}
	if _, err := w.svc.Forget(w.ctx, w.a, note.ID, "wrong", false); err != nil {
		t.Fatal(err)
	}
	w.wantNotCurrent("after forgetting what superseded it", v1["Pump part 1"], "changed")

	// A replaced document entry stays replaced when its successor is
	// forgotten (with the successor's sections).
	d2, _ := w.store("Pump manual, second edition", 5, 5)
	if d2.PreviousID == nil || *d2.PreviousID != doc.ID {
		t.Fatalf("a new title makes a new document entry: %+v", d2)
	}
	if _, err := w.svc.Forget(w.ctx, w.a, d2.ID, "wrong", false); err != nil {
		t.Fatal(err)
	}
	w.wantNotCurrent("a replaced document after forgetting its successor", doc.ID, "")
}

// TestMigrationEndsRevivedSections: migration 00039 repairs what the rule
// before it left: a changed section that a forget made current again, a
// current section superseded by a call of its own, and a replaced
// document entry current again.
func TestMigrationEndsRevivedSections(t *testing.T) {
	t.Parallel()
	w := newSectionWorld(t)
	doc, v1 := w.store("Pump manual", 1, 1)
	_, v2 := w.store("Pump manual", 1, 2)
	if _, err := w.svc.Forget(w.ctx, w.a, v2["Pump part 2"], "wrong", false); err != nil {
		t.Fatal(err)
	}
	note, err := w.svc.Store(w.ctx, w.a, knowledge.StoreInput{Title: "Part 1, corrected", Body: "Open the valve two turns."})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Supersede(w.ctx, w.a, v1["Pump part 1"], note.ID); err != nil {
		t.Fatal(err)
	}
	d2, _ := w.store("Pump manual, second edition", 5, 5)
	if _, err := w.svc.Forget(w.ctx, w.a, d2.ID, "wrong", false); err != nil {
		t.Fatal(err)
	}
	// What the old rule left: the revived entries current, the superseded
	// section still its document's, PART_OF open.
	for _, q := range []struct {
		sql string
		arg any
	}{
		{`UPDATE knowledge SET expires_at = NULL WHERE id = ANY($1)`, []uuid.UUID{v1["Pump part 2"], doc.ID}},
		{`UPDATE knowledge_sections SET ended_at = NULL, ended_how = NULL WHERE id = $1`, v1["Pump part 1"]},
		{`UPDATE knowledge_relations SET valid_to = NULL, closed_by_agent_id = NULL WHERE from_id = $1 AND type = 'PART_OF'`, v1["Pump part 1"]},
	} {
		if _, err := w.d.Pool.Exec(w.ctx, q.sql, q.arg); err != nil {
			t.Fatalf("%s: %v", strings.Fields(q.sql)[1], err)
		}
	}
	if e := w.get(v1["Pump part 2"]); e.State != knowledge.StateHead {
		t.Fatalf("the revived section before the migration: %s", e.State)
	}
	if err := db.MigrateDownTo(w.ctx, w.d.Pool, 38); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(w.ctx, w.d.Pool); err != nil {
		t.Fatal(err)
	}
	// The tables the later migrations made again get their grants back,
	// as ctl migrate up gives them.
	if err := db.EnsureRoles(w.ctx, w.d.Pool, db.DefaultRoles()); err != nil {
		t.Fatal(err)
	}
	w.wantNotCurrent("the revived section after the migration", v1["Pump part 2"], "changed")
	w.wantNotCurrent("the superseded section after the migration", v1["Pump part 1"], "changed")
	w.wantNotCurrent("the revived document after the migration", doc.ID, "")
	var open int
	if err := w.d.Pool.QueryRow(w.ctx, `SELECT count(*) FROM knowledge_relations WHERE from_id = $1 AND type = 'PART_OF' AND valid_to IS NULL`,
		v1["Pump part 1"]).Scan(&open); err != nil || open != 0 {
		t.Fatalf("the superseded section's open PART_OF after the migration: %d, %v", open, err)
	}
}

// TestSupersedingALiveDocumentIsRefused: a live document's own entry is
// replaced by its source or erased, never superseded by a call (it would
// stay live, its sections current, beside a successor): supersede_knowledge
// and correct_knowledge refuse it (conflict on oldId, naming the way that
// works) and change nothing; its sections, a replaced document's entry and
// the document as a newId are superseded as any entry.
func TestSupersedingALiveDocumentIsRefused(t *testing.T) {
	t.Parallel()
	w := newSectionWorld(t)
	doc, parts := w.store("Pump manual", 1, 1)
	loose, err := w.svc.StoreDocument(w.ctx, w.a, knowledge.DocumentInput{Title: "Loose notes", Content: "## Notes\n\nNo source.\n", Format: "markdown"})
	if err != nil {
		t.Fatal(err)
	}
	note, err := w.svc.Store(w.ctx, w.a, knowledge.StoreInput{Title: "Pumps: see the wiki", Body: "The wiki has the pump manual."})
	if err != nil {
		t.Fatal(err)
	}
	entries := func() int {
		var n int
		if err := w.d.Pool.QueryRow(w.ctx, `SELECT count(*) FROM knowledge`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := entries()
	for _, c := range []struct {
		id   uuid.UUID
		says string
	}{{doc.ID, `store_document with its source "manuals/pump.md"`}, {loose.ID, "it has no source"}} {
		_, err := w.svc.Supersede(w.ctx, w.a, c.id, note.ID)
		if e := wantCode(t, err, errs.CodeConflict, "oldId"); !strings.Contains(e.Message, c.says) || !strings.Contains(e.Message, "forget_knowledge") {
			t.Fatalf("supersede of a live document: %q does not say %q and forget_knowledge", e.Message, c.says)
		}
		_, err = w.svc.Correct(w.ctx, w.a, c.id, knowledge.StoreInput{Title: "Pump manual, corrected", Body: "Open the valve two turns."})
		wantCode(t, err, errs.CodeConflict, "oldId")
		if e := w.get(c.id); e.State != knowledge.StateHead || !e.Document.Live {
			t.Fatalf("a refused supersession changed the document: state %s, live %v", e.State, e.Document.Live)
		}
	}
	if n := entries(); n != before {
		t.Fatalf("the refused corrections stored %d entries", n-before)
	}
	w.wantSections("after the refusals", doc.ID, parts["Pump part 1"], parts["Pump part 2"])

	// The document as the newId: the note is superseded, the document stays.
	if _, err := w.svc.Supersede(w.ctx, w.a, note.ID, doc.ID); err != nil {
		t.Fatal(err)
	}
	// A replaced document entry is an entry like any superseded one.
	d2, _ := w.store("Pump manual, second edition", 1, 1)
	if d2.PreviousID == nil || *d2.PreviousID != doc.ID {
		t.Fatalf("a new title makes a new document entry: %+v", d2)
	}
	_, err = w.svc.Supersede(w.ctx, w.a, doc.ID, loose.Sections[0].ID)
	if e := wantCode(t, err, errs.CodeConflict, "oldId"); !strings.Contains(e.Message, "already superseded") {
		t.Fatalf("supersede of a replaced document: %q", e.Message)
	}
}
