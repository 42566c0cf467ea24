package knowledge_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// manual is a small Markdown document of n sections, each with body text
// v (so a test can change one section's text).
func manual(n int, text func(i int) string) string {
	var b strings.Builder
	b.WriteString("Preface of the manual.\n\n")
	for i := range n {
		fmt.Fprintf(&b, "# Chapter %d\n\n%s\n\n", i, text(i))
	}
	return b.String()
}

func same(i int) string {
	return fmt.Sprintf("The text of chapter %d, about valves and pumps number %d.", i, i)
}

func (b *bundle) storeDoc(t *testing.T, c knowledge.Caller, in knowledge.DocumentInput) *knowledge.DocumentResult {
	t.Helper()
	r, err := b.svc.StoreDocument(b.ctx, c, in)
	if err != nil {
		t.Fatalf("store document %q: %v", in.Title, err)
	}
	return r
}

func TestReplaceDocumentKeepsUnchangedSections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := knowledge.DocumentInput{Title: "Pump manual", Content: manual(5, same), Source: "docs/pumps.md"}
	first := b.storeDoc(t, b.alice, in)
	b.embedPending(t)
	gen := func(id uuid.UUID) string {
		var s string
		if err := b.pool.QueryRow(b.ctx, `SELECT embedding_status || ':' || embedding_generation FROM knowledge WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := gen(first.Sections[1].ID)
	jobs := len(b.enq.All())

	// Chapter 2 changed, the rest the same: the table of contents too.
	in.Content = manual(5, func(i int) string {
		if i == 2 {
			return "New text of chapter two."
		}
		return same(i)
	})
	r := b.storeDoc(t, b.bob, in)
	if !r.Replaced || r.ID != first.ID || r.Kept != 5 || r.Changed != 1 || r.New != 0 || len(r.Retired) != 0 || r.QuotaUnits != 1 {
		t.Fatalf("replacement = %+v; want the same document, 5 kept, 1 changed, 1 unit", r)
	}
	for _, i := range []int{0, 1, 2, 4, 5} {
		if r.Sections[i].ID != first.Sections[i].ID || r.Sections[i].EmbeddingStatus != knowledge.EmbeddingReady {
			t.Fatalf("kept section %d = %+v; want its id and vectors kept", i, r.Sections[i])
		}
	}
	if r.Sections[3].Status != knowledge.SectionChanged || *r.Sections[3].Supersedes != first.Sections[3].ID {
		t.Fatalf("section 3 = %+v; want changed, superseding %s", r.Sections[3], first.Sections[3].ID)
	}
	if got := gen(first.Sections[1].ID); got != before {
		t.Fatalf("a kept section's embedding went from %s to %s", before, got)
	}
	if got := len(b.enq.All()) - jobs; got != 1 {
		t.Fatalf("%d entries to embed after the replacement; want 1 (the changed section)", got)
	}
	// The changed section's old version is superseded by the new, the
	// retired one expired; the document lists its sections in order.
	old, err := b.svc.Get(b.ctx, b.alice, first.Sections[3].ID)
	if err != nil || old.State != knowledge.StateSuperseded || *old.SupersededBy != r.Sections[3].ID {
		t.Fatalf("changed section's old version = %+v, %v", old, err)
	}
	n := b.count(t, `SELECT count(*) FROM knowledge_relations WHERE to_id = $1 AND type = 'PART_OF' AND valid_to IS NULL`, r.ID)
	if n != 6 {
		t.Fatalf("%d open PART_OF relations; want 6", n)
	}

	// The same again changes nothing.
	again := b.storeDoc(t, b.bob, in)
	if !again.Unchanged || again.QuotaUnits != 0 || again.Kept != 6 || again.Sections[3].ID != r.Sections[3].ID {
		t.Fatalf("same content again = %+v; want unchanged", again)
	}
}

func TestReplaceDocumentNewTitleSupersedesTheDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := knowledge.DocumentInput{Title: "Pump manual", Content: manual(3, same), Source: "docs/pumps.md"}
	first := b.storeDoc(t, b.alice, in)
	// Chapter 1 removed, chapter 5 added: the table of contents changes.
	in.Content = manual(3, func(i int) string { return same(i) }) + "# Chapter 5\n\nValves again.\n"
	in.Content = strings.Replace(in.Content, "# Chapter 1\n\n"+same(1)+"\n\n", "", 1)
	r := b.storeDoc(t, b.alice, in)
	if r.ID == first.ID || r.PreviousID == nil || *r.PreviousID != first.ID || r.Kept != 3 || r.New != 1 || r.QuotaUnits != 2 ||
		len(r.Retired) != 1 || r.Retired[0] != first.Sections[2].ID {
		t.Fatalf("replacement = %+v; want a new document entry superseding %s, 3 kept, 1 new, chapter 1 retired", r, first.ID)
	}
	gone, err := b.svc.Get(b.ctx, b.alice, first.Sections[2].ID)
	if err != nil || gone.State != knowledge.StateExpired {
		t.Fatalf("retired section = %+v, %v; want expired (readable by id)", gone, err)
	}
	e, err := b.svc.Get(b.ctx, b.alice, first.ID)
	if err != nil || e.State != knowledge.StateSuperseded || *e.SupersededBy != r.ID {
		t.Fatalf("previous document = %+v, %v", e, err)
	}
	n := b.count(t, `SELECT count(*) FROM knowledge_relations WHERE to_id = $1 AND type = 'PART_OF' AND valid_to IS NULL`, r.ID)
	m := b.count(t, `SELECT count(*) FROM knowledge_relations WHERE to_id = $1 AND type = 'PART_OF' AND valid_to IS NULL`, first.ID)
	if n != 4 || m != 0 {
		t.Fatalf("open PART_OF: %d to the new document, %d to the old; want 4 and 0", n, m)
	}
}

// A retry of a document's store with its clientToken, after the agent
// forgot the document, is refused (as a store_knowledge retry is) whatever
// its arguments: the forgotten text is not stored again under a new id.
// The token's row keeps neither the document's id nor the arguments'
// hash. Forgetting one section leaves the token answering; another
// token, or another agent's, stores the document anew.
func TestForgottenDocumentIsNotStoredAgainByItsToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := uuid.New()
	in := knowledge.DocumentInput{Title: "Pump manual", Content: manual(2, same), ClientToken: &tok}
	first := b.storeDoc(t, b.alice, in)
	if _, err := b.svc.Forget(b.ctx, b.alice, first.Sections[1].ID, "wrong", false); err != nil {
		t.Fatal(err)
	}
	if again := b.storeDoc(t, b.alice, in); !again.Replayed || again.ID != first.ID || len(again.Sections) != 2 {
		t.Fatalf("retry after forgetting a section = %+v; want the document replayed without it", again)
	}
	if _, err := b.svc.Forget(b.ctx, b.alice, first.ID, "obsolete", false); err != nil {
		t.Fatal(err)
	}
	other := in
	other.Content = manual(3, same)
	for name, retry := range map[string]knowledge.DocumentInput{"same arguments": in, "other arguments": other} {
		_, err := b.svc.StoreDocument(b.ctx, b.alice, retry)
		e := wantCode(t, err, errs.CodeInvalidArgument, "clientToken")
		if !strings.Contains(e.Message, "forgotten") || strings.Contains(e.Message, first.ID.String()) {
			t.Fatalf("%s: %q; want the token refused as forgotten, naming no id", name, e.Message)
		}
	}
	if n := b.entries(t); n != 0 {
		t.Fatalf("%d entries after refused retries; want 0", n)
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_document_tokens
		WHERE client_token = $1 AND document_id IS NULL AND args_hash IS NULL AND forgotten_at IS NOT NULL`, tok); n != 1 {
		t.Fatalf("%d forgotten token rows; want 1 keeping neither the document nor the hash", n)
	}
	if r := b.storeDoc(t, b.bob, in); r.Replayed || r.ID == first.ID {
		t.Fatalf("another agent's token: %+v; want a new document", r)
	}
	in.ClientToken = new(uuid.New())
	if r := b.storeDoc(t, b.alice, in); r.Replayed || r.ID == first.ID {
		t.Fatalf("a new token: %+v; want a new document", r)
	}
}

