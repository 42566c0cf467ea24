package tenancy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/tenancy/internal/sqlc"
)

// The audit trail: one record per MCP tool call or resource read (table
// audit_events, migration 00007). The MCP server writes the records in
// batches (apps/mcp/internal/server/audit.go), ctl audit reads an org's,
// the worker deletes those past the retention. A record holds who, what,
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
func (s *Service) QueryHasher(ctx context.Context) (*QueryHasher, error) {
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

// WriteAudit appends records in one COPY (one round trip, all or none).
func (s *Service) WriteAudit(ctx context.Context, events []AuditEvent) error {
	rows := make([]sqlc.InsertAuditEventsParams, len(events))
	for i, e := range events {
		ids := e.EntryIDs
		if ids == nil {
			ids = []uuid.UUID{}
		}
		rows[i] = sqlc.InsertAuditEventsParams{
			OrgID: e.OrgID, At: e.At, AgentID: e.AgentID, TokenID: e.TokenID,
			Kind: e.Kind, Name: e.Name, EntryIds: ids, Outcome: e.Outcome,
			DurationUs: max(e.DurationUs, 0), QueryLength: e.QueryLength, QueryHash: e.QueryHash,
		}
	}
	_, err := s.q().InsertAuditEvents(ctx, rows)
	return err
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

// Audit returns an org's records, newest first. An org that does not exist
// is ErrNotFound.
func (s *Service) Audit(ctx context.Context, orgID uuid.UUID, f AuditFilter) ([]AuditEvent, error) {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 1 || f.Limit > MaxAuditLimit {
		return nil, &ValidationError{Field: "limit", Rule: fmt.Sprintf("must be between 1 and %d", MaxAuditLimit)}
	}
	if f.Since != nil && f.Until != nil && !f.Until.After(*f.Since) {
		return nil, &ValidationError{Field: "until", Rule: "must be after since"}
	}
	if len(f.Name) > 64 {
		return nil, &ValidationError{Field: "tool", Rule: "at most 64 characters"}
	}
	if _, err := s.q().GetOrg(ctx, orgID); err != nil {
		return nil, mapErr(err, "org "+orgID.String())
	}
	var name *string
	if f.Name != "" {
		name = &f.Name
	}
	var rows []sqlc.AuditEvent
	var err error
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

// PruneAudit deletes the records older than before, of every org, in
// batches of batch rows (each its own statement, so a long backlog never
// holds one long transaction), until none is left or ctx ends. It returns
// how many it deleted.
func (s *Service) PruneAudit(ctx context.Context, before time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = 10_000
	}
	var total int64
	for {
		n, err := s.q().PruneAuditEvents(ctx, sqlc.PruneAuditEventsParams{Before: before, MaxRows: int32(batch)})
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(batch) {
			return total, nil
		}
	}
}

// QuotasTx is Quotas inside the caller's transaction, for an org known to
// exist (knowledge's Stats reads it in its snapshot).
func QuotasTx(ctx context.Context, db sqlc.DBTX, orgID uuid.UUID) ([]Quota, error) {
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

// RateLimitsTx is RateLimits inside the caller's transaction.
func RateLimitsTx(ctx context.Context, db sqlc.DBTX, orgID uuid.UUID) ([]RateLimit, error) {
	rows, err := sqlc.New(db).ListRateLimits(ctx, orgID)
	if err != nil {
		return nil, err
	}
	return toRateLimits(rows), nil
}
