package search

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/snippet"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Limits of List (list_knowledge).
const (
	DefaultListLimit = 20
	MaxListLimit     = 100
)

// The start and end of time for the listing's bounds (PostgreSQL
// timestamptz covers both).
var (
	listFirst = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	listLast  = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxUUID   = uuid.UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// List returns one page of the org's entries, newest first (ties by id).
// Paging is by position (keyset), not by offset: a page is an index range
// scan from the previous page's last entry, as fast at the 1,000th page as
// at the first, and entries stored meanwhile (newer than any page already
// served) neither shift nor repeat the pages after.
func (s *Searcher) List(ctx context.Context, c domain.Caller, in domain.ListInput) (_ *domain.ListResult, err error) {
	defer data.WrapOp(&err, "knowledge.List")
	limit, tags, f, err := checkList(c, in)
	if err != nil {
		return nil, err
	}
	filters := listFilters(tags, f, in)
	key, err := s.listKey(ctx)
	if err != nil {
		return nil, err
	}
	at, id, asOf, err := listPosition(key, c.OrgID, filters, in, s.opts.Now())
	if err != nil {
		return nil, err
	}
	p := sqlc.ListEntriesParams{
		SnippetChars: domain.SnippetChars + 1, // one more: snippet.Of then knows it cut
		OrgID:        c.OrgID, BeforeAt: at, BeforeID: id, CreatedAfter: listLast, Tags: tags,
		IncludeSuperseded: in.IncludeSuperseded, IncludeExpired: in.IncludeExpired, AsOf: asOf,
		MaxRows: int32(limit + 1), // one more: is there a next page?
		Kind:    f.Kind, Source: f.Source, SourcePrefix: f.SourcePrefix, Metadata: f.Metadata,
	}
	if f.SourcePrefix != nil {
		end := domain.PrefixEnd(*f.SourcePrefix)
		p.SourceEnd = &end
	}
	if in.CreatedAfter != nil {
		p.CreatedAfter = *in.CreatedAfter
	}
	if in.AuthorAgentID != nil {
		p.ByAuthor, p.AuthorID = true, *in.AuthorAgentID
	}
	if in.TaskID != nil {
		p.ByTask, p.TaskID = true, *in.TaskID
	}
	byIDs, ids, err := s.listMatches(ctx, c.OrgID, f, in.DocumentID)
	if err != nil {
		return nil, err
	}
	rows, err := listEntries(ctx, s.pool, p, byIDs, ids)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	seal := func(at time.Time, id uuid.UUID) string { return sealCursor(key, c.OrgID, filters, at, id) }
	out := listPage(rows, limit, seal)
	if dropped := domain.FitList(out, domain.ValueOr(in.MaxTokens, 0)); dropped > 0 {
		// The next page starts after the last hit given, not the last
		// read: the hits left out come first on it.
		last := out.Hits[len(out.Hits)-1]
		out.NextCursor = seal(last.CreatedAt, last.ID)
	}
	return out, nil
}

// checkList checks a listing's arguments and returns its limit and its
// tags, normalised.
func checkList(c domain.Caller, in domain.ListInput) (int, []string, domain.FilterArgs, error) {
	var f domain.FilterArgs
	if err := domain.CheckCaller(c, false); err != nil {
		return 0, nil, f, err
	}
	limit := domain.ValueOr(in.Limit, DefaultListLimit)
	if err := domain.CheckRange("limit", limit, 1, MaxListLimit); err != nil {
		return 0, nil, f, err
	}
	tags, err := domain.NormaliseTags(in.Tags)
	if err != nil {
		return 0, nil, f, err
	}
	if in.CreatedAfter != nil && in.CreatedBefore != nil && !in.CreatedAfter.Before(*in.CreatedBefore) {
		return 0, nil, f, errs.InvalidArgument("createdBefore", "must be after createdAfter")
	}
	if err := domain.CheckMaxTokens(in.MaxTokens); err != nil {
		return 0, nil, f, err
	}
	if f, err = domain.CheckFilters(in.Filters); err != nil {
		return 0, nil, f, err
	}
	return limit, tags, f, nil
}

// listMatchMax bounds the entries a listing reads by id (listMatches).
const listMatchMax = 1000

// listMatches decides how a page with a metadata or source prefix filter,
// or of a document's sections, is read: no index holds their matches in
// the page's order, and walking the org's entries newest first reads all
// of it when few match. So the matches are read first (filterMatches), up
// to listMatchMax: if there are no more, the page is read from them by id
// and sorted (byIDs). Beyond that the filter is common enough for the walk
// to fill a page soon, and it walks, testing each entry. An exact source
// or a kind walks its own index (queries/knowledge.sql, ListConfig).
func (s *Searcher) listMatches(ctx context.Context, org uuid.UUID, f domain.FilterArgs, doc *uuid.UUID) (bool, []uuid.UUID, error) {
	m, err := s.filterMatches(ctx, org, f, doc, listMatchMax, true)
	return m.ByIDs, m.Ids, err
}

// listEntries reads a page on pool: by a walk of the org's entries
// (ListEntries), or, byIDs, from the entries ids (ListEntriesByIds, the
// same filters and position), with the settings of each (ListConfig) in
// the same batch, hence the same implicit transaction (internal/pgbatch).
func listEntries(ctx context.Context, pool pgbatch.Sender, p sqlc.ListEntriesParams, byIDs bool, ids []uuid.UUID) ([]sqlc.ListEntriesRow, error) {
	q := sqlc.New(pgbatch.New(pool))
	if err := q.ListConfig(ctx, byIDs); err != nil {
		return nil, err
	}
	if !byIDs {
		return q.ListEntries(ctx, p)
	}
	rows, err := q.ListEntriesByIds(ctx, sqlc.ListEntriesByIdsParams{
		SnippetChars: p.SnippetChars, Ids: ids, OrgID: p.OrgID, BeforeAt: p.BeforeAt, BeforeID: p.BeforeID,
		CreatedAfter: p.CreatedAfter, Tags: p.Tags, ByAuthor: p.ByAuthor, AuthorID: p.AuthorID, ByTask: p.ByTask, TaskID: p.TaskID,
		IncludeSuperseded: p.IncludeSuperseded, AsOf: p.AsOf, IncludeExpired: p.IncludeExpired,
		Kind: p.Kind, Source: p.Source, SourcePrefix: p.SourcePrefix, Metadata: p.Metadata, MaxRows: p.MaxRows,
	})
	if err != nil {
		return nil, err
	}
	out := make([]sqlc.ListEntriesRow, len(rows))
	for i, r := range rows {
		out[i] = sqlc.ListEntriesRow(r)
	}
	return out, nil
}

// listPosition is where a page starts (strictly before at, id in the
// listing's order): after the cursor's entry, or the first entry, moved
// back to createdBefore and to asOf (checked against now) when they come
// earlier; and the listing's asOf.
func listPosition(key []byte, org uuid.UUID, filters [8]byte, in domain.ListInput, now time.Time) (time.Time, uuid.UUID, *time.Time, error) {
	at, id := listFirst, maxUUID
	if in.Cursor != "" {
		var err error
		if at, id, err = openCursor(key, org, filters, in.Cursor); err != nil {
			return at, id, nil, err
		}
	}
	if in.CreatedBefore != nil && in.CreatedBefore.Before(at) {
		// Strictly before: no entry's id sorts below the nil UUID.
		at, id = *in.CreatedBefore, uuid.Nil
	}
	asOf, err := domain.CheckAsOf(in.AsOf, now)
	if err != nil {
		return at, id, nil, err
	}
	if asOf != nil && !at.Before(*asOf) {
		// At or before asOf: every id sorts below the greatest UUID but
		// that one, which gen_random_uuid never makes.
		at, id = *asOf, maxUUID
	}
	return at, id, asOf, nil
}

// listPage is the first limit rows (of limit+1 read) as a page, with the
// cursor after its last entry when there are more.
func listPage(rows []sqlc.ListEntriesRow, limit int, seal func(time.Time, uuid.UUID) string) *domain.ListResult {
	out := &domain.ListResult{Hits: make([]domain.ListedEntry, 0, min(len(rows), limit))}
	for i, r := range rows {
		if i == limit {
			last := rows[limit-1]
			out.NextCursor = seal(last.CreatedAt, last.ID)
			break
		}
		out.Hits = append(out.Hits, domain.ListedEntry{
			ID: r.ID, Title: r.Title, Snippet: snippet.Of(r.BodyStart, ""), Tags: domain.NonNil(r.Tags),
			Confidence: int(r.Confidence), CreatedByAgentID: r.CreatedByAgentID, CreatedAt: r.CreatedAt,
			ExpiresAt: r.ExpiresAt, Superseded: r.HeadID != nil, HeadID: r.HeadID, EmbeddingStatus: r.EmbeddingStatus,
			Source: domain.StrOf(r.Source), Kind: r.Kind, Metadata: domain.DecodeMetadata(r.Metadata),
		})
	}
	return out
}

// listFilters is a digest of a listing's filters (everything but limit,
// cursor and maxTokens, which may change from page to page), sealed into
// its cursors: a cursor continues the listing it was made for, and with
// other filters it is refused rather than silently paging another listing
// from a position that means nothing there.
func listFilters(tags []string, f domain.FilterArgs, in domain.ListInput) [8]byte {
	h := sha256.New()
	sorted := slices.Clone(tags)
	slices.Sort(sorted)
	for _, t := range sorted {
		h.Write([]byte(t))
		h.Write([]byte{0})
	}
	h.Write([]byte{1})
	for _, id := range []*uuid.UUID{in.AuthorAgentID, in.TaskID} {
		if id != nil {
			h.Write(id[:])
		}
		h.Write([]byte{2})
	}
	for _, t := range []*time.Time{in.CreatedAfter, in.CreatedBefore, in.AsOf} {
		if t != nil {
			h.Write(binary.BigEndian.AppendUint64(nil, uint64(t.UnixMicro())))
		}
		h.Write([]byte{3})
	}
	h.Write([]byte{boolByte(in.IncludeSuperseded), boolByte(in.IncludeExpired)})
	for _, v := range []*string{f.Kind, f.Source, f.SourcePrefix} {
		if v != nil {
			h.Write([]byte(*v))
		}
		h.Write([]byte{0, 4})
	}
	h.Write(f.Metadata) // compact, keys sorted: the same filter, the same bytes
	if in.DocumentID != nil {
		h.Write([]byte{5})
		h.Write(in.DocumentID[:])
	}
	var d [8]byte
	copy(d[:], h.Sum(nil))
	return d
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// listKeyCache holds the cursor key, read once per Searcher.
type listKeyCache struct {
	mu  sync.Mutex
	key []byte
}

func (s *Searcher) listKey(ctx context.Context) ([]byte, error) {
	s.listKeys.mu.Lock()
	defer s.listKeys.mu.Unlock()
	if s.listKeys.key == nil {
		k, err := s.q.ListCursorKey(ctx)
		if err != nil {
			return nil, data.MapErr(err, "")
		}
		s.listKeys.key = k
	}
	return s.listKeys.key, nil
}

func sealCursor(key []byte, org uuid.UUID, filters [8]byte, at time.Time, id uuid.UUID) string {
	b := make([]byte, domain.CursorPayload, domain.CursorPayload+16)
	copy(b, org[:])
	binary.BigEndian.PutUint64(b[16:], uint64(at.UnixMicro()))
	copy(b[24:], id[:])
	copy(b[40:], filters[:])
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(append(b, m.Sum(nil)[:16]...))
}

func openCursor(key []byte, org uuid.UUID, filters [8]byte, cursor string) (time.Time, uuid.UUID, error) {
	bad := errs.InvalidArgument("cursor", "is not a cursor of this listing: pass nextCursor exactly as a previous list_knowledge answer of your organisation gave it, or omit it for the first page")
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) != domain.CursorPayload+16 {
		return time.Time{}, uuid.Nil, bad
	}
	m := hmac.New(sha256.New, key)
	m.Write(b[:domain.CursorPayload])
	if !hmac.Equal(m.Sum(nil)[:16], b[domain.CursorPayload:]) || uuid.UUID(b[:16]) != org {
		return time.Time{}, uuid.Nil, bad
	}
	if [8]byte(b[40:48]) != filters {
		return time.Time{}, uuid.Nil, errs.InvalidArgument("cursor", "was made for a listing with other filters: pass the same tags, authorAgentId, taskId, createdAfter, createdBefore, includeSuperseded, includeExpired and asOf as the call that gave it (limit and maxTokens may change), or omit cursor to start a new listing")
	}
	at := time.UnixMicro(int64(binary.BigEndian.Uint64(b[16:24]))).UTC()
	return at, uuid.UUID(b[24:40]), nil
}
