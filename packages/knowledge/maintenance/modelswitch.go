package maintenance

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/chunkembed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
)

// A model switch without downtime (docs/embeddings.md, "Model switch"):
//
//   - The next model is configured next to the current one
//     (knowledge.Options.NextEmbedder). Its vectors, an entry's
//     first chunk included, are rows of knowledge_chunks: the entries' rows
//     and the current model's searches are untouched.
//   - The worker backfills them (Backfill): entries that have a vector of
//     the current model and none of the next, in key order, rate-limited.
//     The work list is the data itself, so a crash loses nothing and a
//     restart goes on where it is; entries stored meanwhile are picked up
//     the same way.
//   - An org is served by the current model until it is covered (no entry
//     pending, none without the next model's vector); then it is cut over
//     (CutOver: a row of knowledge_org_spaces) and served by the next model
//     alone. Either way its vector list is of one model, and never empty
//     for lack of vectors: the current model's are kept until the switch
//     is finished.
//   - An entry stored after its org cut over is embedded by the current
//     model first and backfilled within a pass: until then it is found by
//     the lexical lists.

// CheckModelSwitch says whether a next model can be configured with the
// current one: another model (the next model's vectors are told apart from
// the current one's chunks by their model's name).
func CheckModelSwitch(current, next embed.Embedder) error {
	if next == nil {
		return nil
	}
	if next.Model() == current.Model() {
		return fmt.Errorf("the next model, %s, must be another model than the current one (to change only the width, re-embed: ctl reembed)",
			next.Model())
	}
	return vecspace.Of(next).Validate()
}

// BackfillOptions tune one Backfill pass.
type BackfillOptions struct {
	// Batch is how many entries one provider call carries. Default 32.
	Batch int
	// Max is the most entries a pass embeds. Default: no limit.
	Max int
	// Chunk is how bodies are cut for the next model. Default:
	// chunkembed.OptionsFor(its model).
	Chunk chunkembed.Options
	// Wait is called before each batch with its size; a rate limiter
	// waits there. An error ends the pass.
	Wait func(ctx context.Context, n int) error
}

// BackfillReport says what a pass did.
type BackfillReport struct {
	Embedded int         // entries given the next model's vectors
	Stale    int         // entries changed meanwhile (re-embedded, forgotten): nothing written
	CutOver  []uuid.UUID // orgs cut over at the end of the pass
}

// Backfill gives entries that have a vector of the current model the next
// model's vectors (one per chunk), in key order, Batch entries a provider
// call, until none is left or Max are done, then cuts over every org that
// is covered. A provider error ends the pass (the next one starts again
// from the first entry still without a vector). Several workers may run it
// at once: they may embed an entry twice, and the second write does
// nothing.
func (m *Maintenance) Backfill(ctx context.Context, next embed.Embedder, o BackfillOptions) (_ BackfillReport, err error) {
	defer data.WrapOp(&err, "knowledge.Backfill")
	var rep BackfillReport
	if err := CheckModelSwitch(m.emb, next); err != nil {
		return rep, err
	}
	if o.Batch <= 0 {
		o.Batch = 32
	}
	if o.Chunk.Chars <= 0 {
		o.Chunk = chunkembed.OptionsFor(next.Model())
	}
	var afterOrg, afterID uuid.UUID
	for o.Max <= 0 || rep.Embedded+rep.Stale < o.Max {
		n := o.Batch
		if o.Max > 0 {
			n = min(n, o.Max-rep.Embedded-rep.Stale)
		}
		rows, err := m.q.BackfillEntries(ctx, sqlc.BackfillEntriesParams{
			AfterOrg: afterOrg, AfterID: afterID, Model: next.Model(), Max: int32(n),
		})
		if err != nil {
			return rep, data.MapErr(err, "")
		}
		if len(rows) == 0 {
			break
		}
		afterOrg, afterID = rows[len(rows)-1].OrgID, rows[len(rows)-1].ID
		if o.Wait != nil {
			if err := o.Wait(ctx, len(rows)); err != nil {
				return rep, err
			}
		}
		texts := make([]chunkembed.Entry, len(rows))
		for i, r := range rows {
			texts[i] = chunkembed.Entry{Title: r.Title, Body: r.Body}
		}
		vecs, err := chunkembed.Embed(ctx, next, o.Chunk, chunkembed.DefaultMaxInputChars, texts)
		if err != nil {
			return rep, fmt.Errorf("backfill with %s: %w", next.Model(), err)
		}
		for i, r := range rows {
			wrote, err := m.writeNext(ctx, r, next.Model(), vecs[i])
			if err != nil {
				return rep, err
			}
			if wrote {
				rep.Embedded++
			} else {
				rep.Stale++
			}
		}
	}
	if o.Max > 0 && rep.Embedded+rep.Stale >= o.Max {
		return rep, nil // more may be left: cut over after a full pass
	}
	cut, err := m.cutOver(ctx, vecspace.Of(next))
	rep.CutOver = cut
	return rep, err
}

