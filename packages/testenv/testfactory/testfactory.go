// Package testfactory writes the rows tests start from (orgs, agents,
// tokens, tasks, entries) straight into the database, one small function
// per table. Each takes an options struct whose zero value gives a valid
// row: names are unique, and a missing parent (an entry's org, a token's
// agent) is made too. Tests set only the fields their case is about.
//
// The rows are written with plain SQL, not through packages/knowledge or
// packages/tenancy: those packages' own tests use the factories, and a
// fixture must not depend on the code under test. exec is the schema
// owner's pool (testenv.Database.Pool) or a transaction of it: the owner is
// exempt from row-level security, so rows of any org can be written.
package testfactory

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
)

// Executor runs one statement and scans its row: a *pgxpool.Pool, a
// *pgx.Conn and a pgx.Tx all are.
type Executor interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Scopes is every scope a token can carry (tenancy.Catalogue, which
// tenancy's tests pin this to): a factory token may call every tool.
var Scopes = []string{"knowledge:read", "knowledge:write", "knowledge:delete", "knowledge:delete_others"}

// EmbeddingModel names the model of an entry given an Embedding but no
// Model.
const EmbeddingModel = "testfactory-v1"

var (
	seq atomic.Int64
	// run keeps the names of two test binaries sharing one database (a
	// cluster's) apart.
	run = randomHex(3)
)

// uniqueName is prefix-<n>-<run>: unique in the process and, with the
// binary's random part, across processes.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%s", prefix, seq.Add(1), run)
}

// OrgOpts are the columns of an org. Zero values: a unique name.
type OrgOpts struct {
	Name string
}

// OrgRow is the org written.
type OrgRow struct {
	ID   uuid.UUID
	Name string
}

// Org writes an org.
func Org(ctx context.Context, tb testing.TB, exec Executor, opts *OrgOpts) OrgRow {
	tb.Helper()
	if opts == nil {
		opts = &OrgOpts{}
	}
	r := OrgRow{Name: opts.Name}
	if r.Name == "" {
		r.Name = uniqueName("org")
	}
	if err := exec.QueryRow(ctx, "INSERT INTO orgs (name) VALUES ($1) RETURNING id", r.Name).Scan(&r.ID); err != nil {
		tb.Fatalf("testfactory: org %q: %v", r.Name, err)
	}
	return r
}

// AgentOpts are the columns of an agent. Zero values: a new org, a unique
// name.
type AgentOpts struct {
	OrgID uuid.UUID
	Name  string
}

// AgentRow is the agent written.
type AgentRow struct {
	OrgID, ID uuid.UUID
	Name      string
}

// Agent writes an agent.
func Agent(ctx context.Context, tb testing.TB, exec Executor, opts *AgentOpts) AgentRow {
	tb.Helper()
	if opts == nil {
		opts = &AgentOpts{}
	}
	r := AgentRow{OrgID: opts.OrgID, Name: opts.Name}
	if r.OrgID == uuid.Nil {
		r.OrgID = Org(ctx, tb, exec, nil).ID
	}
	if r.Name == "" {
		r.Name = uniqueName("agent")
	}
	if err := exec.QueryRow(ctx, "INSERT INTO agents (org_id, name) VALUES ($1, $2) RETURNING id", r.OrgID, r.Name).Scan(&r.ID); err != nil {
		tb.Fatalf("testfactory: agent %q: %v", r.Name, err)
	}
	return r
}

