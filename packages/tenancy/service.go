package tenancy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy/internal/sqlc"
)

func (s *Service) q() *sqlc.Queries { return sqlc.New(s.pool) }

// errWording is how tenancy words the database's refusals; what its
// callers name is the row looked up or written ("org <id>"). A database
// that cannot serve the call now is unavailable (retryable), as in every
// domain (db.Unavailable).
var errWording = db.Wording{
	NoRows: func(what string) *errs.Error {
		return &errs.Error{Code: errs.CodeNotFound, Message: what + ": not found"}
	},
	Duplicate: func(r db.Refusal) *errs.Error {
		return &errs.Error{Code: errs.CodeConflict, Message: r.What + ": already exists"}
	},
	Missing: func(r db.Refusal) *errs.Error {
		return &errs.Error{Code: errs.CodeNotFound, Message: r.What + ": not found"}
	},
}

// mapErr turns driver errors into the vocabulary's (errWording); what names
// the row looked up or written ("org <id>"). Others pass through, and the
// service boundary (wrapOp) makes them internal.
func mapErr(err error, what string) error { return errWording.Map(err, what) }

// wrapOp is deferred by every exported method of Service: a database that
// cannot serve the call now, met where no mapErr looked, is unavailable
// (db.Unavailable); then the operation is recorded (errs.Wrap), and an
// error the vocabulary does not know becomes internal.
func wrapOp(errp *error, op string) {
	if *errp != nil {
		*errp = db.Unavailable(*errp)
		errs.Wrap(errp, op)
	}
}

// Limits of tenancy's names, in Unicode characters: the longest name or
// title a call takes, checked before the database's CHECK of the same
// length (00001_init.sql; TestSchemaChecksMatchTheLimits pins the two
// together), so an over-long one is refused naming its field.
const (
	// MaxOrgNameChars is the longest org name.
	MaxOrgNameChars = 200
	// MaxAgentNameChars is the longest agent name, an OAuth token's agent
	// claim's included (AgentByName).
	MaxAgentNameChars = 200
	// MaxTaskTitleChars is the longest task title.
	MaxTaskTitleChars = 500
)

// checkName refuses a name or title that is not text, blank, or longer
// than max characters.
func checkName(field, v string, max int) error {
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return errs.InvalidArgument(field, "must be valid UTF-8 text without NUL bytes")
	}
	if strings.TrimSpace(v) == "" {
		return errs.InvalidArgument(field, "is required")
	}
	if n := utf8.RuneCountInString(v); n > max {
		return errs.InvalidArgument(field, "must be at most %d characters (got %d)", max, n)
	}
	return nil
}

// CreateOrg creates an org; names are unique.
func (s *Service) CreateOrg(ctx context.Context, name string) (_ *Org, err error) {
	defer wrapOp(&err, "tenancy.CreateOrg")
	if err := checkName("name", name, MaxOrgNameChars); err != nil {
		return nil, err
	}
	o, err := s.q().CreateOrg(ctx, name)
	if err != nil {
		return nil, mapErr(err, "org "+name)
	}
	return &Org{ID: o.ID, Name: o.Name, CreatedAt: o.CreatedAt}, nil
}

// ListOrgs lists every org.
func (s *Service) ListOrgs(ctx context.Context) (_ []Org, err error) {
	defer wrapOp(&err, "tenancy.ListOrgs")
	rows, err := s.q().ListOrgs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Org, 0, len(rows))
	for _, o := range rows {
		out = append(out, Org{ID: o.ID, Name: o.Name, CreatedAt: o.CreatedAt})
	}
	return out, nil
}

// CreateAgent creates an agent in an org; names are unique per org.
func (s *Service) CreateAgent(ctx context.Context, orgID uuid.UUID, name string) (_ *Agent, err error) {
	defer wrapOp(&err, "tenancy.CreateAgent")
	ctx = asOrg(ctx, orgID)
	if err := checkName("name", name, MaxAgentNameChars); err != nil {
		return nil, err
	}
	a, err := s.q().CreateAgent(ctx, sqlc.CreateAgentParams{OrgID: orgID, Name: name})
	if err != nil {
		return nil, mapErr(err, "agent "+name)
	}
	return &Agent{ID: a.ID, OrgID: a.OrgID, Name: a.Name, CreatedAt: a.CreatedAt}, nil
}

