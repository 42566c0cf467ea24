package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/term"

	"github.com/agentfleet/orchestrator/packages/appenv/knowledgeenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// purgeOutput is what `ctl purge` prints (with --json, as is).
type purgeOutput struct {
	OrgID  uuid.UUID `json:"orgId"`
	Scope  string    `json:"scope"`
	DryRun bool      `json:"dryRun"`
	*knowledge.PurgeReport
	TokensRevoked int64 `json:"tokensRevoked"`
	// OrgIndexDropped: --all dropped the org's whole lexical index at once,
	// uncounted, so postings is 0 (docs/operators.md, "Purge").
	OrgIndexDropped bool   `json:"orgIndexDropped,omitempty"`
	QueuedTasks     int    `json:"queuedTasksDeleted"`
	MixedTasks      int    `json:"queuedTasksKept"`
	Vacuumed        bool   `json:"vacuumed"`
	Note            string `json:"note,omitempty"`
}

// tokenCacheNote is what revoking an org's tokens cannot do at once.
const tokenCacheNote = "an MCP server may accept a revoked token until its MCP_TOKEN_CACHE_TTL (default 5 s) ends: if agents were storing, run the purge again after that"

// orgIndexWhy is why a real purge of --all reports no index postings
// where its dry run counted them.
const orgIndexWhy = "--all drops the org's whole lexical index at once (postings, term statistics, queue) without counting its postings"

// Purge: erasing knowledge for good (a legal request). The domain part is
// knowledge.Operations.Purge; this command adds what spans the deployment:
// the org's tokens (--all), the embedding tasks in Redis, and a VACUUM so
// the erased rows do not linger in the tables' dead tuples.

type purgeFlags struct {
	orgFlags
	entry, agent            string
	all, dry, yes, noVacuum bool
}

func (f *purgeFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.entry, "entry", "", "erase one entry")
	fs.StringVar(&f.agent, "agent", "", "erase every entry this agent created")
	fs.BoolVar(&f.all, "all", false, "erase every entry of the org and revoke its tokens")
	fs.BoolVar(&f.dry, "dry-run", false, "count what would be erased; change nothing")
	fs.BoolVar(&f.yes, "yes", false, "do not ask for confirmation")
	fs.BoolVar(&f.noVacuum, "no-vacuum", false, "skip the VACUUM after the purge (then erased rows stay on disk until autovacuum)")
}

// scope is what --entry, --agent and --all erase, and its name in what
// ctl prints. The rule that a purge names exactly one is the domain's
// (PurgeScope.Validate); ctl only words it in flags.
func (f *purgeFlags) scope() (scope knowledge.PurgeScope, name string, err error) {
	if f.entry != "" {
		if scope.Entry, err = uuidFlag("entry", f.entry); err != nil {
			return scope, "", err
		}
		name = "entry " + scope.Entry.String()
	}
	if f.agent != "" {
		if scope.Agent, err = uuidFlag("agent", f.agent); err != nil {
			return scope, "", err
		}
		name = "agent " + scope.Agent.String()
	}
	if f.all {
		scope.All, name = true, "all"
	}
	if err := scope.Validate(); err != nil {
		return scope, "", usagef("give exactly one of --entry, --agent, --all")
	}
	return scope, name, nil
}

func runPurge(e *env, f *purgeFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	scope, scopeName, err := f.scope()
	if err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	agents, err := t.ListAgents(e.ctx, orgID) // the org must exist
	if err != nil {
		return err
	}
	if scope.Agent != uuid.Nil && !hasAgent(agents, scope.Agent) {
		return usagef("--agent: %s is not an agent of org %s", scope.Agent, orgID)
	}
	rcfg, err := knowledge.ParseRedisURL(e.redisURL())
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := rcfg.Client()
	defer rdb.Close()
	pool, err := e.db()
	if err != nil {
		return err
	}
	svc := knowledge.New(pool, knowledge.Options{Redis: rdb, Config: knowledge.Config{TextSearchConfig: knowledgeenv.TextSearchConfig(e.config())}})
	if !f.dry && !f.yes {
		if err := confirmPurge(e, svc, orgID, scope, scopeName); err != nil {
			return err
		}
	}

	e.dryRun = f.dry
	out := purgeOutput{OrgID: orgID, Scope: scopeName, DryRun: f.dry}
	if scope.All && !f.dry {
		// First, so no agent of the org stores while it is erased.
		if out.TokensRevoked, err = t.RevokeOrgTokens(e.ctx, orgID); err != nil {
			return err
		}
		if out.TokensRevoked > 0 {
			out.Note = tokenCacheNote
		}
	}
	// Progress on a terminal: the entries erased so far, batch by
	// batch. A purge cut short is resumed by running it again (it
	// is idempotent: what is erased stays erased, and the rest goes).
	prog, clear := e.progress("erased")
	var onBatch func(knowledge.PurgeReport)
	if prog != nil && !f.dry {
		onBatch = func(r knowledge.PurgeReport) { prog(r.Entries) }
	}
	rep, err := svc.Operations().PurgeWith(e.ctx, orgID, scope, knowledge.PurgeOptions{DryRun: f.dry, Progress: onBatch})
	clear()
	out.PurgeReport = rep
	out.OrgIndexDropped = scope.All && !f.dry
	if err != nil {
		return err
	}
	if !f.dry {
		if err := afterPurge(e, pool, rcfg, scope, !f.noVacuum, &out); err != nil {
			return err
		}
	}
	return e.print(out, func(w io.Writer) { printPurge(w, out, scope.All) })
}

