package knowledge

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/after"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/idem"
)

// One entry's life is package entries' (entries.Entries): the facade puts
// the caller's org in the context and hands each call over.

// Store stores a new entry for the caller (store_knowledge), with its
// duplicate check and, given a client token, idempotently: see
// entries.Entries.Store.
func (s *Service) Store(ctx context.Context, c Caller, in StoreInput) (*StoreResult, error) {
	return s.entries.Store(s.scope(ctx, c.OrgID), c, in)
}

// WithStoreRecord returns ctx carrying what the caller's edge read, in a
// Redis round trip of its own, at the idempotence record of the store it
// is about to make (IdempotenceKey of the caller and its client token):
// value (nil: no record) or err (Redis did not answer). Store then makes no
// round trip of its own to read it: the MCP server reads it with the rate
// limits, in one.
func WithStoreRecord(ctx context.Context, key string, value []byte, err error) context.Context {
	return idem.WithRead(ctx, key, value, err)
}

// WithAfter returns ctx whose calls hand the work their answer need not
// wait for to run, which runs it after the answer, with the context it is
// given (the call's, without its cancellation): a store's record of its
// answer for retries, the embeddings queue's hand-over of what a call
// committed. Without it that work is done before the call returns. The
// MCP server gives every call its queue of work after the answers.
func WithAfter(ctx context.Context, run func(ctx context.Context, f func(context.Context))) context.Context {
	return after.With(ctx, run)
}

// Supersede marks oldID as superseded by newID (supersede_knowledge): see
// entries.Entries.Supersede for the rules and their order.
func (s *Service) Supersede(ctx context.Context, c Caller, oldID, newID uuid.UUID) (*SupersedeResult, error) {
	return s.entries.Supersede(s.scope(ctx, c.OrgID), c, oldID, newID)
}

// Correct stores a replacement for oldID and supersedes oldID with it, in
// one transaction (supersede_knowledge with replacement): see
// entries.Entries.Correct.
func (s *Service) Correct(ctx context.Context, c Caller, oldID uuid.UUID, replacement StoreInput) (*CorrectResult, error) {
	return s.entries.Correct(s.scope(ctx, c.OrgID), c, oldID, replacement)
}

// Get reads one whole entry of the caller's org (the knowledge://{id}
// resource); a forgotten one as its tombstone to its author and to whoever
// forgot it: see entries.Entries.Get.
func (s *Service) Get(ctx context.Context, c Caller, id uuid.UUID) (*Entry, error) {
	return s.entries.Get(s.scope(ctx, c.OrgID), c, id)
}

// GetBySource reads the live entry of the caller's org whose source is
// exactly source: see entries.Entries.GetBySource.
func (s *Service) GetBySource(ctx context.Context, c Caller, source string) (*Entry, error) {
	return s.entries.GetBySource(s.scope(ctx, c.OrgID), c, source)
}

// LinkTask links an entry to a task of the caller's org (task runners):
// see entries.Entries.LinkTask.
func (s *Service) LinkTask(ctx context.Context, c Caller, knowledgeID uuid.UUID, ref TaskRef) (*TaskLink, error) {
	return s.entries.LinkTask(s.scope(ctx, c.OrgID), c, knowledgeID, ref)
}

// TaskKnowledge lists the entries linked to a task; kind "" means all
// kinds: see entries.Entries.TaskKnowledge.
func (s *Service) TaskKnowledge(ctx context.Context, c Caller, taskID uuid.UUID, kind LinkKind) ([]TaskEntry, error) {
	return s.entries.TaskKnowledge(s.scope(ctx, c.OrgID), c, taskID, kind)
}

// FinishSimilarChecks finishes the duplicate checks stores left to the
// embeddings worker, for entries whose vectors (of this Service's
// embedder: the worker's) are written, across orgs, and returns how many
// it recorded: see entries.Entries.FinishSimilarChecks.
func (s *Service) FinishSimilarChecks(ctx context.Context, jobs []SimilarCheckJob) (int, error) {
	return s.entries.FinishSimilarChecks(ctx, jobs)
}

// PendingSimilarChecks returns, across orgs, up to max duplicate checks
// still owed since before before whose entries' vectors of this Service's
// embedder are written (the worker's sweep): see
// entries.Entries.PendingSimilarChecks.
func (s *Service) PendingSimilarChecks(ctx context.Context, before time.Time, max int) ([]SimilarCheckJob, error) {
	return s.entries.PendingSimilarChecks(ctx, before, max)
}
