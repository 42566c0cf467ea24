package knowledge

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// Options are the optional dependencies of a Service; nil means the
// documented default.
type Options struct {
	// Embedder embeds search queries. Default: the local embedder.
	Embedder embed.Embedder
	// Enqueuer receives committed entries. Default: none (the reconciler
	// of the worker picks pending entries up).
	Enqueuer Enqueuer
	// Redis holds idempotence keys. Default: none; then client tokens are
	// only guarded by the unique key in Postgres.
	Redis *redis.Client
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Service is the knowledge domain API. It is safe for concurrent use.
type Service struct {
	pool *pgxpool.Pool
	opts Options
}

// New returns a Service on pool.
func New(pool *pgxpool.Pool, opts Options) *Service {
	return &Service{pool: pool, opts: opts}
}

var errTODO = errors.New("not implemented yet")

// Store stores a new entry for the caller (store_knowledge).
func (s *Service) Store(ctx context.Context, c Caller, in StoreInput) (*StoreResult, error) {
	return nil, errTODO
}

// Search runs the hybrid search (search_knowledge).
func (s *Service) Search(ctx context.Context, c Caller, in SearchInput) (*SearchResult, error) {
	return nil, errTODO
}

// Supersede marks oldID as superseded by newID (supersede_knowledge).
func (s *Service) Supersede(ctx context.Context, c Caller, oldID, newID uuid.UUID) (*SupersedeResult, error) {
	return nil, errTODO
}

// Get reads one whole entry (the knowledge://{id} resource).
func (s *Service) Get(ctx context.Context, c Caller, id uuid.UUID) (*Entry, error) {
	return nil, errTODO
}

// LinkTask links an entry to a task of the caller's org (task runners).
func (s *Service) LinkTask(ctx context.Context, c Caller, knowledgeID uuid.UUID, ref TaskRef) (*TaskLink, error) {
	return nil, errTODO
}

// TaskEntry is one entry linked to a task, with the link.
type TaskEntry struct {
	Link            TaskLink   `json:"link"`
	ID              uuid.UUID  `json:"id"`
	Title           string     `json:"title"`
	Tags            []string   `json:"tags"`
	Confidence      int        `json:"confidence"`
	EmbeddingStatus string     `json:"embeddingStatus"`
	Superseded      bool       `json:"superseded"`
	HeadID          *uuid.UUID `json:"headId,omitempty"`
	CreatedAt       time.Time  `json:"createdAt"`
}

// TaskKnowledge lists the entries linked to a task; kind "" means all kinds.
func (s *Service) TaskKnowledge(ctx context.Context, c Caller, taskID uuid.UUID, kind LinkKind) ([]TaskEntry, error) {
	return nil, errTODO
}
