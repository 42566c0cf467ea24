package tenancy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy/internal/sqlc"
)

// The audit trail: one record per MCP tool call or resource read (table
// audit_events, migration 00007). The MCP server writes the records in
// batches (apps/mcp/internal/server/audit.go), ctl audit reads an org's,
// the retention drops the days past it (PruneAudit). A record holds who, what,
// which entries, how it ended and how long it took; never a secret, a
// title, a body or a query (a query is its length and QueryHash).

// Audit record kinds.
const (
	AuditTool     = "tool"
	AuditResource = "resource"
)

// DefaultAuditRetention is how long records are kept unless configured.
const DefaultAuditRetention = 90 * 24 * time.Hour

// MaxAuditLimit is the most records one Audit call returns.
const MaxAuditLimit = 10_000

// AuditEvent is one record.
type AuditEvent struct {
	ID         int64       `json:"id"`
	OrgID      uuid.UUID   `json:"orgId"`
	At         time.Time   `json:"at"`
	AgentID    *uuid.UUID  `json:"agentId"`
	TokenID    *uuid.UUID  `json:"tokenId"`
	Kind       string      `json:"kind"` // AuditTool or AuditResource
	Name       string      `json:"name"` // the tool, or the resource kind
	EntryIDs   []uuid.UUID `json:"entryIds"`
	Outcome    string      `json:"outcome"` // "ok" or an error code
	DurationUs int64       `json:"durationUs"`
	// QueryLength (characters) and QueryHash are set for calls with a
	// query argument (search_knowledge).
	QueryLength *int32   `json:"queryLength,omitempty"`
	QueryHash   HexBytes `json:"queryHash,omitempty"`
}

// HexBytes prints as hex in JSON.
type HexBytes []byte

// MarshalText implements encoding.TextMarshaler.
func (h HexBytes) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h)), nil }

// QueryHasher hashes queries for the audit trail: HMAC-SHA-256 with the
// database's key (audit_keys), cut to 16 bytes. The same query hashes the
// same on every replica and after restarts; without the key nobody can test
// a guess against a hash.
type QueryHasher struct{ key []byte }

// QueryHasher reads the key from the database.
func (s *Service) QueryHasher(ctx context.Context) (_ *QueryHasher, err error) {
	defer wrapOp(&err, "tenancy.QueryHasher")
	key, err := s.q().AuditKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	return &QueryHasher{key: key}, nil
}

// Hash returns q's keyed hash.
func (h *QueryHasher) Hash(q string) []byte {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(q))
	return m.Sum(nil)[:16]
}

// WriteAudit appends records in one transaction (all or none; on a Citus
// cluster with a router, one per worker: PartialWrite) and one round trip:
// a pipelined batch of INSERTs, the records of each org after
// setting the transaction's org, since the records of one batch come from
// the calls of several orgs and row-level security accepts a row only for
// the org set (db.Scoped.ExecForOrgs). (COPY, one statement for all, is
// not allowed into a table with row-level security.) A record that falls
// on a day without a partition (the first call after midnight beyond the days
// made ahead, a clock far off) makes the days it needs and is written
// again.
func (s *Service) WriteAudit(ctx context.Context, events []AuditEvent) (err error) {
	defer wrapOp(&err, "tenancy.WriteAudit")
	if len(events) == 0 {
		return nil
	}
	byOrg := map[uuid.UUID][]sqlc.InsertAuditEventParams{}
	var orgs []uuid.UUID
	days := map[time.Time]bool{}
	for _, e := range events {
		ids := e.EntryIDs
		if ids == nil {
			ids = []uuid.UUID{}
		}
		if _, ok := byOrg[e.OrgID]; !ok {
			orgs = append(orgs, e.OrgID)
		}
		byOrg[e.OrgID] = append(byOrg[e.OrgID], sqlc.InsertAuditEventParams{
			OrgID: e.OrgID, At: e.At, AgentID: e.AgentID, TokenID: e.TokenID,
			Kind: e.Kind, Name: e.Name, EntryIds: ids, Outcome: e.Outcome,
			DurationUs: max(e.DurationUs, 0), QueryLength: e.QueryLength, QueryHash: e.QueryHash,
		})
		days[e.At.UTC().Truncate(24*time.Hour)] = true
	}
	parts := make([]db.OrgBatch, len(orgs))
	for i, org := range orgs {
		b := &pgx.Batch{}
		q := sqlc.New(&queue{b})
		for _, r := range byOrg[org] {
			_ = q.InsertAuditEvent(ctx, r) // queued
		}
		parts[i] = db.OrgBatch{Org: org, Batch: b}
	}
	err = s.pool.ExecForOrgs(ctx, parts)
	if db.NoPartition(err) {
		for d := range days {
			if _, err := s.EnsureAuditDays(ctx, d, d); err != nil {
				return partial(events, parts, err)
			}
		}
		err = s.pool.ExecForOrgs(ctx, parts) // the parts not written yet
	}
	if err != nil {
		return partial(events, parts, err)
	}
	return nil
}

