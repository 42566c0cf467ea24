// Command bench is the MCP end-to-end benchmark: one agent storing and
// searching through the real server binary, over stdio (the server a
// child process speaking JSON lines, as agents' MCP clients run it) and
// over Streamable HTTP (loopback), against real PostgreSQL and Redis. It
// prints each call's p50, p95 and p99 as the client sees it, and, from the
// server's stage clock (MCP_STAGES_FILE, package internal/stages), the p50
// of each stage of a call and its PostgreSQL and Redis round trips:
//
//	go tool task bench:mcp
//	go run ./apps/mcp/bench -sizes 5000,100000 -base /tmp/mcp-base
//
// Per size an org of that many short notes: up to -store-all notes are
// stored one by one over stdio (those stores are the store figures), more
// are stored through the service, once, in a template database that every
// server gets a copy of, and the stores timed are -stores more on top. The
// org is embedded and indexed as the worker would (database.ready: before
// the copies, so it is done once), and searched never analyzed, then after
// the worker's Upkeep. With -keep the template stays, and -template NAME
// starts a later run from its copies (the timed part alone, on a machine
// gone quiet).
//
// -base names another build of the server (for example main's of an
// earlier commit, built with `go build -o /tmp/mcp-base ./apps/mcp` in a
// worktree of it): it gets a database of its own with the same notes, and
// the two servers' calls alternate, so both meet the same load; its
// figures are the client's only (an older build has no stage clock).
//
// -worker runs each server's own embeddings worker beside it while stores
// are timed, as a fleet runs them (worker.go; -base-worker names the
// base's). -base-index-versions gives a base from before migration 00049
// the index its search statement uses (setup.go, indexAllVersions), and
// -base-ctl gives it a database of its own schema instead (ownschema.go).
// docs/benchmarks.md ("MCP end to end") has the method and the figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/db"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	sizes      []int
	searches   int
	stores     int
	storeAll   int
	transports []string
	bin, base  string
	worker     bool   // each target's worker runs while stores are timed (worker.go)
	baseWorker string // the base's worker binary
	// baseVersions: the base predates db/migrations/00049 (its search
	// statement cannot use an index of heads only): its copy's space index
	// holds every version, as that build's worker made it.
	baseVersions bool
	// baseCtl: the base's ctl, which makes the base's database of its own
	// schema (ownschema.go).
	baseCtl  string
	keep     bool
	reuse    string
	template string
	ownerURL string
	redisURL string
	dir      string
}