// ListAgents lists the agents of an org.
func (s *Service) ListAgents(ctx context.Context, orgID uuid.UUID) (_ []Agent, err error) {
	defer wrapOp(&err, "tenancy.ListAgents")
	ctx = asOrg(ctx, orgID)
	if _, err := s.q().GetOrg(ctx, orgID); err != nil {
		return nil, mapErr(err, "org "+orgID.String())
	}
	rows, err := s.q().ListAgents(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Agent, 0, len(rows))
	for _, a := range rows {
		out = append(out, Agent{ID: a.ID, OrgID: a.OrgID, Name: a.Name, CreatedAt: a.CreatedAt})
	}
	return out, nil
}

// ParseScopes splits a comma-separated scope list and checks every scope is
// in today's catalogue.
func ParseScopes(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(Catalogue, s) {
			return nil, errs.InvalidArgument("scopes", "%q is not a known scope (known: %s)", s, strings.Join(Catalogue, ", "))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errs.InvalidArgument("scopes", "at least one scope is required (known: %s)", strings.Join(Catalogue, ", "))
	}
	// delete_others widens delete (whose tool it unlocks); alone it would
	// be a token that can forget nothing.
	if slices.Contains(out, ScopeKnowledgeDeleteOthers) && !slices.Contains(out, ScopeKnowledgeDelete) {
		return nil, errs.InvalidArgument("scopes", "%s widens %s: give both", ScopeKnowledgeDeleteOthers, ScopeKnowledgeDelete)
	}
	return out, nil
}

// IssueToken creates a token for an agent. The token's text is returned once;
// only a hash of its secret is stored. ttl 0 means no expiry.
func (s *Service) IssueToken(ctx context.Context, orgID, agentID uuid.UUID, scopes []string, ttl time.Duration) (_ *IssuedToken, err error) {
	defer wrapOp(&err, "tenancy.IssueToken")
	ctx = asOrg(ctx, orgID)
	scopes, err = ParseScopes(strings.Join(scopes, ","))
	if err != nil {
		return nil, err
	}
	if ttl < 0 {
		return nil, errs.InvalidArgument("ttl", "must not be negative")
	}
	if _, err := s.q().GetAgent(ctx, sqlc.GetAgentParams{OrgID: orgID, ID: agentID}); err != nil {
		return nil, mapErr(err, "agent "+agentID.String()+" in org "+orgID.String())
	}
	tok, err := newToken(orgID)
	if err != nil {
		return nil, err
	}
	var expires *time.Time
	if ttl > 0 {
		e := time.Now().Add(ttl).UTC()
		expires = &e
	}
	_, err = s.q().CreateToken(ctx, sqlc.CreateTokenParams{
		OrgID: orgID, ID: tok.id, AgentID: agentID, SecretHash: tok.hash(), Scopes: scopes, ExpiresAt: expires,
	})
	if err != nil {
		return nil, mapErr(err, "token")
	}
	return &IssuedToken{ID: tok.id, Token: tok.String()}, nil
}

func toToken(t sqlc.AgentToken) Token {
	return Token{ID: t.ID, OrgID: t.OrgID, AgentID: t.AgentID, Scopes: t.Scopes, ExpiresAt: t.ExpiresAt,
		RevokedAt: t.RevokedAt, LastUsedAt: t.LastUsedAt, CreatedAt: t.CreatedAt}
}

// ListTokens lists an org's tokens, never their text.
func (s *Service) ListTokens(ctx context.Context, orgID uuid.UUID) (_ []Token, err error) {
	defer wrapOp(&err, "tenancy.ListTokens")
	ctx = asOrg(ctx, orgID)
	if _, err := s.q().GetOrg(ctx, orgID); err != nil {
		return nil, mapErr(err, "org "+orgID.String())
	}
	rows, err := s.q().ListTokens(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Token, 0, len(rows))
	for _, t := range rows {
		out = append(out, toToken(t))
	}
	return out, nil
}

