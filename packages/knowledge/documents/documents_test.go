package documents_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/documents"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

func TestStoreDocumentMakesSectionsPartOfIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.storeDoc(t, b.alice, domain.DocumentInput{Title: "Pump manual", Content: manual(3, same), Source: "docs/pumps.md", Tags: []string{"pumps"},
		Metadata: map[string]any{"team": "ops"}})
	if len(r.Sections) != 4 || r.New != 4 || r.Replaced || r.QuotaUnits != 5 {
		t.Fatalf("answer = %+v; want 4 new sections (preface + 3), 5 units", r)
	}
	if got := r.Sections[2].HeadingPath; len(got) != 1 || got[0] != "Chapter 1" {
		t.Fatalf("section 2 heading path = %q", got)
	}
	if len(r.Sections[0].HeadingPath) != 0 {
		t.Fatalf("the preface has heading path %q; want none", r.Sections[0].HeadingPath)
	}
	// Each section is an entry PART_OF the document, in the same order.
	n := b.count(t, `SELECT count(*) FROM knowledge_relations WHERE to_id = $1 AND type = 'PART_OF' AND valid_to IS NULL`, r.ID)
	if n != 4 {
		t.Fatalf("%d open PART_OF relations to the document; want 4", n)
	}
	var title, body, fields string
	if err := b.pool.QueryRow(b.ctx, `SELECT title, body, source || ' ' || kind || ' ' || metadata::text || ' ' || array_to_string(tags, ',')
		FROM knowledge WHERE id = $1`, r.Sections[2].ID).Scan(&title, &body, &fields); err != nil {
		t.Fatal(err)
	}
	if title != "Pump manual › Chapter 1" || !strings.Contains(body, same(1)) || fields != `docs/pumps.md reference {"team": "ops"} pumps` {
		t.Fatalf("section entry = %q / %q / %q", title, body, fields)
	}
	if err := b.pool.QueryRow(b.ctx, `SELECT body FROM knowledge WHERE id = $1`, r.ID).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "3. Chapter 1") {
		t.Fatalf("table of contents = %q", body)
	}
	if len(b.enq.All()) != 5 {
		t.Fatalf("%d embedding jobs; want 5 (the document and its sections)", len(b.enq.All()))
	}
	if used := b.quotaUsed(t, b.org); used != 5 {
		t.Fatalf("quota used %d; want 5", used)
	}
}

func TestStoreDocumentRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		in    domain.DocumentInput
		field string
	}{
		{domain.DocumentInput{Content: "x"}, "title"},
		{domain.DocumentInput{Title: "t", Content: "  \n"}, "content"},
		{domain.DocumentInput{Title: "t", Content: strings.Repeat("a", documents.MaxDocumentBytes+1)}, "content"},
		{domain.DocumentInput{Title: "t", Content: "x", Format: "pdf"}, "format"},
		{domain.DocumentInput{Title: "t", Content: "x", Tags: []string{"c++"}}, "tags[0]"},
	} {
		_, err := b.svc.StoreDocument(b.ctx, b.alice, tc.in)
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.CodeInvalidArgument || e.Field != tc.field {
			t.Errorf("%+v: err = %v; want invalid_argument on %s", tc.field, err, tc.field)
		}
	}
	if n := b.entries(t); n != 0 {
		t.Fatalf("%d entries after refused stores", n)
	}
}

