package tenancy

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
)

// Scopes of today's catalogue. knowledge:write_others is a future scope: it
// is not in the catalogue and cannot be issued.
const (
	ScopeKnowledgeRead  = "knowledge:read"
	ScopeKnowledgeWrite = "knowledge:write"
	// ScopeKnowledgeDelete forgets the entries the token's agent wrote.
	ScopeKnowledgeDelete = "knowledge:delete"
	// ScopeKnowledgeDeleteOthers forgets any entry of the org.
	ScopeKnowledgeDeleteOthers = "knowledge:delete_others"
)

// Catalogue lists every scope a token can carry today.
var Catalogue = []string{ScopeKnowledgeRead, ScopeKnowledgeWrite, ScopeKnowledgeDelete, ScopeKnowledgeDeleteOthers}

// Quota resources.
const ResourceKnowledgeStored = "knowledge_stored"

// Errors are *errs.Error values (packages/errs): invalid_argument naming
// the argument at fault, not_found for an org, agent or token that does not
// exist, conflict for a name already taken, quota_exceeded, and
// unauthenticated for a token that is missing, malformed, unknown, revoked
// or expired. Test them with errors.Is(err, errs.ErrNotFound) and friends.

// Principal is who a verified token speaks for.
type Principal struct {
	OrgID     uuid.UUID
	AgentID   uuid.UUID
	TokenID   uuid.UUID
	Scopes    []string
	ExpiresAt *time.Time
}

// HasScope reports whether the token carries scope.
func (p *Principal) HasScope(scope string) bool {
	for _, s := range p.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// Org, Agent, Token, Quota are the operator-facing records.
type Org struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

type Agent struct {
	ID        uuid.UUID `json:"id"`
	OrgID     uuid.UUID `json:"orgId"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// Token is a token's record; it never holds the token's text.
type Token struct {
	ID         uuid.UUID  `json:"id"`
	OrgID      uuid.UUID  `json:"orgId"`
	AgentID    uuid.UUID  `json:"agentId"`
	Scopes     []string   `json:"scopes"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
}

// IssuedToken is returned once, at creation: Token is the bearer secret.
type IssuedToken struct {
	ID    uuid.UUID `json:"id"`
	Token string    `json:"token"`
}

type Quota struct {
	Resource string `json:"resource"`
	Limit    *int64 `json:"limit"` // nil: unlimited
	Used     int64  `json:"used"`
}

type Task struct {
	ID        uuid.UUID `json:"id"`
	OrgID     uuid.UUID `json:"orgId"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"createdAt"`
}

// Service is the tenancy API. Safe for concurrent use.
type Service struct {
	// pool sends statements as the context's org (db.Scoped): every
	// method that acts for an org puts it in the context first.
	pool db.Scoped
}

// New returns a Service on pool.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: db.Scope(pool)} }

// WithRouter is s writing the audit trail's records, on a Citus cluster,
// in one transaction per node that r names for their orgs (each org's
// worker) instead of one transaction through the coordinator
// (db.Scoped.ExecForOrgs; WriteAudit then may write part of a batch:
// PartialWrite).
func (s *Service) WithRouter(r db.Router) *Service { return &Service{pool: s.pool.WithRouter(r)} }

// asOrg is the one place tenancy puts the org its call acts for into the
// context: each entry point calls it once, and every statement it sends
// through s.pool (db.Scoped) then runs as that org under row-level
// security.
func asOrg(ctx context.Context, org uuid.UUID) context.Context { return db.WithOrg(ctx, org) }