// confirmPurge asks the person at the terminal to type the org id, after
// telling what the purge would erase. The question needs a person: a script
// (--json, or input that is not a terminal) must say --yes, so a piped
// "yes" or a forgotten flag never erases anything.
func confirmPurge(e *env, svc *knowledge.Service, orgID uuid.UUID, scope knowledge.PurgeScope, scopeName string) error {
	if e.json {
		return usagef("--yes is required with --json (a script cannot answer the confirmation question)")
	}
	if f, ok := e.stdin.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		return usagef("--yes is required when standard input is not a terminal (nothing erased)")
	}
	preview, err := svc.Operations().Purge(e.ctx, orgID, scope, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "This erases for good, in org %s (%s): %d entries, %d task links, %d supersession edges, %d index postings, %d idempotence keys, %d uploads in parts",
		orgID, scopeName, preview.Entries, preview.TaskLinks, preview.SupersessionEdges, preview.Postings, preview.IdempotenceKeys, preview.Uploads)
	if scope.All {
		fmt.Fprint(e.stderr, ", and revokes every token of the org")
	}
	fmt.Fprintf(e.stderr, ".\nType the org id to confirm: ")
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	if strings.TrimSpace(line) != orgID.String() {
		return usagef("not confirmed: nothing erased (--yes skips the question)")
	}
	return nil
}

// afterPurge deletes the queued embedding tasks of the erased entries and,
// with vacuum, vacuums the tables they were erased from (deleted rows stay
// in the tables' pages until vacuumed).
func afterPurge(e *env, pool *pgxpool.Pool, rcfg knowledge.RedisConfig, scope knowledge.PurgeScope, vacuum bool, out *purgeOutput) error {
	rep := out.PurgeReport
	insp := asynq.NewInspector(rcfg.Asynq())
	defer insp.Close()
	erased := make(map[uuid.UUID]bool, len(rep.IDs))
	for _, id := range rep.IDs {
		erased[id] = true
	}
	var err error
	out.QueuedTasks, out.MixedTasks, err = jobs.PurgeTasks(e.ctx, insp, out.OrgID, func(j knowledge.EmbeddingJob) bool {
		return scope.All || erased[j.EntryID]
	})
	if err != nil {
		return fmt.Errorf("entries erased; queued embedding tasks (they hold ids only; run the purge again): %w", err)
	}
	if vacuum && rep.Entries > 0 {
		if _, err := pool.Exec(e.ctx, "VACUUM knowledge, knowledge_supersessions, task_knowledge, knowledge_postings, knowledge_term_stats, knowledge_index_queue, knowledge_search_stats, knowledge_counts, knowledge_count_deltas"); err != nil {
			return fmt.Errorf("entries erased; VACUUM failed (autovacuum will get there): %w", err)
		}
		out.Vacuumed = true
	}
	return nil
}

func printPurge(w io.Writer, out purgeOutput, all bool) {
	rep := out.PurgeReport
	verb := "erased"
	if out.DryRun {
		verb = "would erase"
	}
	postings := fmt.Sprintf("%d index postings", rep.Postings)
	if out.OrgIndexDropped {
		postings = "the org's whole index (its postings uncounted)"
	}
	fmt.Fprintf(w, "org %s (%s): %s %d entries, %d task links, %d supersession edges (%d chain entries relinked, %d heads again), %s, %d idempotence keys, %d uploads in parts\n",
		out.OrgID, out.Scope, verb, rep.Entries, rep.TaskLinks, rep.SupersessionEdges, rep.Relinked, rep.HeadsAgain, postings, rep.IdempotenceKeys, rep.Uploads)
	if all && out.DryRun {
		fmt.Fprintf(w, "the purge itself reports 0 index postings: %s\n", orgIndexWhy)
	}
	if !out.DryRun {
		fmt.Fprintf(w, "%d queued embedding tasks deleted (%d kept: they also hold surviving entries), vacuumed: %v\n", out.QueuedTasks, out.MixedTasks, out.Vacuumed)
	}
	if all && !out.DryRun {
		if out.TokensRevoked == 0 {
			fmt.Fprintln(w, "0 tokens revoked: the org had none left unrevoked")
		} else {
			fmt.Fprintf(w, "%d tokens revoked; %s\n", out.TokensRevoked, out.Note)
		}
	}
}

func hasAgent(list []tenancy.Agent, id uuid.UUID) bool {
	for _, a := range list {
		if a.ID == id {
			return true
		}
	}
	return false
}