func parse(args []string) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	sizes := fs.String("sizes", "5000,100000", "entries in the org, comma-separated")
	transports := fs.String("transports", "stdio,http", "stdio, http or both")
	o := &options{}
	fs.IntVar(&o.searches, "searches", 300, "searches timed per size, state and transport (after 20 untimed)")
	fs.IntVar(&o.stores, "stores", 300, "stores timed per transport on top of a bulk-loaded org, and over HTTP on top of a stored one")
	fs.IntVar(&o.storeAll, "store-all", 5000, "orgs of up to this many notes are stored one by one over stdio, every store timed")
	fs.StringVar(&o.bin, "mcp", "", "the server binary (default: built from this tree)")
	fs.StringVar(&o.base, "base", "", "another build of the server to compare with, calls alternating (client figures only)")
	fs.BoolVar(&o.worker, "worker", false, "run each server's embeddings worker (apps/worker, this tree's built) beside it while stores are timed, as a fleet runs them; with -base, -base-worker too")
	fs.StringVar(&o.baseWorker, "base-worker", "", "the worker of -base's build, for -worker")
	fs.BoolVar(&o.baseVersions, "base-index-versions", false, "-base predates migration 00049: its database's HNSW index of the entries holds every version (as that build made it), not the heads only, which its search statement cannot use")
	fs.StringVar(&o.baseCtl, "base-ctl", "", "the ctl of -base's build: the base's database is then of its own schema (its ctl migrates it and makes its org, its worker makes it ready and keeps it), not this build's; with -worker, -base-worker and sizes up to -store-all")
	fs.BoolVar(&o.keep, "keep", false, "keep the databases and the work directory")
	fs.StringVar(&o.reuse, "reuse", "", "search (and store on) a database a run kept, as it is, with this build alone")
	fs.StringVar(&o.template, "template", "", "for the one size above -store-all: copy this template database a run kept (-keep) instead of storing and preparing the org anew (the timed part alone, for example on a machine gone quiet)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 100 {
			return nil, fmt.Errorf("-sizes: %q is not a size of at least 100", s)
		}
		o.sizes = append(o.sizes, n)
	}
	for _, t := range strings.Split(*transports, ",") {
		if t = strings.TrimSpace(t); t != "stdio" && t != "http" {
			return nil, fmt.Errorf("-transports: %q is neither stdio nor http", t)
		}
		o.transports = append(o.transports, strings.TrimSpace(t))
	}
	if o.reuse != "" && (o.base != "" || len(o.sizes) != 1) {
		return nil, errors.New("-reuse takes one size (the org's, for the queries) and no -base")
	}
	if o.template != "" && (o.reuse != "" || len(o.sizes) != 1 || o.sizes[0] <= o.storeAll) {
		return nil, errors.New("-template takes one size above -store-all (its org's) and no -reuse")
	}
	if o.worker && o.base != "" && o.baseWorker == "" {
		return nil, errors.New("-worker with -base needs -base-worker: the base's own worker")
	}
	if o.baseVersions && o.base == "" {
		return nil, errors.New("-base-index-versions goes with -base")
	}
	if o.baseWorker != "" && (!o.worker || o.base == "") {
		return nil, errors.New("-base-worker goes with -worker and -base")
	}
	if o.baseCtl != "" {
		switch {
		case o.base == "" || !o.worker:
			return nil, errors.New("-base-ctl goes with -base, -worker and -base-worker: the base's own worker makes its database ready")
		case o.baseVersions:
			return nil, errors.New("-base-ctl and -base-index-versions: the base's own worker builds the index its build uses")
		case slices.Max(o.sizes) > o.storeAll:
			return nil, fmt.Errorf("-base-ctl: sizes up to -store-all (%d): a larger org is bulk-stored by this build's code, in its schema", o.storeAll)
		case o.reuse != "" || o.template != "":
			return nil, errors.New("-base-ctl: not with -reuse or -template")
		}
	}
	if o.searches < 1 || o.stores < 1 {
		return nil, errors.New("-searches and -stores must be at least 1")
	}
	o.ownerURL = os.Getenv("OWNER_DATABASE_URL")
	if o.ownerURL == "" {
		o.ownerURL = db.DefaultOwnerURL
	}
	o.redisURL = os.Getenv("REDIS_URL")
	if o.redisURL == "" {
		o.redisURL = db.DefaultRedisURL
	}
	return o, nil
}

// target is one server build under test.
type target struct {
	name   string
	bin    string
	clock  bool        // writes MCP_STAGES_FILE
	worker string      // its worker's binary, with -worker
	wproc  *workerProc // its worker while one runs
	db     *database
	lease  *redisLease
	client client
	stages string // this phase's stage file
}

func run(ctx context.Context, args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if o.dir, err = os.MkdirTemp("", "mcpbench-"); err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(o.dir)
	}
	if o.bin == "" {
		o.bin = filepath.Join(o.dir, "mcp")
		fmt.Printf("bench: building the server (go build -o %s ./apps/mcp)\n", o.bin)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", o.bin, ".")
		cmd.Dir = appDir()
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	targets := []*target{{name: "this", bin: o.bin, clock: true}}
	if o.worker {
		targets[0].worker = filepath.Join(o.dir, "worker")
		fmt.Printf("bench: building the worker (go build -o %s ./apps/worker)\n", targets[0].worker)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", targets[0].worker, ".")
		cmd.Dir = filepath.Join(filepath.Dir(appDir()), "worker")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	if o.base != "" {
		targets = append(targets, &target{name: "base", bin: o.base, worker: o.baseWorker})
	}
	for _, t := range targets {
		if t.lease, err = leaseRedis(ctx, o.redisURL); err != nil {
			return err
		}
		defer t.lease.stop()
	}
	fmt.Printf("bench: %s; load average %s; servers: %s\n", time.Now().UTC().Format(time.RFC3339), loadAvg(), describe(targets))
	var all []*result
	for _, size := range o.sizes {
		rs, err := benchSize(ctx, o, targets, size)
		all = append(all, rs...)
		if err != nil {
			return err
		}
	}
	printSummary(all, targets)
	fmt.Printf("bench: done, load average %s\n", loadAvg())
	return nil
}

func describe(ts []*target) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.name+"="+t.bin)
		if t.worker != "" {
			s = append(s, t.name+" worker="+t.worker)
		}
	}
	return strings.Join(s, ", ")
}

