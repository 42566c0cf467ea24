package knowledge_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

func opener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func (b *bundle) export(t *testing.T, svc *knowledge.Service, org uuid.UUID, vectors bool) ([]byte, *knowledge.ExportReport) {
	t.Helper()
	var buf bytes.Buffer
	rep, err := svc.Operations().Export(b.ctx, org, &buf, knowledge.ExportOptions{Vectors: vectors, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), rep
}

// A varied org: two authors, tags, expiry, a client token, a chain with a
// branch, task links, vectors on some entries.
func (b *bundle) variedOrg(t *testing.T) {
	t.Helper()
	task := b.mkTask(t, b.org)
	tok := uuid.New()
	exp := time.Now().Add(48 * time.Hour)
	conf := 55
	a, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: "v1 \"quoted\" <html> & ünïcode", Body: "first\nversion", Tags: []string{"ops", "db"},
		ClientToken: &tok, ExpiresAt: &exp, Confidence: &conf, TaskRef: &knowledge.TaskRef{TaskID: task, Kind: knowledge.LinkProduced},
		Source: "https://wiki.example.com/ops", Kind: knowledge.KindReference, Metadata: map[string]any{"env": "prod", "shard": 7, "live": true}})
	if err != nil {
		t.Fatal(err)
	}
	m := b.store(t, b.bob, "v2", "second version")
	b.embedPending(t)
	h := b.store(t, b.alice, "v3", "third version")
	d := b.store(t, b.bob, "branch", "replaced by v3 too")
	for _, e := range [][2]uuid.UUID{{a.ID, m}, {m, h}, {d, h}} {
		if _, err := b.svc.Supersede(b.ctx, b.alice, e[0], e[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.pool.Exec(b.ctx, "INSERT INTO task_knowledge (org_id, task_id, knowledge_id, kind) VALUES ($1, $2, $3, 'references')", b.org, task, h); err != nil {
		t.Fatal(err)
	}
	// Relations: an org's own type, a note, a closed one (history).
	if _, err := b.ops.Operations().AddRelationType(b.ctx, b.org, "BLOCKS", "BLOCKED_BY", false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: h, ToID: d, Type: "DEPENDS_ON", Note: "see \"branch\""}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Link(b.ctx, b.bob, knowledge.LinkInput{FromID: m, ToID: h, Type: "BLOCKED_BY"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Link(b.ctx, b.bob, knowledge.LinkInput{FromID: a.ID, ToID: d, Type: "RELATES_TO"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Unlink(b.ctx, b.alice, d, a.ID, "RELATES_TO"); err != nil {
		t.Fatal(err)
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.variedOrg(t)
	for _, vectors := range []bool{false, true} {
		first, rep := b.export(t, b.svc, b.org, vectors)
		if rep.Entries != 4 || rep.Agents != 2 || rep.Tasks != 1 || rep.Supersessions != 3 || rep.TaskLinks != 2 || rep.RelationTypes != 1 || rep.Relations != 3 {
			t.Fatalf("export: %+v", rep)
		}
		if vectors != (rep.Vectors == 2) {
			t.Fatalf("vectors=%v: %d vectors exported", vectors, rep.Vectors)
		}
		// Into an empty database, an org of another id.
		db2 := testenv.Postgres(t)
		// The duplicate check of the store below runs within inTime, as
		// the bundle's: the product's budget is met by no loaded machine.
		svc2 := knowledge.New(db2.Pool, knowledge.Options{Testing: knowledge.TestingKnobs{SimilarBudget: inTime}})
		org2 := testfactory.Org(b.ctx, t, db2.Pool, &testfactory.OrgOpts{Name: "moved"}).ID
		irep, err := svc2.Operations().Import(b.ctx, org2, opener(first), knowledge.ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if irep.Entries != 4 || irep.Agents != 2 || irep.Tasks != 1 || irep.Chains != 3 || irep.Supersessions != 3 || irep.TaskLinks != 2 ||
			irep.RelationTypes != 1 || irep.Relations != 3 || len(irep.Skipped) != 0 {
			t.Fatalf("import: %+v", irep)
		}
		// The duplicate-check keys came with the rows (not left to
		// Upkeep's backfill, a rewrite of each row): a copy of an
		// imported entry stored now is told it has one.
		var missing int
		if err := db2.Pool.QueryRow(b.ctx, "SELECT count(*) FROM knowledge WHERE org_id = $1 AND similar_keys IS NULL", org2).Scan(&missing); err != nil || missing != 0 {
			t.Fatalf("%d imported entries without duplicate-check keys (%v)", missing, err)
		}
		var dupOf, author uuid.UUID
		var title, body string
		if err := db2.Pool.QueryRow(b.ctx, `SELECT id, created_by_agent_id, title, body FROM knowledge
			WHERE org_id = $1 AND head_id IS NULL ORDER BY length(body) DESC LIMIT 1`, org2).Scan(&dupOf, &author, &title, &body); err != nil {
			t.Fatal(err)
		}
		second, _ := b.export(t, svc2, org2, vectors)
		if !bytes.Equal(first, second) {
			t.Fatalf("vectors=%v: export -> import -> export differs:\n%s\n---\n%s", vectors, first, second)
		}
		// Idempotent: a second import changes nothing and says why.
		again, err := svc2.Operations().Import(b.ctx, org2, opener(first), knowledge.ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if again.Entries+again.Agents+again.Tasks+again.Chains+again.Supersessions+again.TaskLinks+again.Relations+again.RelationTypes != 0 ||
			again.Skipped["entry: already present"] != 4 || again.Skipped["taskLink: already present"] != 2 ||
			again.Skipped["relation: already present"] != 3 || again.Skipped["relationType: already present"] != 1 {
			t.Fatalf("second import: %+v", again)
		}
		if third, _ := b.export(t, svc2, org2, vectors); !bytes.Equal(first, third) {
			t.Fatal("a second import changed the org")
		}
		var used int
		if err := db2.Pool.QueryRow(b.ctx, "SELECT used FROM org_quotas WHERE org_id = $1", org2).Scan(&used); err != nil || used != 4 {
			t.Fatalf("quota used after import: %d %v", used, err)
		}
		dup, err := svc2.Store(b.ctx, knowledge.Caller{OrgID: org2, AgentID: author}, knowledge.StoreInput{Title: title, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if len(dup.Similar) == 0 || dup.Similar[0].ID != dupOf {
			t.Fatalf("vectors=%v: a copy of imported entry %s: similar %+v", vectors, dupOf, dup.Similar)
		}
	}
}

func TestImportRespectsQuotaAndVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.variedOrg(t)
	file, _ := b.export(t, b.svc, b.org, false)
	b.setQuota(t, b.other, 3)
	_, err := b.ops.Operations().Import(b.ctx, b.other, opener(file), knowledge.ImportOptions{})
	wantCode(t, err, errs.CodeQuotaExceeded, "ignoreQuota")
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1", b.other); n != 0 {
		t.Fatalf("a refused import left %d entries", n)
	}
	rep, err := b.ops.Operations().Import(b.ctx, b.other, opener(file), knowledge.ImportOptions{IgnoreQuota: true})
	if err != nil || rep.Entries != 4 {
		t.Fatalf("import with IgnoreQuota: %+v %v", rep, err)
	}
	if used := b.quotaUsed(t, b.other); used != 4 {
		t.Fatalf("quota used %d, want 4 (counted past the limit)", used)
	}
	// The same ids now live in two orgs of one database, independently.
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $2 AND id IN (SELECT id FROM knowledge WHERE org_id = $1)", b.org, b.other); n != 4 {
		t.Fatalf("%d shared ids", n)
	}
	newer := bytes.Replace(file, fmt.Appendf(nil, `"version":%d`, knowledge.ExportVersion), fmt.Appendf(nil, `"version":%d`, knowledge.ExportVersion+1), 1)
	if _, err := b.ops.Operations().Import(b.ctx, b.other, opener(newer), knowledge.ImportOptions{}); !errors.Is(err, knowledge.ErrNewerFormat) {
		t.Fatalf("a newer version: %v", err)
	}
	unknown := append(append([]byte{}, file...), []byte(`{"kind":"hologram","id":"x"}`+"\n")...)
	rep, err = b.ops.Operations().Import(b.ctx, b.other, opener(unknown), knowledge.ImportOptions{})
	if err != nil || rep.Skipped[`unknown kind "hologram"`] != 1 {
		t.Fatalf("unknown kind: %+v %v", rep, err)
	}
	broken := []byte(strings.SplitN(string(file), "\n", 2)[0] + "\n{not json\n")
	_, err = b.ops.Operations().Import(b.ctx, b.other, opener(broken), knowledge.ImportOptions{})
	wantCode(t, err, errs.CodeInvalidArgument, "file")
}

// TestImportClientTokensNeverClash: client tokens are 60-second
// idempotence keys, not knowledge: an export leaves them out and an import
// ignores them, so two exports of an org taken at different times import
// into one org even when an agent used the same token for two entries
// (the first purged in between), which the unique (org, agent, token) key
// refused before.
func TestImportClientTokensNeverClash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := uuid.New()
	first, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: "first", Body: "b", ClientToken: &tok})
	if err != nil {
		t.Fatal(err)
	}
	file1, _ := b.export(t, b.svc, b.org, false)
	if bytes.Contains(file1, []byte(tok.String())) || bytes.Contains(file1, []byte("clientToken")) {
		t.Fatalf("the export holds the client token:\n%s", file1)
	}
	if _, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Entry: first.ID}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.redis.Client.FlushDB(b.ctx).Err(); err != nil { // the 60 s key expired
		t.Fatal(err)
	}
	if _, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: "second", Body: "b", ClientToken: &tok}); err != nil {
		t.Fatal(err)
	}
	file2, _ := b.export(t, b.svc, b.org, false)
	// An older file that still carries the token imports all the same.
	withToken := bytes.Replace(file1, []byte(`"expiresAt":null,`), []byte(`"expiresAt":null,"clientToken":"`+tok.String()+`",`), 1)
	if bytes.Equal(withToken, file1) {
		t.Fatal("test file not rewritten")
	}
	target := b.mkOrg(t, "target")
	for _, f := range [][]byte{withToken, file2} {
		if _, err := b.ops.Operations().Import(b.ctx, target, opener(f), knowledge.ImportOptions{}); err != nil {
			t.Fatalf("import: %v", err)
		}
	}
	var n, tokens int
	if err := b.pool.QueryRow(b.ctx, "SELECT count(*), count(client_token) FROM knowledge WHERE org_id = $1", target).Scan(&n, &tokens); err != nil || n != 2 || tokens != 0 {
		t.Fatalf("target holds %d entries, %d tokens (%v)", n, tokens, err)
	}
}

// An import never brings a forgotten entry back: a file written before the
// forget is refused whole in that org (naming the file and the entry), and
// changes nothing; another org may import it.
func TestImportRefusesForgottenEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.store(t, b.alice, "kept", "still here")
	gone := b.store(t, b.alice, "leaked", "secret sk-live-123")
	file, _ := b.export(t, b.svc, b.org, false)
	if _, err := b.svc.Forget(b.ctx, b.alice, gone, "leaked secret", false); err != nil {
		t.Fatal(err)
	}
	before := b.entries(t)
	_, err := b.ops.Operations().Import(b.ctx, b.org, opener(file), knowledge.ImportOptions{})
	e := wantCode(t, err, errs.CodeInvalidArgument, "file")
	if !strings.Contains(e.Message, gone.String()) || !strings.Contains(e.Message, "forgotten") {
		t.Errorf("refusal: %v", e)
	}
	if got := b.entries(t); got != before {
		t.Fatalf("a refused import changed the entries: %d, was %d", got, before)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE id = $1", gone); n != 0 {
		t.Fatal("the forgotten entry is back")
	}
	target := b.mkOrg(t, "target")
	if _, err := b.ops.Operations().Import(b.ctx, target, opener(file), knowledge.ImportOptions{}); err != nil {
		t.Fatalf("import into another org: %v", err)
	}
}

// TestImportRefusesUnknownRelationTypes: a relation of a type the target
// org does not have (its relationType line removed) refuses the whole file.
func TestImportRefusesUnknownRelationTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.variedOrg(t)
	file, _ := b.export(t, b.svc, b.org, false)
	var kept []string
	for _, l := range strings.Split(string(file), "\n") {
		if !strings.Contains(l, `"kind":"relationType"`) {
			kept = append(kept, l)
		}
	}
	target := b.mkOrg(t, "target")
	_, err := b.ops.Operations().Import(b.ctx, target, opener([]byte(strings.Join(kept, "\n"))), knowledge.ImportOptions{})
	if e := wantCode(t, err, errs.CodeInvalidArgument, "file"); !strings.Contains(e.Message, "BLOCKS") {
		t.Fatalf("message: %s", e.Message)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1", target); n != 0 {
		t.Fatalf("%d entries imported from a refused file", n)
	}
}