// writeNext writes an entry's next-model vectors in one transaction, each
// only while the entry still has its vector at the generation read.
func (m *Maintenance) writeNext(ctx context.Context, r sqlc.BackfillEntriesRow, model string, v chunkembed.Vectors) (bool, error) {
	tx, err := m.data.Scoped().Begin(ctx)
	if err != nil {
		return false, data.MapErr(err, "")
	}
	defer tx.Rollback(ctx)
	q := m.q.WithTx(tx)
	for j, sp := range v.Spans {
		n, err := q.InsertNextChunk(ctx, sqlc.InsertNextChunkParams{
			OrgID: r.OrgID, EntryID: r.ID, Generation: r.EmbeddingGeneration, EmbeddingModel: model,
			Chunk: int32(j), StartChar: int32(sp.Start), EndChar: int32(sp.End), Embedding: pgvector.NewVector(v.Vecs[j]),
		})
		if err != nil {
			return false, data.MapErr(err, "")
		}
		if n == 0 && j == 0 {
			return false, nil // gone, re-embedded or forgotten, or written by another worker
		}
	}
	return true, data.MapErr(tx.Commit(ctx), "")
}

// cutOver serves every covered org by the next model from now on.
func (m *Maintenance) cutOver(ctx context.Context, next vecspace.Space) ([]uuid.UUID, error) {
	orgs, err := m.q.OrgsToCutOver(ctx, next.Model)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	var cut []uuid.UUID
	for _, org := range orgs {
		n, err := m.q.CutOverOrg(ctx, sqlc.CutOverOrgParams{OrgID: org, Model: next.Model, Dims: int32(next.Dims)})
		if err != nil {
			return cut, data.MapErr(err, "")
		}
		if n == 1 {
			cut = append(cut, org)
			m.log.Info("knowledge: org cut over to the next model", "org", org, "model", next.Model, "dimensions", next.Dims)
		}
	}
	return cut, nil
}

// SwitchCoverage is an org's progress in a model switch.
type SwitchCoverage struct {
	OrgID      uuid.UUID `json:"orgId"`
	WithVector int64     `json:"withVector"` // entries with a vector of the current model
	Covered    int64     `json:"covered"`    // of those, with the next model's too
	CutOver    bool      `json:"cutOver"`    // served by the next model
}

// ModelSwitchCoverage reports every org's progress in the switch to next
// (it reads every entry: for operators, not for every pass).
func (m *Maintenance) ModelSwitchCoverage(ctx context.Context, next embed.Embedder) (_ []SwitchCoverage, err error) {
	defer data.WrapOp(&err, "knowledge.ModelSwitchCoverage")
	if next == nil {
		return nil, errors.New("no model switch is configured (no next model)")
	}
	rows, err := m.q.SwitchCoverage(ctx, next.Model())
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	out := make([]SwitchCoverage, len(rows))
	for i, r := range rows {
		out[i] = SwitchCoverage{OrgID: r.OrgID, WithVector: r.WithVector, Covered: r.Covered, CutOver: r.Switched}
	}
	return out, nil
}

// FinishModelSwitch ends a switch whose orgs have all cut over to next:
// org by org, in batches, each entry takes its next-model first chunk as
// its own vector and its other models' vectors are deleted; then the orgs'
// serving rows go, as next is about to be the configured model. Run it
// after configuring next as the current model (the MCP servers and workers
// restarted without a next model): searches are then of next in every
// org, from the chunks table until an entry is moved, from its row after.
// It refuses while an org is not cut over, and is safe to run again.
func (m *Maintenance) FinishModelSwitch(ctx context.Context, next vecspace.Space) (moved int64, err error) {
	defer data.WrapOp(&err, "knowledge.FinishModelSwitch")
	if err := next.Validate(); err != nil {
		return 0, err
	}
	cov, err := m.q.SwitchCoverage(ctx, next.Model)
	if err != nil {
		return 0, data.MapErr(err, "")
	}
	for _, c := range cov {
		if c.WithVector > 0 && !c.Switched {
			return 0, fmt.Errorf("org %s has not cut over to %s yet (%d of %d entries have its vectors): run the worker with it as the next model until it has",
				c.OrgID, next, c.Covered, c.WithVector)
		}
	}
	for _, c := range cov {
		for {
			n, err := m.q.FinishSwitchBatch(ctx, sqlc.FinishSwitchBatchParams{OrgID: c.OrgID, Model: next.Model, Max: 500})
			if err != nil {
				return moved, data.MapErr(err, "")
			}
			if n == 0 {
				break
			}
			moved += n
		}
	}
	if _, err := m.q.ForgetOrgSpaces(ctx, sqlc.ForgetOrgSpacesParams{Model: next.Model, Dims: int32(next.Dims)}); err != nil {
		return moved, data.MapErr(err, "")
	}
	return moved, nil
}