// PartialWrite is WriteAudit's error when it wrote some of the records
// and not the others (on a Citus cluster with a router, each worker's
// records go in a transaction of their own): Rest are the records not
// written, to write again, and only them.
type PartialWrite struct {
	Rest []AuditEvent
	Err  error
}

func (e *PartialWrite) Error() string {
	return fmt.Sprintf("%d audit records not written: %v", len(e.Rest), e.Err)
}

func (e *PartialWrite) Unwrap() error { return e.Err }

// partial is err, as a PartialWrite naming the events of the parts not
// written when some were.
func partial(events []AuditEvent, parts []db.OrgBatch, err error) error {
	done := map[uuid.UUID]bool{}
	for _, p := range parts {
		if p.Done {
			done[p.Org] = true
		}
	}
	if len(done) == 0 {
		return err
	}
	var rest []AuditEvent
	for _, e := range events {
		if !done[e.OrgID] {
			rest = append(rest, e)
		}
	}
	return &PartialWrite{Rest: rest, Err: err}
}

// queue is a DB that queues statements into a batch.
type queue struct{ b *pgx.Batch }

func (q *queue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (q *queue) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("tenancy: a queued batch cannot read")
}

func (q *queue) QueryRow(context.Context, string, ...any) pgx.Row {
	return db.ErrRow(errors.New("tenancy: a queued batch cannot read"))
}

// AuditDaysAhead is how many days past today EnsureAuditDays makes when
// called for today (the worker's upkeep, the MCP server at start).
const AuditDaysAhead = 7

// EnsureAuditDays makes the audit trail's day partitions (UTC) from from's
// day to to's day that are missing, and returns how many it made.
func (s *Service) EnsureAuditDays(ctx context.Context, from, to time.Time) (_ int, err error) {
	defer wrapOp(&err, "tenancy.EnsureAuditDays")
	n, err := s.q().EnsureAuditDays(ctx, sqlc.EnsureAuditDaysParams{FromAt: from, ToAt: to})
	if err != nil {
		return 0, fmt.Errorf("audit days: %w", err)
	}
	return int(n), nil
}

// AuditFilter selects an org's records; zero fields select everything.
type AuditFilter struct {
	AgentID *uuid.UUID
	EntryID *uuid.UUID
	Name    string     // a tool or resource kind
	Since   *time.Time // at or after
	Until   *time.Time // before
	Limit   int        // 1..MaxAuditLimit; 0: 100
}

// MaxAuditName is the longest tool or resource name a filter takes.
const MaxAuditName = 64

