package knowledge_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// testClock is a service clock a test moves by hand.
type testClock struct{ t atomic.Pointer[time.Time] }

func newTestClock() *testClock {
	c := &testClock{}
	c.set(time.Now())
	return c
}
func (c *testClock) now() time.Time          { return *c.t.Load() }
func (c *testClock) set(t time.Time)         { c.t.Store(&t) }
func (c *testClock) advance(d time.Duration) { c.set(c.now().Add(d)) }

func (b *bundle) startUpload(t *testing.T, svc *knowledge.Service, c knowledge.Caller, total int) uuid.UUID {
	t.Helper()
	r, err := svc.UploadStart(b.ctx, c, knowledge.UploadStartInput{Title: "Handbook", TotalBytes: int64(total)})
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxPartBytes != knowledge.MaxUploadPartBytes || r.TotalBytes != int64(total) {
		t.Fatalf("start answered %+v", r)
	}
	return r.UploadID
}

func (b *bundle) appendPart(t *testing.T, svc *knowledge.Service, c knowledge.Caller, id uuid.UUID, index int, content string) *knowledge.UploadAppendResult {
	t.Helper()
	r, err := svc.UploadAppend(b.ctx, c, knowledge.UploadAppendInput{UploadID: id, Index: &index, Content: content})
	if err != nil {
		t.Fatalf("append %d: %v", index, err)
	}
	return r
}

// Parts are appended in order: the next index is taken, a repeat of a
// received index with the same content changes nothing, with other content
// is a conflict, a gap is refused naming the index expected, and nothing
// past totalBytes is taken.
func TestUploadAppendsInOrderIdempotently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p0, p1 := "# Handbook\n\nFirst part. ", "Second part: ünïcode too.\n"
	id := b.startUpload(t, b.svc, b.alice, len(p0)+len(p1))

	r := b.appendPart(t, b.svc, b.alice, id, 0, p0)
	if r.NextIndex != 1 || r.ReceivedBytes != int64(len(p0)) || r.Repeated {
		t.Fatalf("first append answered %+v", r)
	}
	r = b.appendPart(t, b.svc, b.alice, id, 0, p0)
	if !r.Repeated || r.NextIndex != 1 || r.ReceivedBytes != int64(len(p0)) {
		t.Fatalf("repeated append answered %+v", r)
	}
	two := 2
	_, err := b.svc.UploadAppend(b.ctx, b.alice, knowledge.UploadAppendInput{UploadID: id, Index: &two, Content: p1})
	if e := wantCode(t, err, errs.CodeInvalidArgument, "index"); !strings.Contains(e.Message, "must be 1") {
		t.Fatalf("a gap is refused with %q, want the index expected named", e.Message)
	}
	zero := 0
	_, err = b.svc.UploadAppend(b.ctx, b.alice, knowledge.UploadAppendInput{UploadID: id, Index: &zero, Content: "other"})
	wantCode(t, err, errs.CodeConflict, "content")
	one := 1
	_, err = b.svc.UploadAppend(b.ctx, b.alice, knowledge.UploadAppendInput{UploadID: id, Index: &one, Content: p1 + "x"})
	if e := wantCode(t, err, errs.CodeInvalidArgument, "content"); !strings.Contains(e.Message, "totalBytes") {
		t.Fatalf("bytes past totalBytes refused with %q", e.Message)
	}
	r = b.appendPart(t, b.svc, b.alice, id, 1, p1)
	if r.NextIndex != 2 || r.ReceivedBytes != r.TotalBytes {
		t.Fatalf("last append answered %+v", r)
	}
	var got string
	if err := b.pool.QueryRow(b.ctx, "SELECT string_agg(content, '' ORDER BY index) FROM knowledge_document_upload_parts WHERE upload_id = $1", id).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != p0+p1 {
		t.Fatalf("staged %q, want %q", got, p0+p1)
	}
	st, err := b.svc.Operations().Stats(b.ctx, b.org, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Uploads.Open != 1 || st.Uploads.StagedBytes != int64(len(p0+p1)) {
		t.Fatalf("stats count %+v, want 1 upload of %d bytes", st.Uploads, len(p0+p1))
	}
}

// An upload expires UploadTTL after its start or its last append: then it
// is not found, and the worker's pass deletes it with its parts, leaving
// the uploads that have not expired.
func TestUploadExpires(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	b := setup(t, func(o *knowledge.Options) { o.Now = clock.now })
	id := b.startUpload(t, b.svc, b.alice, 8)
	clock.advance(knowledge.UploadTTL - time.Minute)
	r := b.appendPart(t, b.svc, b.alice, id, 0, "abcd")
	if want := clock.now().Add(knowledge.UploadTTL); r.ExpiresAt.Sub(want).Abs() > time.Millisecond {
		t.Fatalf("expires at %v, want %v (UploadTTL after the append)", r.ExpiresAt, want)
	}
	clock.advance(knowledge.UploadTTL - time.Minute) // past the start's expiry, not the append's
	b.appendPart(t, b.svc, b.alice, id, 1, "ef")
	other := b.startUpload(t, b.svc, b.eve, 5)
	b.appendPart(t, b.svc, b.eve, other, 0, "12")

	clock.advance(knowledge.UploadTTL + time.Second) // alice's upload expires, eve's too
	two := 2
	_, err := b.svc.UploadAppend(b.ctx, b.alice, knowledge.UploadAppendInput{UploadID: id, Index: &two, Content: "gh"})
	wantCode(t, err, errs.CodeNotFound, "uploadId")
	fresh := b.startUpload(t, b.svc, b.bob, 4)
	b.appendPart(t, b.svc, b.bob, fresh, 0, "keep")

	n, err := maint(b.ops).DeleteExpiredUploads(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("the expiry pass deleted %d uploads, want 2", n)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_uploads"); n != 1 {
		t.Fatalf("%d uploads left, want bob's", n)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_upload_parts WHERE upload_id <> $1", fresh); n != 0 {
		t.Fatalf("%d parts of expired uploads left", n)
	}
	b.appendPart(t, b.svc, b.bob, fresh, 0, "keep") // still there, a repeat
}