// RevokeToken revokes a token by id (optionally checked against an org). It
// is idempotent: revoking twice keeps the first time. In the same
// transaction it names the token on RevocationChannel.
func (s *Service) RevokeToken(ctx context.Context, orgID *uuid.UUID, id uuid.UUID) (_ *Token, err error) {
	defer wrapOp(&err, "tenancy.RevokeToken")
	if orgID != nil {
		ctx = asOrg(ctx, *orgID)
	}
	var t sqlc.AgentToken
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		var err error
		if t, err = q.RevokeToken(ctx, sqlc.RevokeTokenParams{ID: id, OrgID: orgID}); err != nil {
			return err
		}
		return q.NotifyTokensRevoked(ctx, revocation(t.OrgID, &t.ID))
	})
	if err != nil {
		return nil, mapErr(err, "token "+id.String())
	}
	out := toToken(t)
	return &out, nil
}

// VerifyToken checks a bearer token and returns who it speaks for. Every
// failure is unauthenticated. A malformed or unknown token or a wrong secret
// says nothing more, so nothing tells a guesser whether a token exists; a
// revoked or expired token whose secret verified carries a TokenRefusal
// that says so, for its holder.
func (s *Service) VerifyToken(ctx context.Context, raw string) (_ *Principal, err error) {
	defer wrapOp(&err, "tenancy.VerifyToken")
	tok, err := parseToken(raw)
	if err != nil {
		return nil, err
	}
	ctx = asOrg(ctx, tok.org)
	row, err := s.q().GetToken(ctx, sqlc.GetTokenParams{OrgID: tok.org, ID: tok.id})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, unauthenticated("unknown token")
	}
	if err != nil {
		return nil, err
	}
	if !tok.matches(row.SecretHash) {
		return nil, unauthenticated("wrong secret")
	}
	// From here the token is genuine: its holder may learn why it is refused.
	if row.RevokedAt != nil {
		return nil, RefuseToken(RefusedRevoked, "the bearer token was revoked at "+row.RevokedAt.UTC().Format(time.RFC3339)+"; a new token is needed (an operator issues one: ctl token create)")
	}
	if row.ExpiresAt != nil && !time.Now().Before(*row.ExpiresAt) {
		return nil, TokenExpired(*row.ExpiresAt)
	}
	// last_used_at is advisory: a failure to record it must not refuse the call.
	_ = s.q().TouchToken(ctx, sqlc.TouchTokenParams{OrgID: tok.org, ID: tok.id})
	return &Principal{OrgID: row.OrgID, AgentID: row.AgentID, TokenID: row.ID, Scopes: row.Scopes, ExpiresAt: row.ExpiresAt}, nil
}

// SetQuota sets (or, with nil, lifts) an org's limit on a resource.
func (s *Service) SetQuota(ctx context.Context, orgID uuid.UUID, resource string, limit *int64) (_ *Quota, err error) {
	defer wrapOp(&err, "tenancy.SetQuota")
	ctx = asOrg(ctx, orgID)
	if resource != ResourceKnowledgeStored {
		return nil, errs.InvalidArgument("resource", "%q is not a known quota (known: %s)", resource, ResourceKnowledgeStored)
	}
	if limit != nil && *limit < 0 {
		return nil, errs.InvalidArgument("limit", "must be 0 or more")
	}
	q, err := s.q().SetQuota(ctx, sqlc.SetQuotaParams{OrgID: orgID, Resource: resource, LimitValue: limit})
	if err != nil {
		return nil, mapErr(err, "org "+orgID.String())
	}
	return &Quota{Resource: q.Resource, Limit: q.LimitValue, Used: q.Used}, nil
}

// Quotas lists an org's quotas. A resource without a row is unlimited and
// unused, and is listed as such.
func (s *Service) Quotas(ctx context.Context, orgID uuid.UUID) (_ []Quota, err error) {
	defer wrapOp(&err, "tenancy.Quotas")
	ctx = asOrg(ctx, orgID)
	if _, err := s.q().GetOrg(ctx, orgID); err != nil {
		return nil, mapErr(err, "org "+orgID.String())
	}
	return QuotasOn(ctx, s.pool, orgID)
}