// Validate checks the filter's rules: Limit from 1 to MaxAuditLimit (Audit
// reads 0 as 100 before checking), Until after Since, and Name a name: at
// most MaxAuditName characters, no surrounding spaces. Audit checks them;
// a caller that builds a filter from its own input (ctl audit's flags)
// calls it first to refuse before doing anything.
func (f AuditFilter) Validate() error {
	if f.Limit < 1 || f.Limit > MaxAuditLimit {
		return errs.InvalidArgument("limit", "must be between 1 and %d", MaxAuditLimit)
	}
	if f.Since != nil && f.Until != nil && !f.Until.After(*f.Since) {
		return errs.InvalidArgument("until", "must be after since")
	}
	if len(f.Name) > MaxAuditName || strings.TrimSpace(f.Name) != f.Name {
		return errs.InvalidArgument("name", "%q is not a tool or resource name (at most %d characters, no surrounding spaces)", f.Name, MaxAuditName)
	}
	return nil
}

// Audit returns an org's records, newest first. An org that does not exist
// is not_found.
func (s *Service) Audit(ctx context.Context, orgID uuid.UUID, f AuditFilter) (_ []AuditEvent, err error) {
	defer wrapOp(&err, "tenancy.Audit")
	ctx = asOrg(ctx, orgID)
	if f.Limit == 0 {
		f.Limit = 100
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if _, err := s.q().GetOrg(ctx, orgID); err != nil {
		return nil, mapErr(err, "org "+orgID.String())
	}
	var name *string
	if f.Name != "" {
		name = &f.Name
	}
	var rows []sqlc.AuditEvent
	if f.EntryID != nil {
		rows, err = s.q().ListAuditEventsForEntry(ctx, sqlc.ListAuditEventsForEntryParams{
			OrgID: orgID, AgentID: f.AgentID, EntryID: *f.EntryID, Name: name, Since: f.Since, Until: f.Until, MaxRows: int32(f.Limit)})
	} else {
		rows, err = s.q().ListAuditEvents(ctx, sqlc.ListAuditEventsParams{
			OrgID: orgID, AgentID: f.AgentID, Name: name, Since: f.Since, Until: f.Until, MaxRows: int32(f.Limit)})
	}
	if err != nil {
		return nil, err
	}
	out := make([]AuditEvent, len(rows))
	for i, r := range rows {
		out[i] = AuditEvent{ID: r.ID, OrgID: r.OrgID, At: r.At, AgentID: r.AgentID, TokenID: r.TokenID,
			Kind: r.Kind, Name: r.Name, EntryIDs: r.EntryIds, Outcome: r.Outcome, DurationUs: r.DurationUs,
			QueryLength: r.QueryLength, QueryHash: r.QueryHash}
	}
	return out, nil
}

// PruneAudit is the retention: it drops the audit trail's days that ended
// at or before before, of every org, and returns how many records they
// held. A record is never deleted on its own: a day leaves whole, through
// audit_drop_partitions_before, which only the operator's role (and the
// schema's owner) may run.
func (s *Service) PruneAudit(ctx context.Context, before time.Time) (_ int64, err error) {
	defer wrapOp(&err, "tenancy.PruneAudit")
	n, err := s.q().DropAuditDaysBefore(ctx, before)
	if err != nil {
		return 0, fmt.Errorf("audit retention: %w", err)
	}
	return n, nil
}

// QuotasOn is Quotas read through db (the caller's transaction or
// snapshot), for an org known to exist (knowledge's Stats reads it in its
// snapshot).
func QuotasOn(ctx context.Context, db DB, orgID uuid.UUID) ([]Quota, error) {
	rows, err := sqlc.New(db).ListQuotas(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Quota, 0, 1)
	seen := false
	for _, q := range rows {
		out = append(out, Quota{Resource: q.Resource, Limit: q.LimitValue, Used: q.Used})
		seen = seen || q.Resource == ResourceKnowledgeStored
	}
	if !seen {
		out = append(out, Quota{Resource: ResourceKnowledgeStored})
	}
	return out, nil
}

// RateLimitsOn is RateLimits read through db (the caller's transaction or
// snapshot).
func RateLimitsOn(ctx context.Context, db DB, orgID uuid.UUID) ([]RateLimit, error) {
	rows, err := sqlc.New(db).ListRateLimits(ctx, orgID)
	if err != nil {
		return nil, err
	}
	return toRateLimits(rows), nil
}