// appDir is apps/mcp, where `go build .` builds the server.
func appDir() string {
	if wd, err := os.Getwd(); err == nil {
		for d := wd; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "apps", "mcp", "main.go")); err == nil {
				return filepath.Join(d, "apps", "mcp")
			}
			if _, err := os.Stat(filepath.Join(d, "main.go")); err == nil && filepath.Base(d) == "mcp" {
				return d
			}
		}
	}
	return "."
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// env is the environment of t's server on t's database: the production
// defaults, but rate limits that never refuse (their round trip is timed,
// one agent calling as fast as it can is not refused).
func (o *options) env(t *target, stagesFile string) []string {
	env := environWithout("KNOWLEDGE_TOKEN", "MCP_")
	env = append(env, "DATABASE_URL="+t.db.appURL, "REDIS_URL="+t.lease.url, "KNOWLEDGE_TOKEN="+t.db.token,
		"MCP_RATE_AGENT_READS=1000000", "MCP_RATE_AGENT_WRITES=1000000", "MCP_RATE_ORG_READS=1000000", "MCP_RATE_ORG_WRITES=1000000")
	if t.clock && stagesFile != "" {
		env = append(env, "MCP_STAGES_FILE="+stagesFile)
	}
	return env
}

// environWithout is this process's environment less the variables a
// benchmarked process gets from the harness: its database and Redis, the
// OpenTelemetry exporter's (none: tracing off, as by default), and those
// named (a variable, or a prefix ending in "_").
func environWithout(names ...string) []string {
	names = append(names, "DATABASE_URL", "REDIS_URL", "OTEL_")
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(names, func(n string) bool {
			return k == n || strings.HasSuffix(n, "_") && strings.HasPrefix(k, n)
		}) {
			env = append(env, kv)
		}
	}
	return env
}

// start starts every target's server on transport, with a fresh stage
// file named after phase.
func (o *options) start(targets []*target, transport, phase string) error {
	for _, t := range targets {
		t.stages = filepath.Join(o.dir, fmt.Sprintf("stages-%s-%s-%s.jsonl", t.name, transport, phase))
		logf, err := os.Create(filepath.Join(o.dir, fmt.Sprintf("server-%s-%s-%s.log", t.name, transport, phase)))
		if err != nil {
			return err
		}
		env := o.env(t, t.stages)
		if transport == "stdio" {
			t.client, err = startStdio(t.bin, env, logf)
		} else {
			t.client, err = startHTTP(t.bin, env, t.db.token, logf)
		}
		logf.Close()
		if err != nil {
			return fmt.Errorf("%s server (%s): %w", t.name, transport, err)
		}
	}
	return nil
}

func stopAll(targets []*target) error {
	var errs []error
	for _, t := range targets {
		if t.client != nil {
			if err := t.client.close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", t.name, err))
			}
			t.client = nil
		}
	}
	return errors.Join(errs...)
}

