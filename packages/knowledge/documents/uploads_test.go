package documents_test

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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

// A finish whose parts go between its read of the upload and its read of
// the parts answers as if it had come after: an upload purged meanwhile
// is not_found as an unknown one, an upload another finish recorded
// meanwhile answers that finish's document (Replayed). The race is made
// deterministic: the parts' table is locked while the finish reads the
// upload, the upload changes in the locking transaction, and the finish's
// read of the parts goes on after its commit.
func TestUploadFinishRacingAPurgeOrAnotherFinish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := func() uuid.UUID {
		id := b.startUpload(t, b.svc, b.alice, 8)
		b.appendPart(t, b.svc, b.alice, id, 0, "# Ab")
		b.appendPart(t, b.svc, b.alice, id, 1, "\n\ncd")
		return id
	}

	purged := start()
	_, err := b.finishWhile(t, purged, func(tx pgx.Tx) {
		// As a purge of the agent's uploads does.
		if _, err := tx.Exec(b.ctx, "DELETE FROM knowledge_document_uploads WHERE org_id = $1 AND agent_id = $2", b.org, b.alice.AgentID); err != nil {
			t.Error(err)
		}
	})
	_, unknown := b.svc.UploadFinish(b.ctx, b.alice, domain.UploadFinishInput{UploadID: uuid.New()})
	if e, e2 := wantCode(t, err, errs.CodeNotFound, "uploadId"), wantCode(t, unknown, errs.CodeNotFound, "uploadId"); e.Message != e2.Message {
		t.Fatalf("a finish racing a purge answered %q, an unknown upload %q", e.Message, e2.Message)
	}

	finished := start()
	first := b.storeDoc(t, b.alice, domain.DocumentInput{Title: "Handbook", Content: "# Ab\n\ncd"})
	res, err := b.finishWhile(t, finished, func(tx pgx.Tx) {
		// As the other finish's record of its answer does (recordFinish).
		answer, _ := json.Marshal(first)
		if _, err := tx.Exec(b.ctx, `UPDATE knowledge_document_uploads SET document_id = $3, result = $4, finished_at = now(), expires_at = now() + interval '30 minutes'
			WHERE org_id = $1 AND id = $2`, b.org, finished, first.ID, answer); err != nil {
			t.Error(err)
		}
		if _, err := tx.Exec(b.ctx, "DELETE FROM knowledge_document_upload_parts WHERE org_id = $1 AND upload_id = $2", b.org, finished); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatalf("a finish racing another finish: %v", err)
	}
	if res.ID != first.ID || !res.Replayed {
		t.Fatalf("a finish racing another finish answered document %s (replayed %v), want the other finish's %s, replayed", res.ID, res.Replayed, first.ID)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_documents"); n != 1 {
		t.Fatalf("%d documents stored, want the other finish's alone", n)
	}
}

// finishWhile finishes upload with the parts' table locked, and runs
// meanwhile (once the finish waits on the lock) in the locking
// transaction, which then commits.
func (b *bundle) finishWhile(t *testing.T, upload uuid.UUID, meanwhile func(pgx.Tx)) (*domain.DocumentResult, error) {
	t.Helper()
	tx, err := b.pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx) //nolint:errcheck // a no-op after the commit
	if _, err := tx.Exec(b.ctx, "LOCK TABLE knowledge_document_upload_parts IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res *domain.DocumentResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := b.svc.UploadFinish(b.ctx, b.alice, domain.UploadFinishInput{UploadID: upload})
		done <- answer{res, err}
	}()
	// The finish has read the upload and waits to read its parts.
	deadline := time.Now().Add(time.Minute)
	for b.count(t, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'knowledge_document_upload_parts'::regclass
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 0 {
		select {
		case a := <-done:
			t.Fatalf("the finish did not wait on the parts: it answered %+v, %v", a.res, a.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the finish did not come to read the parts within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	meanwhile(tx)
	if err := tx.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		return a.res, a.err
	case <-time.After(time.Minute):
		t.Fatal("the finish did not answer within a minute of the commit")
		return nil, nil
	}
}
