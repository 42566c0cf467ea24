package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/appenv/knowledgeenv"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // the command line is wrong
)

// env is what every command gets: its flags, output, and lazily opened deps.
type env struct {
	ctx    context.Context
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	stdin  io.Reader // questions (purge's confirmation); os.Stdin
	arg    string    // the one positional argument of a command that takes one (import FILE)
	json   bool
	pool   *pgxpool.Pool
	// target is the database the command opened (db, ownerDB): a command
	// that writes names it when it succeeds.
	target *dbTarget
	// dryRun: the command wrote nothing this time (purge --dry-run).
	dryRun bool
	// exit is the exit code of a command that ran but whose answer is not
	// the all-clear (erasure-report: exitNotClean); 0 otherwise.
	exit int
}

// usageError marks a wrong command line (exit 2): ctl's own words, or a
// domain's refusal of the flags' values checked before the command runs.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// config reads ctl's settings the apps' one way (appenv). Each command
// reads only what it needs: the URLs (plain strings with defaults), or the
// embedder, whose bad values embedder and nextEmbedder report together.
func (e *env) config() *appenv.Env { return appenv.New(e.getenv) }

// embedder is the configured embedder (EMBEDDER, EMBEDDINGS_*): the same
// configuration the worker and the MCP server read.
func (e *env) embedder() (embed.Embedder, error) {
	c := e.config()
	cfg := knowledgeenv.Embedder(c)
	if err := c.Err(); err != nil {
		return nil, err
	}
	return embed.New(cfg)
}

// nextEmbedder is a model switch's next model (EMBEDDINGS_NEXT_*).
func (e *env) nextEmbedder() (embed.Embedder, error) {
	c := e.config()
	cfg := knowledgeenv.Next(c)
	if err := c.Err(); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, errors.New(knowledgeenv.EnvNextModel + " is not set: no model switch is configured")
	}
	return embed.New(*cfg)
}

// redisURL is REDIS_URL or the local default.
func (e *env) redisURL() string { return e.config().String("REDIS_URL", db.DefaultRedisURL) }

// db is the database of every command but migrate's (which connects as
// the schema owner), and its schema must be this build's: an unmigrated or
// too old one is refused naming the command that fixes it, rather than
// failing on a raw SQL error.
func (e *env) db() (*pgxpool.Pool, error) {
	if e.pool != nil {
		return e.pool, nil
	}
	url := e.config().String("DATABASE_URL", db.DefaultOperatorURL)
	p, err := db.Open(e.ctx, url)
	if err != nil {
		return nil, err
	}
	if err := db.CheckSchema(e.ctx, p); err != nil {
		p.Close()
		return nil, err
	}
	if t, err := targetOf(url); err == nil {
		e.target = &t
	}
	e.pool = p
	return p, nil
}

func (e *env) tenancy() (*tenancy.Service, error) {
	p, err := e.db()
	if err != nil {
		return nil, err
	}
	return tenancy.New(p), nil
}

// print writes v as JSON with --json, else as the human text of text().
func (e *env) print(v any, text func(w io.Writer)) error {
	if e.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(e.stdout)
	return nil
}

// run is the testable main: it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		fmt.Fprintf(stderr, "ctl: unknown command %q\n\n", strings.Join(args[:min(2, len(args))], " "))
		usage(stderr)
		return exitUsage
	}
	name := cmd.name
	fs := flag.NewFlagSet("ctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	e := &env{ctx: ctx, getenv: getenv, stdout: stdout, stderr: stderr, stdin: os.Stdin}
	fs.BoolVar(&e.json, "json", false, "print JSON for scripts")
	exec := cmd.newRun(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 && cmd.arg {
		// The flag package stops at the first non-flag: flags after the
		// argument (import FILE --json) are parsed on their own.
		e.arg = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return exitUsage
		}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ctl %s: unexpected argument %q\n", name, fs.Arg(0))
		return exitUsage
	}
	defer func() {
		if e.pool != nil {
			e.pool.Close()
		}
	}()
	if err := exec(e); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "ctl %s: %v\n", name, describe(cmd, err))
			return exitUsage
		}
		fmt.Fprintf(stderr, "ctl %s: %v\n", name, describe(cmd, err))
		if e.json {
			json.NewEncoder(stdout).Encode(map[string]string{"error": describe(cmd, err)})
		}
		return exitError
	}
	if cmd.writes && e.target != nil && !e.dryRun {
		// On stderr, so that stdout stays the command's output (its JSON
		// with --json): one line naming the database written, so that a
		// write to another database than meant is seen at once.
		fmt.Fprintf(stderr, "ctl %s: wrote %s\n", name, e.target)
	}
	return e.exit
}

// describe words an error for an operator: a domain error's field, in the
// domain's words, becomes the flag of cmd that sets it.
func describe(cmd *command, err error) string {
	var ke *errs.Error
	switch {
	case errors.As(err, &ke) && ke.Field != "":
		return cmd.flagOf(ke.Field) + ": " + ke.Message
	default:
		return err.Error()
	}
}