// ConsumeQuota takes one unit of resource for orgID inside tx, so the unit is
// only spent if tx commits. It returns a quota_exceeded error when the limit is
// reached; concurrent callers can never exceed the limit.
func ConsumeQuota(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, resource string) error {
	_, err := sqlc.New(tx).ConsumeQuota(ctx, sqlc.ConsumeQuotaParams{OrgID: orgID, Resource: resource})
	if errors.Is(err, pgx.ErrNoRows) {
		return quotaError(ctx, tx, orgID, resource)
	}
	return err
}

// CreateTask creates a task: a stand-in for the orchestrator, which owns tasks.
func (s *Service) CreateTask(ctx context.Context, orgID uuid.UUID, title string) (_ *Task, err error) {
	defer wrapOp(&err, "tenancy.CreateTask")
	ctx = asOrg(ctx, orgID)
	if err := checkName("title", title, MaxTaskTitleChars); err != nil {
		return nil, err
	}
	t, err := s.q().CreateTask(ctx, sqlc.CreateTaskParams{OrgID: orgID, Title: title})
	if err != nil {
		return nil, mapErr(err, "org "+orgID.String())
	}
	return &Task{ID: t.ID, OrgID: t.OrgID, Title: t.Title, CreatedAt: t.CreatedAt}, nil
}

// ReleaseQuota gives back n units of resource for orgID inside tx (entries
// erased by a purge no longer count as stored). It never goes below zero and
// does nothing for an org without a quota row.
func ReleaseQuota(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, resource string, n int64) error {
	if n <= 0 {
		return nil
	}
	return sqlc.New(tx).ReleaseQuota(ctx, sqlc.ReleaseQuotaParams{OrgID: orgID, Resource: resource, N: n})
}

// RevokeOrgTokens revokes every token of an org that is not revoked yet and
// returns how many it revoked (a purge of the org). Like RevokeToken it
// tells the servers that cache token checks (RevocationChannel).
func (s *Service) RevokeOrgTokens(ctx context.Context, orgID uuid.UUID) (_ int64, err error) {
	defer wrapOp(&err, "tenancy.RevokeOrgTokens")
	ctx = asOrg(ctx, orgID)
	var n int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		var err error
		if n, err = q.RevokeOrgTokens(ctx, orgID); err != nil {
			return err
		}
		return q.NotifyTokensRevoked(ctx, revocation(orgID, nil))
	})
	if err != nil {
		return 0, mapErr(err, "org")
	}
	return n, nil
}

// RevocationChannel is the PostgreSQL notification channel on which every
// revocation (RevokeToken, RevokeOrgTokens) names what it revoked, sent in
// its transaction, so delivered when it commits: a server that caches
// token checks LISTENs on it and drops them at once (the MCP server,
// docs/mcp.md "Authentication"). ParseRevocation reads a payload.
const RevocationChannel = "knowledge_tokens_revoked"

// revocation is the payload naming a token of org, or all of them (nil).
func revocation(org uuid.UUID, token *uuid.UUID) string {
	if token == nil {
		return org.String() + ":*"
	}
	return org.String() + ":" + token.String()
}

// ParseRevocation reads a RevocationChannel payload: the org and the token
// revoked, or a nil token for every token of the org.
func ParseRevocation(payload string) (org uuid.UUID, token *uuid.UUID, err error) {
	o, t, ok := strings.Cut(payload, ":")
	if !ok {
		return uuid.Nil, nil, errors.New("revocation payload " + payload + ": want org:token or org:*")
	}
	if org, err = uuid.Parse(o); err != nil {
		return uuid.Nil, nil, err
	}
	if t == "*" {
		return org, nil, nil
	}
	id, err := uuid.Parse(t)
	if err != nil {
		return uuid.Nil, nil, err
	}
	return org, &id, nil
}

// ConsumeQuotaN takes n units of resource for orgID inside tx, all or none
// (an import). force counts them even past the limit (an import's
// IgnoreQuota). It returns a quota_exceeded error when they do not fit.
func ConsumeQuotaN(ctx context.Context, tx pgx.Tx, orgID uuid.UUID, resource string, n int64, force bool) error {
	if n <= 0 {
		return nil
	}
	_, err := sqlc.New(tx).ConsumeQuotaN(ctx, sqlc.ConsumeQuotaNParams{OrgID: orgID, Resource: resource, N: n, Force: force})
	if errors.Is(err, pgx.ErrNoRows) {
		return quotaError(ctx, tx, orgID, resource)
	}
	return err
}