// A file of format version 1 (before the entry fields) still imports: its
// entries' "source" was who made them, now their origin; they get no
// source, the default kind and no metadata.
func TestImportVersion1(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.store(t, b.alice, "old entry", "from an older export")
	file, _ := b.export(t, b.svc, b.org, false)
	v1 := bytes.Replace(file, fmt.Appendf(nil, `"version":%d`, knowledge.ExportVersion), []byte(`"version":1`), 1)
	v1 = bytes.ReplaceAll(v1, []byte(`"origin":"agent"`), []byte(`"source":"operator"`))
	v1 = bytes.ReplaceAll(v1, []byte(`,"entryKind":"semantic"`), nil)
	if bytes.Contains(v1, []byte("entryKind")) || !bytes.Contains(v1, []byte(`"source":"operator"`)) {
		t.Fatalf("not a version 1 file: %s", v1)
	}
	rep, err := b.ops.Operations().Import(b.ctx, b.other, opener(v1), knowledge.ImportOptions{})
	if err != nil || rep.Entries != 1 {
		t.Fatalf("import: %+v %v", rep, err)
	}
	var origin, kind, meta string
	var source *string
	if err := b.pool.QueryRow(b.ctx, "SELECT origin, source, kind, metadata::text FROM knowledge WHERE org_id = $1", b.other).
		Scan(&origin, &source, &kind, &meta); err != nil {
		t.Fatal(err)
	}
	if origin != knowledge.OriginOperator || source != nil || kind != knowledge.DefaultKind || meta != "{}" {
		t.Fatalf("imported: origin %q source %v kind %q metadata %s", origin, source, kind, meta)
	}
	// A bad field of a current file is refused, naming it.
	bad := bytes.Replace(file, []byte(`"entryKind":"semantic"`), []byte(`"entryKind":"gossip"`), 1)
	if _, err := b.ops.Operations().Import(b.ctx, b.mkOrg(t, "org-c"), opener(bad), knowledge.ImportOptions{}); err == nil || !strings.Contains(err.Error(), "entryKind") {
		t.Fatalf("a bad kind: %v", err)
	}
}
