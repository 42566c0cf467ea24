package documents_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/documents"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

// Concurrent appends of the same part (an agent's retries racing) store
// it once and all succeed.
func TestUploadConcurrentRepeats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.startUpload(t, b.svc, b.alice, 10)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			i := 0
			if _, err := b.svc.UploadAppend(b.ctx, b.alice, domain.UploadAppendInput{UploadID: id, Index: &i, Content: "0123456789"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_upload_parts WHERE upload_id = $1", id); n != 1 {
		t.Fatalf("%d parts staged, want 1", n)
	}
	if n := b.count(t, "SELECT received_bytes FROM knowledge_document_uploads WHERE id = $1", id); n != 10 {
		t.Fatalf("received %d bytes, want 10", n)
	}
}

// An upload is its agent's: another agent of the org, or an agent of
// another org, gets not_found as for an id that does not exist, and
// changes nothing.
func TestUploadBelongsToItsAgent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.startUpload(t, b.svc, b.alice, 20)
	zero := 0
	for name, c := range map[string]domain.Caller{"another agent": b.bob, "another org": b.eve} {
		_, err := b.svc.UploadAppend(b.ctx, c, domain.UploadAppendInput{UploadID: id, Index: &zero, Content: "stolen"})
		e := wantCode(t, err, errs.CodeNotFound, "uploadId")
		_, err = b.svc.UploadAppend(b.ctx, c, domain.UploadAppendInput{UploadID: uuid.New(), Index: &zero, Content: "stolen"})
		if e2 := wantCode(t, err, errs.CodeNotFound, "uploadId"); e2.Message != e.Message {
			t.Fatalf("%s: %q differs from an unknown id's %q", name, e.Message, e2.Message)
		}
		_, err = b.svc.UploadFinish(b.ctx, c, domain.UploadFinishInput{UploadID: id})
		wantCode(t, err, errs.CodeNotFound, "uploadId")
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_upload_parts"); n != 0 {
		t.Fatalf("%d parts staged by others", n)
	}
	b.appendPart(t, b.svc, b.alice, id, 0, "mine")
}

// The staging is in PostgreSQL: an upload started through one server
// (Documents) goes on through another one on the same database, as after a
// restart or on another replica.
func TestUploadSurvivesRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.svc
	id := b.startUpload(t, first, b.alice, 8)
	b.appendPart(t, first, b.alice, id, 0, "abcd")
	second := b.server(t, documents.Options{})
	r := b.appendPart(t, second, b.alice, id, 1, "efgh")
	if r.ReceivedBytes != 8 || r.NextIndex != 2 {
		t.Fatalf("the second server answered %+v", r)
	}
	r = b.appendPart(t, first, b.alice, id, 1, "efgh")
	if !r.Repeated {
		t.Fatalf("the first server does not see the second's part: %+v", r)
	}
}

