package knowledge_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// An org with documents round-trips: a replaced document (a changed
// section superseded, a removed one retired, the earlier marks and rows
// kept) and a document without a source come back with their positions,
// heading paths, hashes and PART_OF relations, so the copy is replaced
// as the original would be (the same content again changes nothing).
func TestExportImportDocuments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	nested := func(n int, text func(int) string) string {
		var s strings.Builder
		s.WriteString("Preface.\n\n# Guide\n\nIntro.\n\n")
		for i := range n {
			fmt.Fprintf(&s, "## Step %d\n\n%s\n\n### Notes %d\n\nA note on step %d.\n\n", i, text(i), i, i)
		}
		return s.String()
	}
	in := knowledge.DocumentInput{Title: "Runbook", Content: nested(3, same), Source: "docs/runbook.md", Tags: []string{"ops"}}
	b.storeDoc(t, b.alice, in)
	changed := nested(2, func(i int) string { return same(i) + map[bool]string{true: " Changed.", false: ""}[i == 1] })
	in.Content = changed
	replaced := b.storeDoc(t, b.bob, in)
	if !replaced.Replaced || len(replaced.Retired) == 0 {
		t.Fatalf("replacement: %+v", replaced)
	}
	b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Notes without a source", Content: "Plain text.\n\nTwo paragraphs.\n", Format: "text"})

	file, rep := b.export(t, b.svc, b.org, false)
	docs := b.count(t, "SELECT count(*) FROM knowledge_documents WHERE org_id = $1", b.org)
	secs := b.count(t, "SELECT count(*) FROM knowledge_sections WHERE org_id = $1", b.org)
	if rep.Documents != int64(docs) || rep.Sections != int64(secs) || secs < 10 {
		t.Fatalf("export: %+v; the org has %d documents, %d sections", rep, docs, secs)
	}

	db2 := testenv.Postgres(t)
	svc2 := knowledge.New(db2.Pool, knowledge.Options{})
	org2 := testfactory.Org(b.ctx, t, db2.Pool, &testfactory.OrgOpts{Name: "moved"}).ID
	irep, err := svc2.Operations().Import(b.ctx, org2, opener(file), knowledge.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if irep.Documents != rep.Documents || irep.Sections != rep.Sections || irep.Relations != rep.Relations || len(irep.Skipped) != 0 {
		t.Fatalf("import: %+v, export: %+v", irep, rep)
	}
	if second, _ := b.export(t, svc2, org2, false); !bytes.Equal(file, second) {
		t.Fatalf("export -> import -> export differs:\n%s\n---\n%s", file, second)
	}
	// The copy is a document as the original is: its sections in order,
	// and a store of the same content to its source changes nothing.
	var paths []string
	rows, err := db2.Pool.Query(b.ctx, `SELECT array_to_string(s.heading_path, ' > ') FROM knowledge_sections s
		JOIN knowledge_documents d ON d.org_id = s.org_id AND d.id = s.document_id
		WHERE s.org_id = $1 AND d.live AND d.source = 'docs/runbook.md' AND s.ended_at IS NULL ORDER BY s.position`, org2)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if want := "|Guide|Guide > Step 0|Guide > Step 0 > Notes 0|Guide > Step 1|Guide > Step 1 > Notes 1"; strings.Join(paths, "|") != want {
		t.Fatalf("sections of the copy:\n got %q\nwant %q", strings.Join(paths, "|"), want)
	}
	again, err := svc2.StoreDocument(b.ctx, knowledge.Caller{OrgID: org2, AgentID: b.alice.AgentID}, in)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replaced || !again.Unchanged || again.ID != replaced.ID {
		t.Fatalf("the same content stored to the copy: %+v, want unchanged %s", again, replaced.ID)
	}

	// Idempotent: a second import adds nothing and says so.
	twice, err := svc2.Operations().Import(b.ctx, org2, opener(file), knowledge.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if twice.Documents+twice.Sections != 0 || twice.Skipped["document: already present"] != rep.Documents ||
		twice.Skipped["section: already present"] != rep.Sections {
		t.Fatalf("second import: %+v", twice)
	}
}

// A file's live document whose source the org's own live document has
// (another id) refuses the whole file, naming the source: one live
// document per source, and which replaces which is the operator's call.
func TestImportRefusesALiveDocumentOfATakenSource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.storeDoc(t, b.alice, knowledge.DocumentInput{Title: "Pump manual", Content: manual(2, same), Source: "docs/pumps.md"})
	file, _ := b.export(t, b.svc, b.org, false)
	b.storeDoc(t, b.eve, knowledge.DocumentInput{Title: "Their pump manual", Content: manual(1, same), Source: "docs/pumps.md"})
	before := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1", b.other)
	_, err := b.ops.Operations().Import(b.ctx, b.other, opener(file), knowledge.ImportOptions{})
	if e := wantCode(t, err, errs.CodeInvalidArgument, "file"); !strings.Contains(e.Message, "docs/pumps.md") {
		t.Fatalf("refusal: %v", e)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1", b.other); n != before {
		t.Fatalf("a refused import changed the org: %d entries, was %d", n, before)
	}
	// A section naming a document neither in the file nor in the org.
	var kept []string
	for _, l := range strings.Split(string(file), "\n") {
		if !strings.Contains(l, `"kind":"document"`) {
			kept = append(kept, l)
		}
	}
	target := b.mkOrg(t, "target")
	_, err = b.ops.Operations().Import(b.ctx, target, opener([]byte(strings.Join(kept, "\n"))), knowledge.ImportOptions{})
	wantCode(t, err, errs.CodeInvalidArgument, "file")
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1", target); n != 0 {
		t.Fatalf("%d entries imported from a refused file", n)
	}
}