// ListTasksPage returns up to max of the org's tasks that knowledge is linked
// to, with ids after after (keyset paging for an export).
func ListTasksPage(ctx context.Context, db DB, orgID, after uuid.UUID, max int) ([]Task, error) {
	rows, err := sqlc.New(db).ListTasksPage(ctx, sqlc.ListTasksPageParams{OrgID: orgID, After: after, MaxRows: int32(max)})
	if err != nil {
		return nil, err
	}
	out := make([]Task, len(rows))
	for i, r := range rows {
		out[i] = Task{ID: r.ID, OrgID: r.OrgID, Title: r.Title, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// ListAgentsOn is ListAgents read through db (an export's snapshot).
func ListAgentsOn(ctx context.Context, db DB, orgID uuid.UUID) ([]Agent, error) {
	rows, err := sqlc.New(db).ListAgents(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Agent, len(rows))
	for i, r := range rows {
		out[i] = Agent{ID: r.ID, OrgID: r.OrgID, Name: r.Name, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// ImportAgent inserts an agent of an export under its own id inside tx. It
// returns false when nothing was inserted: the agent is there already, or
// its name is taken in the org by another agent (then AgentExists says no).
func ImportAgent(ctx context.Context, tx pgx.Tx, a Agent) (bool, error) {
	n, err := sqlc.New(tx).ImportAgent(ctx, sqlc.ImportAgentParams{OrgID: a.OrgID, ID: a.ID, Name: a.Name, CreatedAt: a.CreatedAt})
	return n == 1, err
}

// AgentExists tells whether the org has the agent.
func AgentExists(ctx context.Context, db DB, orgID, id uuid.UUID) (bool, error) {
	return sqlc.New(db).AgentExists(ctx, sqlc.AgentExistsParams{OrgID: orgID, ID: id})
}

// ImportTask inserts a task of an export under its own id inside tx; false
// when it is there already.
func ImportTask(ctx context.Context, tx pgx.Tx, t Task) (bool, error) {
	n, err := sqlc.New(tx).ImportTask(ctx, sqlc.ImportTaskParams{OrgID: t.OrgID, ID: t.ID, Title: t.Title, CreatedAt: t.CreatedAt})
	return n == 1, err
}

// AgentByName returns the agent of the org with that name (names are unique
// in an org). With create, a missing agent is made; created says so. A
// missing agent without create, or an org that does not exist, is
// not_found. It is how an OAuth access token's subject becomes an agent
// (apps/mcp/internal/oauth): the operator provisions agents by name, or
// lets the first token of a subject create its agent.
func (s *Service) AgentByName(ctx context.Context, orgID uuid.UUID, name string, create bool) (a *Agent, created bool, err error) {
	defer wrapOp(&err, "tenancy.AgentByName")
	ctx = asOrg(ctx, orgID)
	if err := checkName("name", name, MaxAgentNameChars); err != nil {
		return nil, false, err
	}
	toAgent := func(r sqlc.Agent) *Agent {
		return &Agent{ID: r.ID, OrgID: r.OrgID, Name: r.Name, CreatedAt: r.CreatedAt}
	}
	row, err := s.q().GetAgentByName(ctx, sqlc.GetAgentByNameParams{OrgID: orgID, Name: name})
	if err == nil {
		return toAgent(row), false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) || !create {
		return nil, false, mapErr(err, "agent "+name)
	}
	row, err = s.q().CreateAgentIfAbsent(ctx, sqlc.CreateAgentIfAbsentParams{OrgID: orgID, Name: name})
	if err == nil {
		return toAgent(row), true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, mapErr(err, "agent "+name) // 23503: no such org
	}
	row, err = s.q().GetAgentByName(ctx, sqlc.GetAgentByNameParams{OrgID: orgID, Name: name})
	if err != nil {
		return nil, false, mapErr(err, "agent "+name)
	}
	return toAgent(row), false, nil
}