func TestForgetDocumentForgetsItsSections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Pump manual", Content: manual(3, same), Source: "docs/pumps.md"})
	// One section alone first: the document stays, without it.
	if _, err := b.svc.Forget(b.ctx, b.alice, r.Sections[1].ID, "wrong", false); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_sections WHERE document_id = $1`, r.ID); n != 3 {
		t.Fatalf("%d section rows after forgetting one of 4; want 3", n)
	}
	res, err := b.svc.Forget(b.ctx, b.alice, r.ID, "obsolete", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sections != 3 {
		t.Fatalf("forget of the document forgot %d sections; want 3", res.Sections)
	}
	if n := b.entries(t); n != 0 {
		t.Fatalf("%d entries left", n)
	}
	for _, table := range []string{"knowledge_sections", "knowledge_documents", "knowledge_document_tokens"} {
		if n := b.count(t, "SELECT count(*) FROM "+table); n != 0 {
			t.Fatalf("%d rows left in %s", n, table)
		}
	}
	e, err := b.svc.Get(b.ctx, b.alice, r.Sections[2].ID)
	if err != nil || e.State != knowledge.StateForgotten {
		t.Fatalf("a section of the forgotten document reads %+v, %v; want forgotten", e, err)
	}
	// The source is free again: a new store makes a new document.
	again := b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Pump manual", Content: manual(1, same), Source: "docs/pumps.md"})
	if again.Replaced {
		t.Fatal("a store after the forget replaced a forgotten document")
	}
}

func TestReadDocumentAndItsSections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Pump manual", Content: manual(3, same) + "# Chapter 9\n\nThe flux capacitor needs grease.\n", Source: "docs/pumps.md"})
	e, err := b.svc.Get(b.ctx, b.alice, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Document == nil || e.Document.Source != "docs/pumps.md" || len(e.Document.Sections) != 5 || !e.Document.Live {
		t.Fatalf("document read = %+v; want its 5 sections", e.Document)
	}
	for i, s := range e.Document.Sections {
		if s.ID != r.Sections[i].ID {
			t.Fatalf("section %d of the read is %s; want %s (in order)", i, s.ID, r.Sections[i].ID)
		}
	}
	sec, err := b.svc.Get(b.ctx, b.alice, r.Sections[4].ID)
	if err != nil {
		t.Fatal(err)
	}
	if sec.Section == nil || sec.Section.ID != r.ID || sec.Section.Position != 4 || sec.Section.HeadingPath[0] != "Chapter 9" {
		t.Fatalf("section read = %+v; want its document and place", sec.Section)
	}
	// Another org sees nothing of it.
	if _, err := b.svc.Get(b.ctx, b.eve, r.ID); errs.CodeOf(err) != errs.CodeNotFound {
		t.Fatalf("another org's read: %v; want not_found", err)
	}
	b.embedPending(t)
	b.indexAll(t)
	res, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "flux capacitor grease"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) == 0 || res.Hits[0].ID != r.Sections[4].ID {
		t.Fatalf("search hits %+v; want chapter 9 first", res.Hits)
	}
	d := res.Hits[0].Document
	if d == nil || d.ID != r.ID || d.Title != "Pump manual" || d.Source != "docs/pumps.md" || d.HeadingPath[0] != "Chapter 9" {
		t.Fatalf("hit's document = %+v", d)
	}
}

func TestListByDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Pump manual", Content: manual(3, same), Source: "docs/pumps.md"})
	other := b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Valve manual", Content: manual(2, same)})
	b.store(t, b.alice, "plain", "a plain entry")
	limit := 3
	in := knowledge.ListInput{DocumentID: &r.ID, Limit: &limit}
	seen := map[uuid.UUID]bool{}
	for {
		page, err := b.svc.List(b.ctx, b.alice, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range page.Hits {
			seen[h.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		in.Cursor = page.NextCursor
	}
	if len(seen) != 4 {
		t.Fatalf("listed %d entries of the document; want its 4 sections", len(seen))
	}
	for _, s := range r.Sections {
		if !seen[s.ID] {
			t.Fatalf("section %s not listed", s.ID)
		}
	}
	// A cursor of this listing is refused for another document's.
	in.DocumentID = &other.ID
	if _, err := b.svc.List(b.ctx, b.alice, in); errs.CodeOf(err) != errs.CodeInvalidArgument {
		t.Fatalf("a cursor with another documentId: %v; want invalid_argument", err)
	}
	// Another org lists nothing of it.
	page, err := b.svc.List(b.ctx, b.eve, knowledge.ListInput{DocumentID: &r.ID})
	if err != nil || len(page.Hits) != 0 {
		t.Fatalf("another org's listing: %+v, %v", page, err)
	}
}

// deadlockCounter is a log handler that counts the transactions Postgres
// aborted as deadlocks (the retries RetryTx logs).
type deadlockCounter struct{ n atomic.Int64 }

func (d *deadlockCounter) Enabled(context.Context, slog.Level) bool { return true }
func (d *deadlockCounter) WithAttrs([]slog.Attr) slog.Handler       { return d }
func (d *deadlockCounter) WithGroup(string) slog.Handler            { return d }
func (d *deadlockCounter) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" && strings.Contains(a.Value.String(), "40P01") {
			d.n.Add(1)
		}
		return true
	})
	return nil
}

// Replacements of a document while agents link and unlink its entries
// (its own, its current sections, their earlier versions) never deadlock:
// a replacement locks every entry it writes in one statement in id order,
// as a link locks its two ends, so neither waits for the other in a cycle
// (docs/operators.md, "Lock order"). Deadlocks would be retried, not
// answered: the test counts the retries.
func TestReplaceDocumentWhileLinkingNeverDeadlocks(t *testing.T) {
	t.Parallel()
	dl := &deadlockCounter{}
	b := setup(t, func(o *knowledge.Options) { o.Logger = slog.New(dl) })
	version := func(v int) knowledge.DocumentInput {
		return knowledge.DocumentInput{Title: fmt.Sprintf("Pump manual %d", v%2), Source: "docs/pumps.md",
			Content: manual(4, func(i int) string { return fmt.Sprintf("Version %d of chapter %d.", v, i) })}
	}
	b.storeDoc(t, b.alice, version(0))
	types := []string{"RELATES_TO", "DEPENDS_ON"}
	for round := 1; round <= 12; round++ {
		// The document's entries of every kind: its entry, its current
		// sections, their earlier versions (whose heads the next
		// replacement moves).
		var ids []uuid.UUID
		rows, err := b.pool.Query(b.ctx, `SELECT id FROM knowledge WHERE org_id = $1 AND source = 'docs/pumps.md' ORDER BY created_at DESC, id LIMIT 16`, b.org)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { b.storeDoc(t, b.alice, version(round)) })
		for a := range 3 {
			wg.Go(func() {
				for i := range 6 {
					from, to := ids[(a+i)%len(ids)], ids[(a*5+i*3+1)%len(ids)]
					if from == to {
						continue
					}
					in := knowledge.LinkInput{FromID: from, ToID: to, Type: types[i%2]}
					if _, err := b.svc.Link(b.ctx, b.bob, in); err != nil && errs.CodeOf(err) == errs.CodeInternal {
						t.Error(err)
					}
					if _, err := b.svc.Unlink(b.ctx, b.bob, from, to, in.Type); err != nil && errs.CodeOf(err) == errs.CodeInternal {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
	}
	if n := dl.n.Load(); n != 0 {
		t.Fatalf("%d transactions aborted as deadlocks", n)
	}
}
