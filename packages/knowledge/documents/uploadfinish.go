package documents

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// uploadContentSQL reads an upload's parts in order, one row each, for
// assemble to copy as they arrive.
//
//go:embed sql/upload_content.sql
var uploadContentSQL string

// UploadFinish stores the caller's complete upload as one document (as
// StoreDocument does, up to MaxUploadBytes) and answers as StoreDocument.
// The parts are joined in index order into one string, copied from each
// row as it is read, so the server holds the document once (plus a part),
// not the parts and the document. Then the upload keeps the answer and
// loses its parts: a second finish answers the same document (Replayed),
// until the upload expires (UploadTTL after the finish), unless the
// document has been erased since (forget, purge).
//
// The document's client token is in.ClientToken, or else the upload's id,
// so a finish retried after a failure between the store and the record of
// its answer replays the document instead of storing it twice.
func (s *Documents) UploadFinish(ctx context.Context, c domain.Caller, in domain.UploadFinishInput) (_ *domain.DocumentResult, err error) {
	defer data.WrapOp(&err, "knowledge.UploadFinish")
	if err := domain.CheckCaller(c, true); err != nil {
		return nil, err
	}
	if in.UploadID == uuid.Nil {
		return nil, errs.InvalidArgument("uploadId", "is required")
	}
	if in.ClientToken != nil && *in.ClientToken == uuid.Nil {
		return nil, errs.InvalidArgument("clientToken", "must be a non-nil UUID")
	}
	now := s.opts.Now()
	u, err := s.q.GetUpload(ctx, sqlc.GetUploadParams{OrgID: c.OrgID, ID: in.UploadID, AgentID: c.AgentID, Now: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, uploadNotFound()
	}
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	if u.FinishedAt != nil {
		return s.finishedUpload(ctx, c, u)
	}
	if u.ReceivedBytes != u.TotalBytes {
		return nil, errs.InvalidArgument("uploadId", "has received %d of its %d bytes: append the rest first (next index %d)", u.ReceivedBytes, u.TotalBytes, u.NextIndex)
	}
	doc := uploadDocument(u)
	if doc.Content, err = s.assemble(ctx, c.OrgID, u); errors.Is(err, errPartsGone) {
		return s.finishRaced(ctx, c, in.UploadID, err)
	}
	if err != nil {
		return nil, err
	}
	doc.ClientToken = in.ClientToken
	if doc.ClientToken == nil {
		doc.ClientToken = &u.ID
	}
	res, err := s.storeDocument(ctx, c, doc, MaxUploadBytes)
	if err != nil {
		return nil, err
	}
	if err := s.recordFinish(ctx, c.OrgID, u.ID, res); err != nil {
		// The document is stored: a retry replays it through its client
		// token. The parts stay until the upload expires.
		s.log().Warn("knowledge: recording an upload's finish failed; its parts stay until it expires", "org", c.OrgID, "upload", u.ID, "err", err)
	}
	return res, nil
}

// errPartsGone is assemble's answer when the parts it read are not the
// ones the upload counted.
var errPartsGone = errors.New("the parts read are not the parts counted")

// finishRaced answers a finish whose parts went between its read of the
// upload and its read of the parts (the two are separate statements): a
// purge deleted the upload, or another finish of it recorded its answer
// and deleted the parts. The upload, read again, says which: gone is
// not_found as for an unknown upload, finished is the answer of a finish
// of a finished upload. Only an upload still open with other parts than
// it counts is an internal error (cause, from assemble).
func (s *Documents) finishRaced(ctx context.Context, c domain.Caller, upload uuid.UUID, cause error) (*domain.DocumentResult, error) {
	u, err := s.q.GetUpload(ctx, sqlc.GetUploadParams{OrgID: c.OrgID, ID: upload, AgentID: c.AgentID, Now: s.opts.Now()})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, uploadNotFound()
	case err != nil:
		return nil, data.MapErr(err, "")
	case u.FinishedAt != nil:
		return s.finishedUpload(ctx, c, u)
	}
	return nil, cause
}

