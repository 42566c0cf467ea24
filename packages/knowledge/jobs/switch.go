package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// A model switch's backfill (docs/embeddings.md, "Model switch") runs as
// asynq tasks on a queue of its own, one pass at a time across every
// worker: the dashboard shows the pass running (Active) and every pass done
// with what it did (Completed, its result), and the rate is the whole
// fleet's, not each worker's.
const (
	// SwitchQueue holds the backfill passes, apart from the embeddings
	// queue so they never wait behind (or hold up) fresh entries' batches.
	SwitchQueue = "embeddings-switch"
	// TypeSwitchBackfill is one backfill pass, named like the pipeline's
	// other task types (TypeEmbedEntry, TypeEmbedBatch).
	TypeSwitchBackfill = "knowledge:switch_backfill"
)

// SwitchOptions configure the backfill of a model switch.
type SwitchOptions struct {
	// Next is the model switched to (the apps read it: knowledgeenv.Next).
	Next embed.Embedder
	// Rate is the entries a second the passes embed, whichever worker
	// runs them. Default 50.
	Rate float64
	// Interval is how often each worker offers a pass (one runs at a
	// time; an offer while one is queued or running is dropped). Default 5s.
	Interval time.Duration
	// PassSeconds is how long a pass embeds at Rate before it ends and
	// reports (the next pass goes on from there). Default 60.
	PassSeconds int
	// Batch is the entries of one provider call. Default 32.
	Batch int
	// Retention keeps finished passes in the dashboard. Default 24h.
	Retention time.Duration
}

func (o SwitchOptions) withDefaults() SwitchOptions {
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.PassSeconds <= 0 {
		o.PassSeconds = 60
	}
	if o.Batch <= 0 {
		o.Batch = 32
	}
	if o.Retention <= 0 {
		o.Retention = 24 * time.Hour
	}
	return o
}

// passEntries is the most a pass embeds.
func (o SwitchOptions) passEntries() int { return max(1, int(o.Rate*float64(o.PassSeconds))) }

// passTimeout bounds a pass: its entries at the rate, and as long again
// for the provider's own time.
func (o SwitchOptions) passTimeout() time.Duration {
	return 2*time.Duration(o.PassSeconds)*time.Second + time.Minute
}

// switchPayload names the pass's next model, so a pass queued before the
// configuration changed is not run against another model.
type switchPayload struct {
	NextModel      string `json:"nextModel"`
	NextDimensions int    `json:"nextDimensions"`
}

// SwitchPassResult is what a pass writes as its task result: what the
// dashboard's Completed tab shows for it.
type SwitchPassResult struct {
	NextModel string      `json:"nextModel"`
	Embedded  int         `json:"embedded"` // entries given the next model's vectors
	Stale     int         `json:"stale"`    // entries changed meanwhile: nothing written
	CutOver   []uuid.UUID `json:"cutOver"`  // orgs cut over at the end of the pass
	// Done: the pass found nothing left to embed.
	Done bool `json:"done"`
	// Coverage is every org's progress after a pass that embedded
	// something (it reads every entry, so not after idle passes).
	Coverage []knowledge.SwitchCoverage `json:"coverage,omitempty"`
	Seconds  float64                    `json:"seconds"`
}

// NewSwitchBackfillTask returns the task of one backfill pass toward o.Next,
// on SwitchQueue. It is unique (type, queue and payload) while it is queued
// or running, so across all workers one pass runs at a time; the payload
// names the next model, so a pass queued before the configuration changed
// is not run against another model.
func NewSwitchBackfillTask(o SwitchOptions) (*asynq.Task, error) {
	o = o.withDefaults()
	payload, err := json.Marshal(switchPayload{NextModel: o.Next.Model(), NextDimensions: o.Next.Dimensions()})
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeSwitchBackfill, payload,
		asynq.Queue(SwitchQueue), asynq.Unique(o.passTimeout()+time.Minute), asynq.Timeout(o.passTimeout()),
		asynq.Retention(o.Retention), asynq.MaxRetry(3)), nil
}

// switchHandler runs backfill passes (TypeSwitchBackfill).
type switchHandler struct {
	svc   *knowledge.Service     // the switch's coverage
	maint *knowledge.Maintenance // its backfill
	opts  SwitchOptions
	obs   Observer
	log   *slog.Logger
}

func (h *switchHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var p switchPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("%w: bad payload: %v", asynq.SkipRetry, err)
	}
	next := h.opts.Next
	if p.NextModel != next.Model() || p.NextDimensions != next.Dimensions() {
		return nil // queued for another configuration: this worker's passes will follow
	}
	start := time.Now()
	pace := func(ctx context.Context, n int) error {
		tm := time.NewTimer(time.Duration(float64(n) / h.opts.Rate * float64(time.Second)))
		defer tm.Stop()
		select {
		case <-tm.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	max := h.opts.passEntries()
	rep, err := h.maint.Backfill(ctx, next, knowledge.BackfillOptions{Batch: h.opts.Batch, Max: max, Wait: pace})
	h.obs.SwitchPass(rep, err)
	if err != nil {
		return err // retried; what it wrote is kept (the work list is the data)
	}
	res := SwitchPassResult{NextModel: next.Model(), Embedded: rep.Embedded, Stale: rep.Stale,
		CutOver: rep.CutOver, Done: rep.Embedded+rep.Stale < max}
	if res.CutOver == nil {
		res.CutOver = []uuid.UUID{}
	}
	if rep.Embedded > 0 {
		if res.Coverage, err = h.svc.Operations().ModelSwitchCoverage(ctx, next); err != nil {
			return err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if rep.Embedded > 0 || len(rep.CutOver) > 0 {
		h.log.Info("model switch: backfill pass", "next_model", next.Model(), "embedded", rep.Embedded,
			"stale", rep.Stale, "cut_over", len(rep.CutOver), "done", res.Done)
	}
	b, _ := json.Marshal(res) // plain data: cannot fail
	if w := t.ResultWriter(); w != nil {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("write the pass's result: %w", err)
		}
	}
	return nil
}

// offerPasses enqueues a backfill pass (NewSwitchBackfillTask) every
// Interval until ctx ends; an offer while a pass is queued or running is
// dropped.
func offerPasses(ctx context.Context, client *asynq.Client, o SwitchOptions, log *slog.Logger) {
	task, _ := NewSwitchBackfillTask(o) // plain data: cannot fail
	for {
		_, err := client.EnqueueContext(ctx, task)
		if err != nil && !errors.Is(err, asynq.ErrDuplicateTask) && ctx.Err() == nil {
			log.Warn("model switch: could not queue a backfill pass; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.Interval):
		}
	}
}