// benchSize measures one size: its databases, stores, searches in both
// states.
func benchSize(ctx context.Context, o *options, targets []*target, size int) (out []*result, err error) {
	fmt.Printf("\n== %d entries ==\n", size)
	defer func() {
		if err == nil && !o.keep && o.reuse == "" {
			for _, t := range targets {
				if t.db != nil {
					if derr := t.db.drop(context.Background(), o.ownerURL); derr != nil {
						fmt.Printf("bench: dropping %s: %v\n", t.db.name, derr)
					}
				}
			}
		}
		if o.keep && o.reuse == "" {
			for _, t := range targets {
				if t.db != nil {
					fmt.Printf("bench: kept database %s (%s)\n", t.db.name, t.name)
				}
			}
		}
	}()
	stamp := randomHex(3)
	t0 := time.Now()
	if o.reuse != "" {
		return reuseSize(ctx, o, targets[0], size)
	}
	if size <= o.storeAll {
		for _, t := range targets {
			name := fmt.Sprintf("mcpbench_%d_%s_%s", size, t.name, stamp)
			if t.name == "base" && o.baseCtl != "" {
				t.db, err = createOwnDatabase(ctx, o.ownerURL, name, o.baseCtl)
			} else {
				t.db, err = createDatabase(ctx, o.ownerURL, name, nil)
			}
			if err != nil {
				return nil, err
			}
		}
		// Every note stored one by one over stdio: the store figures.
		if err := o.startWorkers(targets, "store-stdio"); err != nil {
			return nil, errors.Join(err, stopWorkers(targets))
		}
		if err := o.start(targets, "stdio", "store"); err != nil {
			return nil, errors.Join(err, stopWorkers(targets))
		}
		rs, err := timeCalls(targets, size, "stdio", "store", "", size, 0, storeCall)
		if serr := stopAll(targets); err == nil {
			err = serr
		}
		if werr := stopWorkers(targets); err == nil {
			err = werr
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
		fmt.Printf("bench: %d notes stored in %v\n", size, time.Since(t0).Round(time.Second))
		for _, t := range targets {
			// With the base as shipped, each build is made ready by its own
			// worker, started afresh (its first upkeep pass included): the
			// base cannot be made ready here (its own schema), and a build
			// made ready here, never vacuumed, was compared with a base its
			// worker had vacuumed (1,391 heap fetches of postings a lexical
			// statement against none: 1.09-1.22x "as the worker left").
			if o.baseCtl != "" && t.worker != "" {
				d, err := o.readyByWorker(ctx, t, "ready", false)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", t.name, err)
				}
				fmt.Printf("bench: %s: made ready by its worker in %v\n", t.name, d.Round(time.Millisecond))
				continue
			}
			if err := ready(ctx, t.name, t.db); err != nil {
				return nil, err
			}
		}
	} else {
		// Stored and made ready once, in a template every target gets a
		// copy of: the same entries, vectors and indexes, and the same
		// cold start (no target has the template's pages in its buffers).
		var tmpl *database
		if o.template != "" {
			if tmpl, err = openDatabase(ctx, o.ownerURL, o.template); err != nil {
				return nil, err
			}
			defer tmpl.owner.Close()
			if n, err := tmpl.count(ctx); err != nil || n < size {
				return nil, fmt.Errorf("-template %s: its org holds %d entries, fewer than %d (%v)", o.template, n, size, err)
			}
			if pending, err := tmpl.pendingJobs(ctx); err != nil || len(pending) > 0 {
				return nil, fmt.Errorf("-template %s: %d entries not made ready (a run stopped while preparing it?) (%v)", o.template, len(pending), err)
			}
		} else {
			if tmpl, err = createDatabase(ctx, o.ownerURL, fmt.Sprintf("mcpbench_%d_template_%s", size, stamp), nil); err != nil {
				return nil, err
			}
			defer func() {
				if o.keep {
					fmt.Printf("bench: kept template %s (-template %s)\n", tmpl.name, tmpl.name)
					tmpl.owner.Close()
					return
				}
				if derr := tmpl.drop(context.Background(), o.ownerURL); derr != nil {
					fmt.Printf("bench: dropping %s: %v\n", tmpl.name, derr)
				}
			}()
			if err := tmpl.bulkStore(ctx, 0, size, func(n int) {
				fmt.Printf("bench: %d of %d notes stored (%v)\n", n, size, time.Since(t0).Round(time.Second))
			}); err != nil {
				return nil, err
			}
			fmt.Printf("bench: %d notes stored in %v\n", size, time.Since(t0).Round(time.Second))
			if err := ready(ctx, "template", tmpl); err != nil {
				return nil, err
			}
		}
		t1 := time.Now()
		for _, t := range targets {
			if t.db, err = createDatabase(ctx, o.ownerURL, fmt.Sprintf("mcpbench_%d_%s_%s", size, t.name, stamp), tmpl); err != nil {
				return nil, err
			}
		}
		fmt.Printf("bench: %d copies of the template in %v; prepared in %v\n", len(targets), time.Since(t1).Round(time.Millisecond), time.Since(t0).Round(time.Second))
	}
	if o.baseVersions {
		for _, t := range targets {
			if t.name != "base" {
				continue
			}
			if err := t.db.indexAllVersions(ctx); err != nil {
				return nil, fmt.Errorf("base: %w", err)
			}
		}
	}
	first := "never-analyzed"
	if o.worker && size <= o.storeAll {
		first = "worker-left" // its upkeep ran (worker.go)
	}
	for _, state := range []string{first, "after-upkeep"} {
		if state == "after-upkeep" {
			for _, t := range targets {
				var d time.Duration
				if t.name == "base" && o.baseCtl != "" {
					d, err = o.readyByWorker(ctx, t, "upkeep", true)
				} else {
					d, err = t.db.upkeep(ctx)
				}
				if err != nil {
					return nil, err
				}
				fmt.Printf("bench: %s: Upkeep in %v\n", t.name, d.Round(time.Millisecond))
			}
		}
		for _, tr := range o.transports {
			if err := o.start(targets, tr, "search-"+state); err != nil {
				return nil, err
			}
			rs, err := timeCalls(targets, size, tr, "search", state, o.searches, 20, func(c client, i int) error { return searchCall(c, i, size) })
			if serr := stopAll(targets); err == nil {
				err = serr
			}
			if err != nil {
				return nil, err
			}
			out = append(out, rs...)
		}
	}
	// Stores timed on top: over each transport on a bulk-loaded org, over
	// HTTP on one stored over stdio.
	for _, tr := range o.transports {
		if size <= o.storeAll && tr == "stdio" {
			continue
		}
		if err := o.startWorkers(targets, "store-"+tr); err != nil {
			return nil, errors.Join(err, stopWorkers(targets))
		}
		if err := o.start(targets, tr, "store"); err != nil {
			return nil, errors.Join(err, stopWorkers(targets))
		}
		n, err := targets[0].db.count(ctx)
		if err != nil {
			return nil, errors.Join(err, stopAll(targets), stopWorkers(targets))
		}
		rs, err := timeCalls(targets, size, tr, "store", "", o.stores, 0, func(c client, i int) error { return storeCall(c, n+i) })
		if serr := stopAll(targets); err == nil {
			err = serr
		}
		if werr := stopWorkers(targets); err == nil {
			err = werr
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	printSize(size, out, targets)
	return out, nil
}

// ready makes d's entries ready (database.ready) and says so.
func ready(ctx context.Context, name string, d *database) error {
	t0 := time.Now()
	e, n, err := d.ready(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("bench: %s: %d entries embedded, %d indexed in %v; never vacuumed or analyzed\n", name, e, n, time.Since(t0).Round(time.Millisecond))
	return nil
}

// reuseSize searches a kept database as it is, then stores on it.
func reuseSize(ctx context.Context, o *options, t *target, size int) (out []*result, err error) {
	if t.db, err = openDatabase(ctx, o.ownerURL, o.reuse); err != nil {
		return nil, err
	}
	defer t.db.owner.Close()
	targets := []*target{t}
	for _, tr := range o.transports {
		if err := o.start(targets, tr, "search-reused"); err != nil {
			return nil, err
		}
		rs, err := timeCalls(targets, size, tr, "search", "reused", o.searches, 20, func(c client, i int) error { return searchCall(c, i, size) })
		if serr := stopAll(targets); err == nil {
			err = serr
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
		if err := o.start(targets, tr, "store-reused"); err != nil {
			return nil, err
		}
		n, err := t.db.count(ctx)
		if err != nil {
			return nil, err
		}
		rs, err = timeCalls(targets, size, tr, "store", "reused", o.stores, 0, func(c client, i int) error { return storeCall(c, n+i) })
		if serr := stopAll(targets); err == nil {
			err = serr
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	printSize(size, out, targets)
	return out, nil
}

func storeCall(c client, i int) error {
	title, body, tags := note(i)
	_, err := c.call("store_knowledge", map[string]any{"title": title, "body": body, "tags": tags})
	return err
}

func searchCall(c client, i, size int) error {
	// Every search asks a query of its own (the query's vector is
	// computed, not cached), about a note of the org.
	_, err := c.call("search_knowledge", map[string]any{"query": query((i*7919 + 13) % size), "limit": 10})
	return err
}
