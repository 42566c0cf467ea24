package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/db"
)

// A command is one leaf of ctl's command tree ("org create"), as cmd/go's
// base.Command is one of go's: its name, its line of help, and newRun, which
// declares the command's flags on a fresh flag set and returns the run that
// reads them.
type command struct {
	name    string
	summary string
	// arg: the command takes one positional argument besides its flags
	// (import FILE), in env.arg.
	arg bool
	// writes: the command writes to the database; when it succeeds, ctl
	// names the database on stderr (env.target).
	writes bool
	newRun func(fs *flag.FlagSet) func(e *env) error
	// fields maps the domain's field names in errors (errs.Error.Field) to
	// this command's flags where the flag is not the field in kebab case:
	// the domain names its own fields, and flag names live here only.
	fields map[string]string
}

// flagOf is the flag (with its dashes) that sets the domain's field: the
// command's own mapping, else the field in kebab case (perMinute is
// --per-minute, ignoreQuota --ignore-quota).
func (c *command) flagOf(field string) string {
	if f, ok := c.fields[field]; ok {
		return "--" + f
	}
	var b strings.Builder
	b.WriteString("--")
	for _, r := range field {
		if unicode.IsUpper(r) {
			b.WriteByte('-')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// commands is ctl's command tree; each run is a named function of its
// file, taking the command's flags as a struct.
var commands = []command{
	{name: "migrate up", writes: true, summary: "apply every pending migration (as the schema owner, OWNER_DATABASE_URL), then make or check the application's and the operator's roles and grant their privileges [--ignore-database-url]", newRun: bind(runMigrateUp)},
	{name: "migrate status", summary: "list migrations and whether they are applied (as the schema owner, OWNER_DATABASE_URL) [--ignore-database-url]", newRun: bind(runMigrateStatus)},

	{name: "org create", writes: true, summary: "create an org: --name N", newRun: bind(runOrgCreate)},
	{name: "org list", summary: "list orgs", newRun: bind(runOrgList)},
	{name: "agent create", writes: true, summary: "create an agent: --org ORG --name N", newRun: bind(runAgentCreate)},
	{name: "agent list", summary: "list an org's agents: --org ORG", newRun: bind(runAgentList)},
	{name: "token create", writes: true, summary: "issue a token: --org ORG --agent AGENT --scopes S1,S2 [--ttl 720h]", newRun: bind(runTokenCreate)},
	{name: "token revoke", writes: true, summary: "revoke a token: --id ID [--org ORG]", newRun: bind(runTokenRevoke)},
	{name: "token list", summary: "list an org's tokens (never their text): --org ORG", newRun: bind(runTokenList)},
	{name: "quota set", writes: true, summary: "set a quota: --org ORG --knowledge-stored N|unlimited", newRun: bind(runQuotaSet),
		fields: map[string]string{"limit": "knowledge-stored"}},
	{name: "quota show", summary: "show an org's quotas: --org ORG", newRun: bind(runQuotaShow)},
	{name: "task create", writes: true, summary: "create a task (stand-in for the orchestrator): --org ORG --title T", newRun: bind(runTaskCreate)},
	{name: "dev bootstrap", writes: true, summary: "for local development: make sure an org and agent exist, issue a token with every scope (--ttl 24h)", newRun: bind(runDevBootstrap)},

	{name: "ratelimit set", writes: true, summary: "set a rate limit: --org ORG [--agent AGENT | --each-agent] --kind read|write --per-minute N|unlimited", newRun: bind(runRateLimitSet)},
	{name: "ratelimit clear", writes: true, summary: "remove a rate limit (the server's default applies again): --org ORG [--agent AGENT | --each-agent] --kind read|write", newRun: bind(runRateLimitClear)},
	{name: "ratelimit show", summary: "show an org's rate limit settings: --org ORG", newRun: bind(runRateLimitShow)},

	{name: "audit", summary: "who did what: --org ORG [--agent A] [--entry ID] [--tool T] [--since T] [--until T] [--limit N] (newest first)", newRun: bind(runAudit),
		fields: map[string]string{"name": "tool"}},
	{name: "audit-prune", writes: true, summary: "drop the audit trail's days older than --older-than (default 90d; days, or a Go duration of at least 1h), of every org", newRun: bind(runAuditPrune)},

	{name: "stats", summary: "what an org holds: --org ORG [--top-tags N] (entries by state, embeddings, quota, rate limits, tags, authors)", newRun: bind(runStats)},
	{name: "search status", summary: "an org's search indexes: --org ORG (language, entries indexed and queued, its own vector indexes)", newRun: bind(runSearchStatus)},
	{name: "search language", writes: true, summary: "rebuild an org's lexical index in another text search configuration: --org ORG --config NAME", newRun: bind(runSearchLanguage)},
	{name: "relation-type add", writes: true, summary: "add an org's own relation type: --org ORG --name NAME (--inverse NAME | --symmetric)", newRun: bind(runRelationTypeAdd)},
	{name: "relation-type list", summary: "an org's relation types, built-in and its own: --org ORG", newRun: bind(runRelationTypeList)},

	{name: "isolate-org", writes: true, summary: "on a Citus cluster, give an org a shard of its own (as the schema owner, OWNER_DATABASE_URL): --org ORG [--transfer-mode auto|block_writes|force_logical] [--timeout 1h] [--ignore-database-url]", newRun: bind(runIsolateOrg)},

	{name: "export", summary: "write an org's knowledge as JSON Lines: --org ORG [--out FILE] [--vectors]", newRun: bind(runExport)},
	{name: "import", writes: true, summary: "read an export into an org: --org ORG FILE [--ignore-quota] (or --file FILE)", arg: true, newRun: bind(runImport)},
	{name: "erasure-report", summary: "prove an erasure: where a text or an entry's id, title, body and own words remain in any table or Redis key: --org ORG (--text TEXT | --entry ID) [--timeout 2m] (exit 3 when something is found or the scan was cut short)", newRun: bind(runErasureReport)},
	{name: "purge", writes: true, summary: "erase knowledge for good: --org ORG (--entry ID | --agent AGENT | --all) [--dry-run] [--yes]", newRun: bind(runPurge)},

	{name: "reembed", writes: true, summary: "ask for new vectors after a model change: --org ORG [--all]", newRun: bind(runReembed)},
	{name: "embeddings switch-status", summary: "a model switch's progress per org (EMBEDDINGS_NEXT_* names the next model)", newRun: bind(runSwitchStatus)},
	{name: "embeddings switch-finish", writes: true, summary: "end a model switch every org has cut over in: run with the next model configured as EMBEDDINGS_MODEL", newRun: bind(runSwitchFinish)},
}

// flags is a command's flags: a struct whose define declares them on the
// command's flag set.
type flags interface{ define(fs *flag.FlagSet) }

// bind makes a command's newRun of its run function: every call declares a
// fresh F's flags (a command's flags live in no package variable, so runs
// in parallel, as the tests make them, share nothing).
func bind[F any, P interface {
	*F
	flags
}](run func(e *env, f P) error) func(fs *flag.FlagSet) func(e *env) error {
	return func(fs *flag.FlagSet) func(e *env) error {
		f := P(new(F))
		f.define(fs)
		return func(e *env) error { return run(e, f) }
	}
}

// noFlags is the flags of a command that has none but --json.
type noFlags struct{}

func (*noFlags) define(*flag.FlagSet) {}

// orgFlags is the --org of the many commands about one org.
type orgFlags struct{ org string }

func (f *orgFlags) define(fs *flag.FlagSet) { fs.StringVar(&f.org, "org", "", "org id") }

// orgID is --org, which these commands require.
func (f *orgFlags) orgID() (uuid.UUID, error) { return uuidFlag("org", f.org) }

// lookup finds the command args name: one word ("audit") or two ("org
// create"); rest is what follows the name.
func lookup(args []string) (cmd *command, rest []string) {
	for n := 1; n <= min(2, len(args)); n++ {
		name := args[0]
		if n == 2 {
			name += " " + args[1]
		}
		for i := range commands {
			if commands[i].name == name {
				return &commands[i], args[n:]
			}
		}
	}
	return nil, nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ctl <command> [flags] [--json]")
	fmt.Fprintln(w, "\ncommands:")
	sorted := make([]command, len(commands))
	copy(sorted, commands)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	for _, c := range sorted {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nenvironment: DATABASE_URL (the operator's role, default "+db.DefaultOperatorURL+"),")
	fmt.Fprintln(w, "  OWNER_DATABASE_URL (migrate, isolate-org: the schema owner, default "+db.DefaultOwnerURL+";")
	fmt.Fprintln(w, "    refused when DATABASE_URL is set and names another database, unless --ignore-database-url),")
	fmt.Fprintln(w, "  DB_APP_ROLE, DB_OPERATOR_ROLE (migrate: the roles it makes and grants), REDIS_URL (reembed)")
	fmt.Fprintln(w, "\na command that writes names the database it wrote on stderr (stdout stays its output)")
}
