package documents

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Documents too large for one store_document call arrive in parts
// (document_upload_start, _append, _finish; docs/knowledge.md, "Uploads in
// parts"). The parts are staged in PostgreSQL (migration 00032), not in a
// server's memory: an upload survives a restart of the MCP server and may
// be continued on another replica, and what an org stages is bounded like
// its other rows.
const (
	// UploadTTL is how long an upload lives after its start or its last
	// append; past it the upload is gone (not_found) and the worker
	// deletes it with its parts. A finished upload keeps its answer as
	// long after its finish.
	UploadTTL = 30 * time.Minute
	// MaxUploadPartBytes bounds one part (UTF-8 bytes of its content).
	MaxUploadPartBytes = 1 << 20
	// DefaultMaxStagedBytes is Config.MaxStagedBytes' default.
	DefaultMaxStagedBytes = 64 << 20
	// MaxStagedUploads bounds an org's open uploads (not finished, not
	// expired), whatever their sizes.
	MaxStagedUploads = 64
)

// uploadNotFound is the answer for an upload that is not the caller's, does
// not exist or has expired: the three are one to the caller.
func uploadNotFound() *errs.Error {
	return &errs.Error{Code: errs.CodeNotFound, Field: "uploadId",
		Message: "no upload of yours with this id (uploads expire " + UploadTTL.String() + " after their start or last append)"}
}

// UploadStart begins an upload of a document in parts for the caller.
// Everything the document will be stored with is checked now, so a finish
// does not fail on an argument given at the start. The org's open uploads
// reserve their totalBytes against Config.MaxStagedBytes: a start that
// would pass it is refused (quota_exceeded on totalBytes) and an append
// never is.
func (s *Documents) UploadStart(ctx context.Context, c domain.Caller, in domain.UploadStartInput) (_ *domain.UploadStartResult, err error) {
	defer data.WrapOp(&err, "knowledge.UploadStart")
	m, err := checkUploadStart(c, in)
	if err != nil {
		return nil, err
	}
	now := s.opts.Now()
	var res *domain.UploadStartResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		if err := q.LockOrgUploads(ctx, c.OrgID.String()); err != nil {
			return err
		}
		st, err := q.OrgStaging(ctx, sqlc.OrgStagingParams{OrgID: c.OrgID, Now: now})
		if err != nil {
			return err
		}
		if err := s.checkStaging(st, in.TotalBytes); err != nil {
			return err
		}
		row, err := q.InsertUpload(ctx, sqlc.InsertUploadParams{
			OrgID: c.OrgID, AgentID: c.AgentID, Title: in.Title, Source: m.source, Tags: m.tags,
			Kind: m.kind, Metadata: m.metadata, Format: m.format, TotalBytes: in.TotalBytes,
			Now: now, ExpiresAt: now.Add(UploadTTL),
		})
		if err != nil {
			return err
		}
		res = &domain.UploadStartResult{UploadID: row.ID, TotalBytes: in.TotalBytes, MaxPartBytes: MaxUploadPartBytes, ExpiresAt: row.ExpiresAt}
		return nil
	})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	return res, nil
}

// checkStaging refuses a start of total bytes when the org's open uploads
// (st) leave no room for it.
func (s *Documents) checkStaging(st sqlc.OrgStagingRow, total int64) error {
	limit := s.maxStagedBytes()
	if st.Uploads >= MaxStagedUploads {
		return &errs.Error{Code: errs.CodeQuotaExceeded, Field: "totalBytes", Retryable: true,
			Message: fmt.Sprintf("your org has %d open uploads, the most it may have (MaxStagedUploads); finish them or let them expire (%s after their last append)", st.Uploads, UploadTTL)}
	}
	if st.ReservedBytes+total > limit {
		return &errs.Error{Code: errs.CodeQuotaExceeded, Field: "totalBytes", Retryable: true,
			Message: fmt.Sprintf("your org's open uploads reserve %d bytes and this one would need %d more: past the org's staging limit of %d bytes (MaxStagedBytes); finish uploads or let them expire (%s after their last append)",
				st.ReservedBytes, total, limit, UploadTTL)}
	}
	return nil
}

func (s *Documents) maxStagedBytes() int64 {
	if s.opts.MaxStagedBytes > 0 {
		return s.opts.MaxStagedBytes
	}
	return DefaultMaxStagedBytes
}