// TokenOpts are the columns of a bearer token. Zero values: a new agent
// (of OrgID, or of a new org), every scope (Scopes), no expiry, not
// revoked.
type TokenOpts struct {
	OrgID     uuid.UUID
	AgentID   uuid.UUID // when set without OrgID, the agent's org is looked up
	Scopes    []string
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// TokenRow is the token written, with its text: what a client sends as
// "Authorization: Bearer <Text>".
type TokenRow struct {
	OrgID, AgentID, ID uuid.UUID
	Text               string
}

// Token writes a token the MCP server accepts. Its text has tenancy's
// format, kn_ + base64url(org id | token id | 32-byte secret), and the row
// keeps the secret's SHA-256, as tenancy.IssueToken writes them.
func Token(ctx context.Context, tb testing.TB, exec Executor, opts *TokenOpts) TokenRow {
	tb.Helper()
	if opts == nil {
		opts = &TokenOpts{}
	}
	r := TokenRow{OrgID: opts.OrgID, AgentID: opts.AgentID, ID: uuid.New()}
	switch {
	case r.AgentID == uuid.Nil:
		a := Agent(ctx, tb, exec, &AgentOpts{OrgID: r.OrgID})
		r.OrgID, r.AgentID = a.OrgID, a.ID
	case r.OrgID == uuid.Nil:
		if err := exec.QueryRow(ctx, "SELECT org_id FROM agents WHERE id = $1", r.AgentID).Scan(&r.OrgID); err != nil {
			tb.Fatalf("testfactory: token's agent %s: %v", r.AgentID, err)
		}
	}
	scopes := opts.Scopes
	if scopes == nil {
		scopes = Scopes
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		tb.Fatal(err)
	}
	hash := sha256.Sum256(secret[:])
	text := make([]byte, 0, 64)
	text = append(text, r.OrgID[:]...)
	text = append(text, r.ID[:]...)
	text = append(text, secret[:]...)
	r.Text = "kn_" + base64.RawURLEncoding.EncodeToString(text)
	err := exec.QueryRow(ctx, `INSERT INTO agent_tokens (org_id, id, agent_id, secret_hash, scopes, expires_at, revoked_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		r.OrgID, r.ID, r.AgentID, hash[:], scopes, opts.ExpiresAt, opts.RevokedAt).Scan(&r.ID)
	if err != nil {
		tb.Fatalf("testfactory: token of agent %s: %v", r.AgentID, err)
	}
	return r
}

// TaskOpts are the columns of a task. Zero values: a new org, a unique
// title.
type TaskOpts struct {
	OrgID uuid.UUID
	Title string
}

// TaskRow is the task written.
type TaskRow struct {
	OrgID, ID uuid.UUID
}

// Task writes a task (the orchestrator's, which entries link to).
func Task(ctx context.Context, tb testing.TB, exec Executor, opts *TaskOpts) TaskRow {
	tb.Helper()
	if opts == nil {
		opts = &TaskOpts{}
	}
	r := TaskRow{OrgID: opts.OrgID}
	if r.OrgID == uuid.Nil {
		r.OrgID = Org(ctx, tb, exec, nil).ID
	}
	title := opts.Title
	if title == "" {
		title = uniqueName("task")
	}
	if err := exec.QueryRow(ctx, "INSERT INTO tasks (org_id, title) VALUES ($1, $2) RETURNING id", r.OrgID, title).Scan(&r.ID); err != nil {
		tb.Fatalf("testfactory: task %q: %v", title, err)
	}
	return r
}

// EntryOpts are the columns of a knowledge entry. Zero values: a new org,
// no author, a unique title, body "body", and the schema's defaults for the
// rest (no tags, its confidence, origin and kind, no source or metadata,
// embedding pending).
type EntryOpts struct {
	OrgID      uuid.UUID
	AgentID    uuid.UUID // the author (created_by_agent_id); zero: none
	Title      string
	Body       string
	Tags       []string
	Confidence *int
	Origin     string // who made it: agent (the default), operator, import
	Source     string // provenance (NULL when "")
	Kind       string
	Metadata   string // a JSON object
	ExpiresAt  *time.Time
	CreatedAt  *time.Time
	// Embedding makes the entry ready with this vector, of Model
	// (default EmbeddingModel). EmbeddingError makes it failed. Neither:
	// pending, as a store leaves it for the worker.
	Embedding      []float32
	Model          string
	EmbeddingError string
}

// EntryRow is the entry written.
type EntryRow struct {
	OrgID, ID  uuid.UUID
	Generation int32 // embedding_generation: an embedding job's key with the ids
}

// Entry writes an entry with plain SQL, as an import or a bulk load would:
// the schema's triggers queue it for the lexical indexer and count it, but
// nothing of the knowledge service runs (no quota, no idempotence key, no
// duplicate check, no embedding job).
func Entry(ctx context.Context, tb testing.TB, exec Executor, opts *EntryOpts) EntryRow {
	tb.Helper()
	if opts == nil {
		opts = &EntryOpts{}
	}
	r := EntryRow{OrgID: opts.OrgID}
	if r.OrgID == uuid.Nil {
		r.OrgID = Org(ctx, tb, exec, nil).ID
	}
	title, body := opts.Title, opts.Body
	if title == "" {
		title = uniqueName("entry")
	}
	if body == "" {
		body = "body"
	}
	// Only the columns given are written: the others keep the schema's
	// defaults, which stay the one source of them.
	cols := []string{"org_id", "title", "body"}
	args := []any{r.OrgID, title, body}
	set := func(col string, v any) {
		cols = append(cols, col)
		args = append(args, v)
	}
	if opts.Tags != nil {
		set("tags", opts.Tags)
	}
	if opts.Confidence != nil {
		set("confidence", *opts.Confidence)
	}
	if opts.Origin != "" {
		set("origin", opts.Origin)
	}
	if opts.Source != "" {
		set("source", opts.Source)
	}
	if opts.Kind != "" {
		set("kind", opts.Kind)
	}
	if opts.Metadata != "" {
		set("metadata", opts.Metadata)
	}
	if opts.AgentID != uuid.Nil {
		set("created_by_agent_id", opts.AgentID)
	}
	if opts.ExpiresAt != nil {
		set("expires_at", *opts.ExpiresAt)
	}
	if opts.CreatedAt != nil {
		set("created_at", *opts.CreatedAt)
	}
	switch {
	case opts.Embedding != nil:
		set("embedding", pgvector.NewVector(opts.Embedding))
		set("embedding_status", "ready")
		set("embedding_model", cmp.Or(opts.Model, EmbeddingModel))
		set("embedded_at", time.Now())
	case opts.EmbeddingError != "":
		set("embedding_status", "failed")
		set("embedding_error", opts.EmbeddingError)
	}
	params := make([]string, len(cols))
	for i := range cols {
		params[i] = "$" + strconv.Itoa(i+1)
	}
	sql := "INSERT INTO knowledge (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(params, ", ") +
		") RETURNING id, embedding_generation"
	if err := exec.QueryRow(ctx, sql, args...).Scan(&r.ID, &r.Generation); err != nil {
		tb.Fatalf("testfactory: entry %q: %v", title, err)
	}
	return r
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
