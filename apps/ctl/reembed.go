package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

type reembedFlags struct {
	orgFlags
	all bool
}

func (f *reembedFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.BoolVar(&f.all, "all", false, "every entry, not only failed ones and those of another model")
}

func runReembed(e *env, f *reembedFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	// The current model comes from the same configuration the
	// worker and the MCP server read (EMBEDDER, EMBEDDINGS_*).
	emb, err := e.embedder()
	if err != nil {
		return err
	}
	redisURL := e.redisURL()
	rcfg, err := knowledge.ParseRedisURL(redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	client := asynq.NewClient(rcfg.Asynq())
	defer client.Close()
	pool, err := e.db()
	if err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	if _, err := t.Quotas(e.ctx, orgID); err != nil { // the org must exist
		return err
	}
	n, err := jobs.ReembedSpace(e.ctx, pool, jobs.NewEnqueuer(client), orgID, knowledge.SpaceOf(emb), f.all)
	out := map[string]any{"orgId": orgID, "model": emb.Model(), "pending": n}
	if err != nil {
		// Entries set pending stay pending; the reconciler enqueues them.
		out["error"] = err.Error()
	}
	// The archived batches of the entries just revived would stay in
	// the dashboard's Archived tab as if still failing: remove those
	// whose every job is now stale (jobs.PruneArchived).
	insp := asynq.NewInspector(rcfg.Asynq())
	defer insp.Close()
	pruned, perr := jobs.PruneArchived(e.ctx, pool, insp, orgID)
	out["archivedTasksRemoved"] = pruned
	if perr != nil {
		out["pruneError"] = perr.Error()
	}
	if werr := e.print(out, func(w io.Writer) {
		fmt.Fprintf(w, "%d entries set pending for model %s\n", n, emb.Model())
		fmt.Fprintf(w, "%d archived tasks removed (their entries were re-requested)\n", pruned)
	}); werr != nil {
		return werr
	}
	if err == nil && perr != nil {
		return fmt.Errorf("prune archived tasks: %w", perr)
	}
	return err
}