// Size limits: a document over MaxUploadBytes is refused at the start
// naming the limit, a part over MaxUploadPartBytes at its append; the
// org's open uploads reserve their totalBytes against MaxStagedBytes (a
// start past it is refused naming the limit, other orgs are not held up),
// and an expired upload's reservation is free again.
func TestUploadLimits(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	b := setup(t, func(o *documents.Options) { o.Now = clock.now; o.MaxStagedBytes = 1000 })
	_, err := b.svc.UploadStart(b.ctx, b.alice, domain.UploadStartInput{Title: "Huge", TotalBytes: documents.MaxUploadBytes + 1})
	if e := wantCode(t, err, errs.CodeInvalidArgument, "totalBytes"); !strings.Contains(e.Message, "10485760") {
		t.Fatalf("refusal %q does not name the limit", e.Message)
	}
	_, err = b.svc.UploadStart(b.ctx, b.alice, domain.UploadStartInput{Title: "Empty", TotalBytes: 0})
	wantCode(t, err, errs.CodeInvalidArgument, "totalBytes")
	_, err = b.svc.UploadStart(b.ctx, b.alice, domain.UploadStartInput{Title: " ", TotalBytes: 10})
	wantCode(t, err, errs.CodeInvalidArgument, "title")

	big := b.startUpload(t, b.svc, b.alice, 600)
	zero := 0
	_, err = b.svc.UploadAppend(b.ctx, b.alice, domain.UploadAppendInput{UploadID: big, Index: &zero, Content: strings.Repeat("x", documents.MaxUploadPartBytes+1)})
	wantCode(t, err, errs.CodeInvalidArgument, "content")
	_, err = b.svc.UploadAppend(b.ctx, b.alice, domain.UploadAppendInput{UploadID: big, Index: &zero, Content: "a\x00b"})
	wantCode(t, err, errs.CodeInvalidArgument, "content")
	_, err = b.svc.UploadAppend(b.ctx, b.alice, domain.UploadAppendInput{UploadID: big, Content: "ab"})
	wantCode(t, err, errs.CodeInvalidArgument, "index")

	_, err = b.svc.UploadStart(b.ctx, b.bob, domain.UploadStartInput{Title: "Too much", TotalBytes: 401})
	if e := wantCode(t, err, errs.CodeQuotaExceeded, "totalBytes"); !strings.Contains(e.Message, "1000") || !e.Retryable {
		t.Fatalf("refusal %q does not name the limit (retryable %v)", e.Message, e.Retryable)
	}
	b.startUpload(t, b.svc, b.bob, 400)              // exactly up to the limit
	b.startUpload(t, b.svc, b.eve, 1000)             // another org's own limit
	clock.advance(documents.UploadTTL + time.Second) // every upload expires (not yet deleted)
	b.startUpload(t, b.svc, b.bob, 1000)             // their reservations are free
}

// Starts of one org racing for the last room of its staging limit: exactly
// as many pass as fit.
func TestUploadStagingLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *documents.Options) { o.MaxStagedBytes = 1000 })
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		c := b.alice
		if i%2 == 1 {
			c = b.bob
		}
		wg.Go(func() {
			_, err := b.svc.UploadStart(b.ctx, c, domain.UploadStartInput{Title: "Racing", TotalBytes: 300})
			switch errs.CodeOf(err) {
			case "":
				ok.Add(1)
			case errs.CodeQuotaExceeded:
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 3 || refused.Load() != 5 {
		t.Fatalf("%d starts passed and %d were refused, want 3 and 5", ok.Load(), refused.Load())
	}
}

// What a start is given is what the finish stores: source, kind and
// metadata (an integer read back as written), checked at the start by the
// rules of a document.
func TestUploadKeepsTheDocumentsFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.svc.UploadStart(b.ctx, b.alice, domain.UploadStartInput{Title: "Doc", TotalBytes: 5, Metadata: map[string]any{"Bad-Key": 1}})
	wantCode(t, err, errs.CodeInvalidArgument, "metadata.Bad-Key")
	_, err = b.svc.UploadStart(b.ctx, b.alice, domain.UploadStartInput{Title: "Doc", TotalBytes: 5, Kind: "gossip"})
	wantCode(t, err, errs.CodeInvalidArgument, "kind")
	r, err := b.svc.UploadStart(b.ctx, b.alice, domain.UploadStartInput{
		Title: "Doc", TotalBytes: 5, Source: "https://wiki/doc", Kind: domain.KindProcedural,
		Metadata: map[string]any{"team": "ops", "version": 9007199254740993},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.appendPart(t, b.svc, b.alice, r.UploadID, 0, "hello")
	res, err := b.svc.UploadFinish(b.ctx, b.alice, domain.UploadFinishInput{UploadID: r.UploadID})
	if err != nil {
		t.Fatal(err)
	}
	var kind, meta string
	if err := b.pool.QueryRow(b.ctx, "SELECT kind, metadata::text FROM knowledge WHERE id = $1", res.ID).Scan(&kind, &meta); err != nil {
		t.Fatal(err)
	}
	if res.Source != "https://wiki/doc" || kind != domain.KindProcedural || !strings.Contains(meta, "9007199254740993") || !strings.Contains(meta, `"team": "ops"`) {
		t.Fatalf("stored source %q, kind %q, metadata %s", res.Source, kind, meta)
	}
}