// Concurrent replacements of one source: each is all or nothing, one
// after the other; the document ends as one of them stored it, with one
// live version and its sections' relations whole.
func TestReplaceDocumentConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := domain.DocumentInput{Title: "Pump manual", Content: manual(10, same), Source: "docs/pumps.md"}
	b.storeDoc(t, b.alice, in)
	const writers = 6
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			v := in
			v.Content = manual(10, func(i int) string {
				if i == w {
					return fmt.Sprintf("Writer %d's chapter.", w)
				}
				return same(i)
			})
			_, err := b.svc.StoreDocument(b.ctx, b.alice, v)
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_documents WHERE source = 'docs/pumps.md' AND live`); n != 1 {
		t.Fatalf("%d live documents of the source; want 1", n)
	}
	// 11 current sections, each a head, each PART_OF the live document once.
	n := b.count(t, `SELECT count(*) FROM knowledge_sections s
		JOIN knowledge_documents d ON d.org_id = s.org_id AND d.id = s.document_id AND d.live
		JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.id AND k.head_id IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
		JOIN knowledge_relations r ON r.org_id = s.org_id AND r.from_id = s.id AND r.to_id = d.id AND r.type = 'PART_OF' AND r.valid_to IS NULL
		WHERE s.ended_at IS NULL`)
	if n != 11 {
		t.Fatalf("%d current sections linked to the live document; want 11", n)
	}
	// Exactly one writer's chapter is in it.
	n = b.count(t, `SELECT count(*) FROM knowledge_sections s JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.id WHERE s.ended_at IS NULL AND k.body LIKE 'Writer%' OR (s.ended_at IS NULL AND k.body LIKE '%Writer %')`)
	if n != 1 {
		t.Fatalf("%d writers' chapters current; want 1", n)
	}
}

// Writers storing a source for the first time at once, alone or with
// clientTokens, two agents, other contents: every call succeeds (the first
// stores the document, each later one replaces it or finds it unchanged),
// and the source has one live document, whose entry is a head.
func TestFirstStoresOfOneSourceAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for round := range 3 {
		source := fmt.Sprintf("docs/first-%d.md", round)
		const writers = 8
		var wg sync.WaitGroup
		answers := make(chan *domain.DocumentResult, writers)
		for w := range writers {
			c := b.alice
			if w%2 == 1 {
				c = b.bob
			}
			wg.Go(func() {
				in := domain.DocumentInput{Title: "Pump manual", Source: source, Content: manual(3, func(i int) string {
					return fmt.Sprintf("Version %d of chapter %d.", w%3, i)
				})}
				if w%4 == 0 {
					tok := uuid.New()
					in.ClientToken = &tok
				}
				res, err := b.svc.StoreDocument(b.ctx, c, in)
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
				}
				answers <- res
			})
		}
		wg.Wait()
		close(answers)
		firsts := 0
		for res := range answers {
			if res != nil && !res.Replaced {
				firsts++
			}
		}
		if firsts != 1 {
			t.Fatalf("round %d: %d writers stored the source's first document; want 1 (the others replace it)", round, firsts)
		}
		if n := b.count(t, `SELECT count(*) FROM knowledge_documents d JOIN knowledge k ON k.org_id = d.org_id AND k.id = d.id
			WHERE d.source = $1 AND d.live AND k.head_id IS NULL`, source); n != 1 {
			t.Fatalf("round %d: %d live documents of the source with a current entry; want 1", round, n)
		}
	}
}

// A live document whose own entry a supersession took (a database from
// before Supersede refused it) is ended by the next store of its source,
// not superseded a second time (a second edge from it: a unique violation,
// "already exists" naming nothing): concurrent writers all succeed, the
// source has one live document with a current entry, the old entry keeps
// its one successor and the sections it kept moved to the new document.
func TestReplaceDocumentWhoseEntryWasSuperseded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := domain.DocumentInput{Title: "Pump manual", Content: manual(3, same), Source: "docs/pumps.md"}
	old := b.storeDoc(t, b.alice, in)
	note := b.storeDoc(t, b.alice, domain.DocumentInput{Title: "Pumps, see the wiki", Content: "The wiki has it."})
	if _, err := b.pool.Exec(b.ctx, `UPDATE knowledge SET superseded_by = $2, head_id = $2, superseded_at = now() WHERE org_id = $1 AND id = $3`,
		b.org, note.ID, old.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(b.ctx, `INSERT INTO knowledge_supersessions (org_id, old_id, new_id, agent_id) VALUES ($1, $2, $3, $4)`,
		b.org, old.ID, note.ID, b.alice.AgentID); err != nil {
		t.Fatal(err)
	}
	const writers = 4
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			v := in
			switch w {
			case 0: // the same arguments again
			case 1: // a new title: a new document entry anyway
				v.Title = "Pump manual, second edition"
			default:
				v.Content = manual(3, func(i int) string { return fmt.Sprintf("Writer %d, chapter %d.", w, i) })
			}
			if _, err := b.svc.StoreDocument(b.ctx, b.alice, v); err != nil {
				t.Errorf("writer %d: %v", w, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_documents d JOIN knowledge k ON k.org_id = d.org_id AND k.id = d.id
		WHERE d.source = 'docs/pumps.md' AND d.live AND k.head_id IS NULL AND d.id <> $1`, old.ID); n != 1 {
		t.Fatalf("%d live documents of the source with a current entry (other than the superseded one); want 1", n)
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_supersessions WHERE old_id = $1 AND new_id = $2`, old.ID, note.ID); n != 1 ||
		b.count(t, `SELECT count(*) FROM knowledge_supersessions WHERE old_id = $1`, old.ID) != 1 {
		t.Fatal("the superseded document entry lost its successor or gained another")
	}
	if n := b.count(t, `SELECT count(*) FROM knowledge_sections WHERE document_id = $1 AND ended_at IS NULL`, old.ID); n != 0 {
		t.Fatalf("the ended document keeps %d current sections", n)
	}
}

// The quota is checked for the whole document before anything is written,
// and concurrent stores never pass it.
func TestDocumentQuotaNeverExceeded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQuota(t, b.org, 20)
	var wg sync.WaitGroup
	const writers = 8
	ok := make(chan int, writers)
	for w := range writers {
		wg.Go(func() {
			r, err := b.svc.StoreDocument(b.ctx, b.alice, domain.DocumentInput{
				Title: fmt.Sprintf("Manual %d", w), Content: manual(4, same)})
			if err == nil {
				ok <- r.QuotaUnits
				return
			}
			if errs.CodeOf(err) != errs.CodeQuotaExceeded {
				t.Errorf("store %d: %v; want quota_exceeded", w, err)
			}
		})
	}
	wg.Wait()
	close(ok)
	stored := 0
	for u := range ok {
		stored += u
	}
	if stored != 18 { // 6 entries each: 3 documents fit in 20
		t.Fatalf("%d units stored; want 18 (3 documents of 6 entries)", stored)
	}
	if n := b.entries(t); n != 18 || b.quotaUsed(t, b.org) != 18 {
		t.Fatalf("%d entries, quota used %d; want 18 and 18", n, b.quotaUsed(t, b.org))
	}
}

func TestDocumentClientToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := uuid.New()
	in := domain.DocumentInput{Title: "Pump manual", Content: manual(2, same), ClientToken: &tok}
	first := b.storeDoc(t, b.alice, in)
	again := b.storeDoc(t, b.alice, in)
	if !again.Replayed || again.ID != first.ID || len(again.Sections) != 3 || again.Sections[1].ID != first.Sections[1].ID {
		t.Fatalf("retry = %+v; want the first document replayed", again)
	}
	if n := b.entries(t); n != 4 {
		t.Fatalf("%d entries after a retry; want 4", n)
	}
	in.Title = "Other"
	_, err := b.svc.StoreDocument(b.ctx, b.alice, in)
	var e *errs.Error
	if !errors.As(err, &e) || e.Field != "clientToken" {
		t.Fatalf("token with other arguments: %v; want invalid_argument on clientToken", err)
	}
}

func TestStoreHTMLDocumentCutsAtItsHeadings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.storeDoc(t, b.alice, domain.DocumentInput{Title: "Page", Format: documents.FormatHTML,
		Content: "<html><body><h1>Intro</h1><p>Hello pumps.</p><script>x()</script><h2>Valves</h2><p>Open slowly.</p></body></html>"})
	if len(r.Sections) != 2 || r.Sections[1].HeadingPath[1] != "Valves" {
		t.Fatalf("sections %+v; want Intro and Intro › Valves", r.Sections)
	}
}

func TestStoreTextDocumentHasNoHeadings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.storeDoc(t, b.alice, domain.DocumentInput{Title: "Notes", Format: documents.FormatText, Content: "# not a heading\n\nplain words\n"})
	if len(r.Sections) != 1 || len(r.Sections[0].HeadingPath) != 0 {
		t.Fatalf("sections %+v; want one without a heading path", r.Sections)
	}
}