// assemble joins the upload's parts in index order. It checks that they
// are the parts the upload counted, so a document is never stored short:
// when they are not, it answers errPartsGone (wrapped).
func (s *Documents) assemble(ctx context.Context, org uuid.UUID, u sqlc.GetUploadRow) (string, error) {
	var b strings.Builder
	b.Grow(int(u.TotalBytes))
	rows, err := s.pool.Query(ctx, uploadContentSQL, org, u.ID)
	if err != nil {
		return "", data.MapErr(err, "")
	}
	defer rows.Close()
	parts := 0
	for rows.Next() {
		// The raw value is the text's UTF-8 bytes in pgx's read buffer:
		// copied once, into the document.
		b.Write(rows.RawValues()[0])
		parts++
	}
	if err := rows.Err(); err != nil {
		return "", data.MapErr(err, "")
	}
	if parts != int(u.NextIndex) || int64(b.Len()) != u.TotalBytes {
		return "", fmt.Errorf("upload %s: %d parts of %d bytes read, %d parts of %d bytes counted: %w", u.ID, parts, b.Len(), u.NextIndex, u.TotalBytes, errPartsGone)
	}
	return b.String(), nil
}

// recordFinish keeps a finished upload's answer and deletes its parts, in
// one transaction, while the document is share-locked: an erasure of the
// document (forget, purge) deletes the answer with it (package erasure),
// so the answer, which holds the document's title and heading paths, never
// outlives it. A document erased before this runs leaves no answer: the
// upload is deleted. A concurrent finish of the same upload that recorded
// first wins; this one changes nothing.
func (s *Documents) recordFinish(ctx context.Context, org, upload uuid.UUID, res *domain.DocumentResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	now := s.opts.Now()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		_, err := q.LockUploadDocument(ctx, sqlc.LockUploadDocumentParams{OrgID: org, ID: res.ID})
		if errors.Is(err, pgx.ErrNoRows) {
			_, err = q.DeleteUploads(ctx, sqlc.DeleteUploadsParams{OrgID: org, Ids: []uuid.UUID{upload}})
			return err
		}
		if err != nil {
			return err
		}
		n, err := q.FinishUpload(ctx, sqlc.FinishUploadParams{
			OrgID: org, ID: upload, DocumentID: &res.ID, Result: b, Now: now, ExpiresAt: now.Add(UploadTTL),
		})
		if err != nil || n == 0 {
			return err
		}
		_, err = q.DeleteUploadParts(ctx, sqlc.DeleteUploadPartsParams{OrgID: org, UploadID: upload})
		return err
	})
}

// finishedUpload answers a finish of an upload finished before: the first
// answer, replayed, if its document still exists.
func (s *Documents) finishedUpload(ctx context.Context, c domain.Caller, u sqlc.GetUploadRow) (*domain.DocumentResult, error) {
	if u.DocumentID != nil {
		ok, err := s.q.DocumentExists(ctx, sqlc.DocumentExistsParams{OrgID: c.OrgID, ID: *u.DocumentID})
		if err != nil {
			return nil, data.MapErr(err, "")
		}
		if !ok {
			return nil, &errs.Error{Code: errs.CodeNotFound, Field: "uploadId",
				Message: "this upload was finished, and the document it stored has since been erased"}
		}
	}
	var res domain.DocumentResult
	if err := json.Unmarshal(u.Result, &res); err != nil {
		return nil, fmt.Errorf("upload %s: its recorded answer: %w", u.ID, err)
	}
	res.Replayed = true
	return &res, nil
}

// uploadDocument is the document an upload stores, without its content.
func uploadDocument(u sqlc.GetUploadRow) domain.DocumentInput {
	doc := domain.DocumentInput{Title: u.Title, Tags: u.Tags, Format: u.Format}
	if u.Source != nil {
		doc.Source = *u.Source
	}
	if u.Kind != nil {
		doc.Kind = *u.Kind
	}
	doc.Metadata = domain.DecodeMetadata(u.Metadata) // numbers as written (json.Number)
	return doc
}