// A purge erases the uploads in its scope with their staged parts: an
// agent's, or the org's; a dry run counts them.
func TestPurgeErasesUploads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.startUpload(t, b.svc, b.alice, 10)
	b.appendPart(t, b.svc, b.alice, a, 0, "alice")
	bb := b.startUpload(t, b.svc, b.bob, 10)
	b.appendPart(t, b.svc, b.bob, bb, 0, "bob")
	e := b.startUpload(t, b.svc, b.eve, 10)

	rep, err := b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.alice.AgentID}, true)
	if err != nil || rep.Uploads != 1 {
		t.Fatalf("dry run: %+v, %v", rep, err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_uploads"); n != 3 {
		t.Fatalf("a dry run deleted uploads: %d left", n)
	}
	if rep, err = b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{Agent: b.alice.AgentID}, false); err != nil || rep.Uploads != 1 {
		t.Fatalf("purge of alice: %+v, %v", rep, err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_upload_parts WHERE upload_id = $1", a); n != 0 {
		t.Fatalf("%d parts of a purged upload left", n)
	}
	if rep, err = b.ops.Operations().Purge(b.ctx, b.org, knowledge.PurgeScope{All: true}, false); err != nil || rep.Uploads != 1 {
		t.Fatalf("purge of the org: %+v, %v", rep, err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_uploads WHERE id = ANY($1)", []uuid.UUID{a, bb}); n != 0 {
		t.Fatalf("%d purged uploads left", n)
	}
	b.appendPart(t, b.svc, b.eve, e, 0, "eve") // another org's upload is untouched
}

// A finished upload is stored as one document, exactly its parts joined:
// the sections' bodies join back to the content. The parts go, a second
// finish answers the same document (replayed), and once the document is
// forgotten the upload is gone with it.
func TestUploadFinishStoresTheDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var doc strings.Builder
	for i := range 40 {
		fmt.Fprintf(&doc, "## Step %d\n\n%s\n\n", i, strings.Repeat(fmt.Sprintf("Restart worker %d, then watch the gauge. ", i), 30))
	}
	content := doc.String()
	r, err := b.svc.UploadStart(b.ctx, b.alice, knowledge.UploadStartInput{
		Title: "Runbook", Source: "wiki/runbook", Tags: []string{"Ops"}, TotalBytes: int64(len(content)),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.UploadFinish(b.ctx, b.alice, knowledge.UploadFinishInput{UploadID: r.UploadID})
	if e := wantCode(t, err, errs.CodeInvalidArgument, "uploadId"); !strings.Contains(e.Message, "next index 0") {
		t.Fatalf("an empty upload finished: %v", e)
	}
	const part = 5000
	for i := 0; i*part < len(content); i++ {
		b.appendPart(t, b.svc, b.alice, r.UploadID, i, content[i*part:min((i+1)*part, len(content))])
	}
	// Finished through another server: the staging is the database's.
	other := knowledge.New(b.db.AppPool(t), knowledge.Options{})
	res, err := other.UploadFinish(b.ctx, b.alice, knowledge.UploadFinishInput{UploadID: r.UploadID})
	if err != nil {
		t.Fatal(err)
	}
	if res.Title != "Runbook" || res.Source != "wiki/runbook" || len(res.Sections) < 40 || res.Replayed {
		t.Fatalf("finish answered %+v", res)
	}
	var joined string
	if err := b.pool.QueryRow(b.ctx, `SELECT string_agg(k.body, '' ORDER BY s.position) FROM knowledge_sections s
		JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.id WHERE s.document_id = $1`, res.ID).Scan(&joined); err != nil {
		t.Fatal(err)
	}
	if joined != content {
		t.Fatalf("the sections hold %d bytes, not the %d uploaded", len(joined), len(content))
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_upload_parts"); n != 0 {
		t.Fatalf("%d parts left after the finish", n)
	}
	again, err := b.svc.UploadFinish(b.ctx, b.alice, knowledge.UploadFinishInput{UploadID: r.UploadID})
	if err != nil || !again.Replayed || again.ID != res.ID || len(again.Sections) != len(res.Sections) {
		t.Fatalf("finish again: %+v, %v", again, err)
	}
	zero := 0
	_, err = b.svc.UploadAppend(b.ctx, b.alice, knowledge.UploadAppendInput{UploadID: r.UploadID, Index: &zero, Content: "more"})
	wantCode(t, err, errs.CodeConflict, "uploadId")

	if _, err := b.svc.Forget(b.ctx, b.alice, res.ID, "wrong runbook", false); err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.UploadFinish(b.ctx, b.alice, knowledge.UploadFinishInput{UploadID: r.UploadID})
	wantCode(t, err, errs.CodeNotFound, "uploadId")
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_uploads"); n != 0 {
		t.Fatalf("the upload of a forgotten document is kept (%d rows)", n)
	}
}