// UploadAppend adds the part at in.Index to the caller's upload. Parts
// arrive in order: the next index expected is appended, an index already
// received with the same content is a no-op success (a retry; Repeated),
// with other content a conflict, and an index past the next one is refused
// naming the one expected. Each append pushes the upload's expiry to
// UploadTTL from now. Appends of one upload take turns (a row lock), so
// the order holds under concurrent retries.
func (s *Documents) UploadAppend(ctx context.Context, c domain.Caller, in domain.UploadAppendInput) (_ *domain.UploadAppendResult, err error) {
	defer data.WrapOp(&err, "knowledge.UploadAppend")
	if err := checkUploadAppend(c, in); err != nil {
		return nil, err
	}
	index := *in.Index
	digest := sha256.Sum256([]byte(in.Content))
	now := s.opts.Now()
	var res *domain.UploadAppendResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		u, err := q.LockUpload(ctx, sqlc.LockUploadParams{OrgID: c.OrgID, ID: in.UploadID, AgentID: c.AgentID, Now: now})
		if errors.Is(err, pgx.ErrNoRows) {
			return uploadNotFound()
		}
		if err != nil {
			return err
		}
		res = &domain.UploadAppendResult{UploadID: u.ID, Index: index, ReceivedBytes: u.ReceivedBytes, TotalBytes: u.TotalBytes,
			NextIndex: int(u.NextIndex), ExpiresAt: u.ExpiresAt}
		if u.FinishedAt != nil {
			return &errs.Error{Code: errs.CodeConflict, Field: "uploadId", Message: "this upload is finished; start a new upload for another document"}
		}
		switch {
		case index < int(u.NextIndex):
			return samePart(ctx, q, c.OrgID, u.ID, index, digest[:], res)
		case index > int(u.NextIndex):
			return errs.InvalidArgument("index", "must be %d, the next part of this upload (got %d): parts are appended in order, without gaps", u.NextIndex, index)
		}
		n := int64(len(in.Content))
		if u.ReceivedBytes+n > u.TotalBytes {
			return errs.InvalidArgument("content", "would bring the upload to %d bytes, more than its totalBytes of %d given at the start", u.ReceivedBytes+n, u.TotalBytes)
		}
		if err := q.InsertUploadPart(ctx, sqlc.InsertUploadPartParams{
			OrgID: c.OrgID, UploadID: u.ID, Index: int32(index), Content: in.Content, Bytes: int32(n), Digest: digest[:],
		}); err != nil {
			return err
		}
		adv, err := q.AdvanceUpload(ctx, sqlc.AdvanceUploadParams{OrgID: c.OrgID, ID: u.ID, Bytes: n, ExpiresAt: now.Add(UploadTTL)})
		if err != nil {
			return err
		}
		res.ReceivedBytes, res.NextIndex, res.ExpiresAt = adv.ReceivedBytes, int(adv.NextIndex), adv.ExpiresAt
		return nil
	})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	return res, nil
}

// samePart answers a repeated append of a part already received: a no-op
// success when its content is the same, a conflict when it is not.
func samePart(ctx context.Context, q *sqlc.Queries, org, upload uuid.UUID, index int, digest []byte, res *domain.UploadAppendResult) error {
	p, err := q.UploadPartDigest(ctx, sqlc.UploadPartDigestParams{OrgID: org, UploadID: upload, Index: int32(index)})
	if err != nil {
		return err
	}
	if !bytes.Equal(p.Digest, digest) {
		return &errs.Error{Code: errs.CodeConflict, Field: "content",
			Message: fmt.Sprintf("differs from part %d as received before; a part cannot be replaced (start a new upload to send other content)", index)}
	}
	res.Repeated = true
	return nil
}

// checkUploadAppend checks an append's arguments; it does no I/O.
func checkUploadAppend(c domain.Caller, in domain.UploadAppendInput) error {
	if err := domain.CheckCaller(c, true); err != nil {
		return err
	}
	if in.UploadID == uuid.Nil {
		return errs.InvalidArgument("uploadId", "is required")
	}
	if in.Index == nil {
		return errs.InvalidArgument("index", "is required: 0 for the first part, then 1, 2, ...")
	}
	if *in.Index < 0 {
		return errs.InvalidArgument("index", "must be 0 or more (got %d)", *in.Index)
	}
	switch {
	case in.Content == "":
		return errs.InvalidArgument("content", "must not be empty")
	case len(in.Content) > MaxUploadPartBytes:
		return errs.InvalidArgument("content", "must be at most %d bytes of UTF-8 (MaxUploadPartBytes; got %d): send it as several parts", MaxUploadPartBytes, len(in.Content))
	case !utf8.ValidString(in.Content) || strings.ContainsRune(in.Content, 0):
		return errs.InvalidArgument("content", "must be valid UTF-8 text without NUL bytes")
	}
	return nil
}

// uploadMeta is an upload's document arguments as they are stored.
type uploadMeta struct {
	source, kind *string
	tags         []string
	metadata     []byte
	format       string
}

// checkUploadStart checks a start's arguments by the rules a document is
// stored with (validateDocument's, which also rules on a content: here a
// stand-in, the parts are checked as they come), so that a finish is not
// refused for an argument given at the start; it does no I/O.
func checkUploadStart(c domain.Caller, in domain.UploadStartInput) (*uploadMeta, error) {
	doc := domain.DocumentInput{Title: in.Title, Content: "-", Source: in.Source, Tags: in.Tags, Kind: in.Kind, Metadata: in.Metadata, Format: in.Format}
	a, err := validateDocument(c, doc, MaxUploadBytes)
	if err != nil {
		return nil, err
	}
	if in.TotalBytes < 1 || in.TotalBytes > MaxUploadBytes {
		return nil, errs.InvalidArgument("totalBytes", "must be from 1 to %d bytes (MaxUploadBytes, 10 MiB: the largest document an upload stores; got %d)", MaxUploadBytes, in.TotalBytes)
	}
	m := &uploadMeta{tags: a.Tags, format: a.Format}
	if a.Source != "" {
		m.source = &a.Source
	}
	if a.Kind != "" {
		m.kind = &a.Kind
	}
	if len(a.Metadata) > 0 {
		m.metadata = a.Metadata // normalised by validateDocument
	}
	return m, nil
}
