package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/appenv/knowledgeenv"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// DefaultAdminURL is the server connection the scratch database is made
// on when TEST_DATABASE_URL is unset: the same default the tests use, so
// the harness works wherever `go tool task test` does.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

const (
	embedBatch   = 64 // entries per handler call, as a worker batch would carry
	warmUp       = 20 // untimed searches before the latency run
	nonsenseN    = 20 // nonsense queries
	nonsenseSeed = 20261123
	rrfK         = 60
)

// usageError marks a wrong command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

type config struct {
	dir                     string
	keep, analyze, json     bool
	dups                    bool
	perTermCheck            bool
	concurrency, depth      int
	limitDocs, limitQueries int
	variant, embedCache     string
	dump, export            string
	// The reranker study (rerankstudy.go).
	rerank           bool
	rerankTimed      int
	rerankDownBudget time.Duration
}

// parseArgs reads flags before and after the dataset folder, so both
// `eval --json DIR` and `task eval -- DIR --json` work.
func parseArgs(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, "usage: eval [flags] DATASET_DIR   (a BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv)")
		fs.PrintDefaults()
		fmt.Fprintln(out, "environment: TEST_DATABASE_URL (server for the scratch database, default "+DefaultAdminURL+"), EMBEDDER and EMBEDDINGS_*")
	}
	fs.BoolVar(&c.keep, "keep", false, "keep the scratch database and print its URL")
	fs.BoolVar(&c.analyze, "analyze", false, "run VACUUM ANALYZE before searching (default: statistics as on a fresh load)")
	fs.BoolVar(&c.json, "json", false, "print the report as JSON")
	fs.BoolVar(&c.dups, "dups", false, "run the duplicate study instead (store_knowledge's similar list: precision and recall on near-duplicate and distinct pairs built from the corpus)")
	fs.BoolVar(&c.perTermCheck, "per-term-check", true, "score the full-text and fused lists again reading every posting, to measure what PerTermPostings costs")
	fs.IntVar(&c.concurrency, "concurrency", 4, "concurrent stores and embedding batches")
	fs.IntVar(&c.depth, "depth", 100, "depth of each ranked list (1..1000)")
	fs.IntVar(&c.limitDocs, "limit-docs", 0, "load at most N documents, judged ones first (0: all); figures are then not comparable")
	fs.IntVar(&c.limitQueries, "limit-queries", 0, "evaluate only the first N judged queries (0: all)")
	fs.StringVar(&c.variant, "variant", "", "evaluate a variant built from the collection: "+strings.Join(Variants, ", ")+" (docs/benchmarks.md, \"Collections\")")
	fs.StringVar(&c.embedCache, "embed-cache", defaultEmbedCache(), "folder where a provider's vectors are kept between runs (\"\": none; the local embedder is never cached)")
	fs.StringVar(&c.export, "export", "", "write the collection (with --variant, the variant) to this folder in the BEIR layout and stop: to run other engines, or an earlier version of this one, on the same data")
	fs.StringVar(&c.dump, "dump", "", "write every query's candidates with their raw signals (SearchLists) to this JSON Lines file")
	fs.BoolVar(&c.rerank, "rerank", false, "also measure the reranker configured by RERANK_*: nDCG@10, recall and latency before and after it, and searches with it down (docs/benchmarks.md, \"Reranking\")")
	fs.IntVar(&c.rerankTimed, "rerank-timed", 100, "with --rerank: how many queries the latency with and without the reranker is timed on")
	fs.DurationVar(&c.rerankDownBudget, "rerank-down-budget", knowledge.DefaultRerankBudget, "with --rerank: RERANK_BUDGET of the searches timed with the reranker down")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return c, err
			}
			return c, &usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(pos) != 1:
		return c, &usageError{fmt.Sprintf("want exactly one DATASET_DIR, got %d arguments %q", len(pos), pos)}
	case c.concurrency < 1 || c.concurrency > 64:
		return c, &usageError{fmt.Sprintf("--concurrency %d: must be 1..64", c.concurrency)}
	case c.depth < 1 || c.depth > 1000:
		return c, &usageError{fmt.Sprintf("--depth %d: must be 1..1000", c.depth)}
	case c.limitDocs < 0 || c.limitQueries < 0:
		return c, &usageError{"--limit-docs and --limit-queries must not be negative"}
	case c.rerankTimed < 1 || c.rerankDownBudget <= 0:
		return c, &usageError{"--rerank-timed and --rerank-down-budget must be positive"}
	}
	c.dir = pos[0]
	return c, nil
}

// run is the testable main. Progress goes to stderr; the report alone goes
// to stdout, so --json output can be piped.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := parseArgs(args, stdout)
	if err != nil {
		return err
	}
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "eval: "+format+"\n", a...) }
	ds, variant, err := readDataset(cfg)
	if err != nil {
		return err
	}
	if cfg.export != "" {
		return ds.WriteBEIR(cfg.export)
	}
	queries := ds.Judged()
	if len(queries) == 0 {
		return errors.New("dataset: no query has a judgment in qrels/test.tsv")
	}
	rep := &Report{
		Variant: cfg.variant, Unanswerable: len(ds.Unanswerable),
		Dataset: ds.Name, Path: cfg.dir, Commit: gitCommit(ctx), Date: time.Now().UTC().Format(time.RFC3339),
		Docs: len(ds.Docs), Queries: len(queries), QueriesSkipped: len(variant.Queries) - len(variant.Judged()),
		Limited: ds != variant, Depth: cfg.depth, Concurrency: cfg.concurrency,
	}
	env, err := readSettings(getenv)
	if err != nil {
		return err
	}
	reranker, err := env.rerank.New()
	if err != nil {
		return err
	}
	if cfg.rerank && reranker == nil {
		return &usageError{errNoReranker.Error()}
	}
	emb, closeEmb, err := newEmbedder(env, cfg)
	if err != nil {
		return err
	}
	defer closeEmb()
	rep.Embedder = emb.Model()
	pool, dbName, closeDB, err := openScratch(ctx, env.adminURL, cfg.keep, rep, progress)
	if err != nil {
		return err
	}
	defer closeDB()
	if cfg.dups {
		return runDups(ctx, pool, emb, ds, cfg, env, stdout, progress)
	}
	caller, err := newCaller(ctx, pool, "eval")
	if err != nil {
		return err
	}
	opts := knowledge.Options{Embedder: emb, Config: knowledge.Config{VectorCalibration: env.calibration, QueryEmbedBudget: env.budget}}
	r := &evalRun{pool: pool, dbName: dbName, opts: opts, svc: knowledge.New(pool, opts), emb: emb, caller: caller,
		ds: ds, queries: queries, cfg: cfg, env: env, rep: rep, progress: progress}
	if cfg.rerank {
		r.reranker = reranker
	}
	if err := r.prepare(ctx); err != nil {
		return err
	}
	if err := r.measure(ctx); err != nil {
		return err
	}
	if cfg.json {
		return rep.JSON(stdout)
	}
	return rep.Text(stdout)
}

// readDataset reads the collection, the variant asked for, and its part
// (--limit-queries, --limit-docs).
func readDataset(cfg config) (ds, variant *Dataset, err error) {
	full, err := ReadBEIR(cfg.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("dataset: %w", err)
	}
	if variant, err = full.Variant(cfg.variant); err != nil {
		return nil, nil, &usageError{err.Error()}
	}
	return variant.Limit(cfg.limitQueries, cfg.limitDocs), variant, nil
}

// newEmbedder is the configured embedder, behind the cache of a
// provider's vectors (--embed-cache) when it is not the local one.
func newEmbedder(env settings, cfg config) (embed.Embedder, func(), error) {
	emb, err := embed.New(env.embedder)
	if err != nil {
		return nil, nil, err
	}
	if _, local := emb.(embed.InProcess); local || cfg.embedCache == "" {
		return emb, func() {}, nil
	}
	c, err := withCache(emb, cfg.embedCache)
	if err != nil {
		return nil, nil, fmt.Errorf("--embed-cache: %w", err)
	}
	return c, func() { c.Close() }, nil
}

// openScratch creates the run's database, migrated, and returns its pool,
// its name and the close that drops it (unless --keep: then the report
// names it).
func openScratch(ctx context.Context, adminURL string, keep bool, rep *Report, progress func(string, ...any)) (*pgxpool.Pool, string, func(), error) {
	scratch, err := createScratch(ctx, adminURL)
	if err != nil {
		return nil, "", nil, err
	}
	drop := func() {
		if keep {
			return
		}
		// Detached from ctx so an interrupted run still cleans up.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := scratch.drop(dctx); err != nil {
			progress("could not drop %s: %v", scratch.name, err)
		}
	}
	if keep {
		rep.DatabaseURL = scratch.url
	}
	pool, err := db.Open(ctx, scratch.url)
	if err != nil {
		drop()
		return nil, "", nil, err
	}
	if _, err := db.Migrate(ctx, pool); err != nil {
		pool.Close()
		drop()
		return nil, "", nil, err
	}
	return pool, scratch.name, func() { pool.Close(); drop() }, nil
}

// evalRun is one quality run over a loaded scratch database.
type evalRun struct {
	pool     *pgxpool.Pool
	dbName   string
	opts     knowledge.Options
	svc      *knowledge.Service
	emb      embed.Embedder
	caller   knowledge.Caller
	ds       *Dataset
	queries  []Query
	docOf    map[uuid.UUID]string
	cfg      config
	env      settings
	rep      *Report
	progress func(string, ...any)
	// reranker is RERANK_*'s, with --rerank (rerankstudy.go); chance is
	// it behind the cache of scores (rerankcache.go), when there is one.
	reranker rerank.Reranker
	chance   rerank.Reranker
}

// prepare stores the collection and brings it where a deployment's would
// be: indexed, embedded, with its vector index (and analysed with
// --analyze).
func (r *evalRun) prepare(ctx context.Context) error {
	ds, rep, cfg, svc, progress := r.ds, r.rep, r.cfg, r.svc, r.progress
	// The worker's maintenance of what svc searches: the indexer and the
	// vector indexes.
	maint := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{})
	progress("%s: storing %d documents into %s", ds.Name, len(ds.Docs), r.dbName)
	start := time.Now()
	docOf, refused, err := load(ctx, svc, r.caller, ds.Docs, cfg.concurrency)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	r.docOf = docOf
	rep.LoadSeconds, rep.Refused = time.Since(start).Seconds(), refused

	progress("indexing")
	start = time.Now()
	if rep.Indexed, err = maint.IndexAll(ctx); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	rep.IndexSeconds = time.Since(start).Seconds()

	progress("embedding with %s", r.emb.Model())
	start = time.Now()
	if err := embedAll(ctx, r.pool, r.emb, r.caller.OrgID, docOf, cfg.concurrency); err != nil {
		return fmt.Errorf("embed: %w", err)
	}
	rep.EmbedSeconds = time.Since(start).Seconds()
	if rep.Embeddings, err = embeddingStatus(ctx, svc, r.caller.OrgID); err != nil {
		return err
	}

	// The worker builds the model's HNSW indexes at start, so a deployment
	// searches with them; without them every search would be the exact
	// scan, and the latency below would be that scan's.
	progress("building the vector index")
	start = time.Now()
	if _, err := maint.EnsureVectorIndex(ctx); err != nil {
		return fmt.Errorf("vector index: %w", err)
	}
	rep.VectorIndexSeconds = time.Since(start).Seconds()

	if cfg.analyze {
		progress("VACUUM ANALYZE")
		if _, err := r.pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
			return err
		}
	}
	return nil
}

// measure scores the queries and fills the report's figures.
func (r *evalRun) measure(ctx context.Context) error {
	ds, queries, docOf, rep, cfg, svc, caller, pool, progress := r.ds, r.queries, r.docOf, r.rep, r.cfg, r.svc, r.caller, r.pool, r.progress
	progress("plain BM25, the reference")
	ref, err := r.reference(ctx)
	if err != nil {
		return fmt.Errorf("plain BM25: %w", err)
	}
	progress("scoring %d queries", len(queries))
	rows, bounded, noVector, err := score(ctx, svc, caller, ds, queries, docOf, cfg.depth, ref)
	if err != nil {
		return err
	}
	rep.Against = against(rows)
	if cfg.dump != "" {
		if err := dump(ds, queries, bounded, cfg.dump); err != nil {
			return fmt.Errorf("--dump: %w", err)
		}
	}
	rep.Rows, rep.NoVector = rows, noVector
	if rep.Coverage, err = coverage(ctx, svc, caller.OrgID, queries, bounded); err != nil {
		return fmt.Errorf("coverage: %w", err)
	}
	if cfg.perTermCheck {
		progress("per-term check: the same queries reading every posting")
		exactOpts := r.opts
		exactOpts.Testing.UnboundedPostings = true
		exact := knowledge.New(pool, exactOpts)
		if rep.PerTermCheck, err = perTermCheck(ctx, exact, caller, ds, queries, docOf, cfg.depth, bounded); err != nil {
			return err
		}
		if rep.PerTermCheck.Terms, err = termsOverBound(ctx, svc, caller.OrgID, queries); err != nil {
			return fmt.Errorf("terms over the bound: %w", err)
		}
	}
	progress("timing Search")
	if rep.Latency, rep.Answered, err = timeSearch(ctx, svc, caller, queries); err != nil {
		return err
	}
	if rep.Nonsense, err = nonsense(ctx, svc, caller); err != nil {
		return err
	}
	rep.Nonsense.Floor = knowledge.CalibrationFor(r.emb.Model()).Floor
	if r.env.calibration != nil {
		rep.Nonsense.Floor = r.env.calibration.Floor
	}
	progress("relevance gate: minScore 0, depth %d", gateDepth)
	if rep.Gate, err = gateStudy(ctx, svc, caller, ds, queries, docOf); err != nil {
		return err
	}
	if r.reranker != nil {
		if rep.Rerank, err = r.rerankStudy(ctx); err != nil {
			return err
		}
	}
	rep.Statistics, err = statistics(ctx, pool, cfg.analyze)
	return err
}

// reference ranks every query by plain BM25 (bm25.go) over the documents
// the run stored, analysed with the org's text search configuration.
func (r *evalRun) reference(ctx context.Context) ([][]string, error) {
	st, err := r.svc.Operations().SearchIndexStatus(ctx, r.caller.OrgID)
	if err != nil {
		return nil, err
	}
	stored := make(map[string]bool, len(r.docOf))
	for _, id := range r.docOf {
		stored[id] = true
	}
	docs := slices.DeleteFunc(slices.Clone(r.ds.Docs), func(d Doc) bool { return !stored[d.ID] })
	ref, err := NewBM25Ref(ctx, docs, pgAnalyzer(r.pool, st.TextSearchConfig))
	if err != nil {
		return nil, err
	}
	texts := make([]string, len(r.queries))
	for i, q := range r.queries {
		texts[i] = queryText(q.Text)
	}
	return ref.Rank(ctx, texts, r.cfg.depth)
}

// scratch is the throwaway database of one run.
type scratch struct{ name, url, admin string }

// createScratch creates an empty database on the admin URL's server; the
// migrations then build it exactly as production's (the tests' template
// shortcut is not used, so the harness also checks a fresh migration).
func createScratch(ctx context.Context, adminURL string) (*scratch, error) {
	u, err := url.Parse(adminURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("TEST_DATABASE_URL %q is not a URL", adminURL)
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	s := &scratch{name: "knowledge_eval_" + hex.EncodeToString(b), admin: adminURL}
	u.Path = "/" + s.name
	s.url = u.String()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("cannot reach PostgreSQL at %s (run `go tool task setup`): %w", adminURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{s.name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	return s, nil
}

func (s *scratch) drop(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.name}.Sanitize()+" WITH (FORCE)")
	return err
}

// newCaller makes the one org and agent every document is stored by.
func newCaller(ctx context.Context, pool *pgxpool.Pool, name string) (knowledge.Caller, error) {
	t := tenancy.New(pool)
	org, err := t.CreateOrg(ctx, name)
	if err != nil {
		return knowledge.Caller{}, err
	}
	agent, err := t.CreateAgent(ctx, org.ID, "eval")
	if err != nil {
		return knowledge.Caller{}, err
	}
	return knowledge.Caller{OrgID: org.ID, AgentID: agent.ID}, nil
}

// storeInput maps a document to what an agent would store: the title (or
// the start of the text when there is none) and the text as the body, both
// cut to the product's limits. A document without text gets its title as
// body, since Store refuses a blank body.
func storeInput(d Doc) knowledge.StoreInput {
	title := cmp.Or(strings.TrimSpace(d.Title), strings.TrimSpace(d.Text))
	body := d.Text
	if strings.TrimSpace(body) == "" {
		body = d.Title
	}
	return knowledge.StoreInput{Title: cut(title, knowledge.MaxTitleChars), Body: cut(body, knowledge.MaxBodyChars)}
}

// cut keeps the first n runes of s.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// load stores every document through Service.Store and returns entry id ->
// doc id. A document Store refuses (invalid argument) is counted, not
// fatal; any other error ends the run.
func load(ctx context.Context, svc *knowledge.Service, c knowledge.Caller, docs []Doc, concurrency int) (map[uuid.UUID]string, int, error) {
	ids := make([]uuid.UUID, len(docs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, d := range docs {
		g.Go(func() error {
			r, err := svc.Store(gctx, c, storeInput(d))
			if errors.Is(err, errs.ErrInvalidArgument) {
				fmt.Fprintf(os.Stderr, "eval: document %s refused: %v\n", d.ID, err)
				return nil
			}
			if err != nil {
				return fmt.Errorf("document %s: %w", d.ID, err)
			}
			ids[i] = r.ID
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	docOf := make(map[uuid.UUID]string, len(docs))
	for i, id := range ids {
		if id != uuid.Nil {
			docOf[id] = docs[i].ID
		}
	}
	return docOf, len(docs) - len(docOf), nil
}

// embedAll does what the embeddings worker does for a fresh load: the
// real handler, batches of 64 jobs. Stored entries are at generation 1.
func embedAll(ctx context.Context, pool *pgxpool.Pool, emb embed.Embedder, org uuid.UUID, docOf map[uuid.UUID]string, concurrency int) error {
	h := jobs.NewEmbedHandler(pool, emb, jobs.HandlerOptions{})
	all := make([]knowledge.EmbeddingJob, 0, len(docOf))
	for id := range docOf {
		all = append(all, knowledge.EmbeddingJob{OrgID: org, EntryID: id, Generation: 1})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for batch := range slices.Chunk(all, embedBatch) {
		g.Go(func() error { return h.Process(gctx, batch) })
	}
	return g.Wait()
}

// embeddingStatus counts the org's entries by embedding status, so a run
// whose vectors did not all arrive says so next to its figures.
func embeddingStatus(ctx context.Context, svc *knowledge.Service, org uuid.UUID) (map[string]int, error) {
	st, err := svc.Operations().Stats(ctx, org, 0)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for status, n := range map[string]int64{"pending": st.Embeddings.Pending, "ready": st.Embeddings.Ready, "failed": st.Embeddings.Failed} {
		if n > 0 { // as a count by status: the statuses no entry has are left out
			out[status] = int(n)
		}
	}
	return out, nil
}

// queryText makes a dataset query acceptable to Search, which refuses
// queries above MaxQueryChars.
func queryText(q string) string { return cut(q, knowledge.MaxQueryChars) }

// The rows of the product's lists (score).
const (
	rowFused    = "fused (product)"
	rowVector   = "vector"
	rowFullText = "full text"
	rowTitle    = "title"
)

// docLists is one query's answer from SearchLists with every list as
// corpus doc ids, the form the metrics and comparisons take.
type docLists struct {
	Fused, Vector, FullText, Title []string
	// Scores are the fused scores, in the order of Fused.
	Scores []float64
	// Searched is false for a blank query, which Search refuses: it is
	// scored as answered with nothing.
	Searched, VectorSearch bool
	// Candidates and QueryIDF are what fusion was given (--dump).
	Candidates []DumpCandidate
	QueryIDF   knowledge.QueryIDF
}

// searchLists runs SearchLists for one query and maps entry ids to the
// corpus ids they were stored from.
func searchLists(ctx context.Context, svc *knowledge.Service, c knowledge.Caller, in knowledge.SearchInput, depth int, docOf map[uuid.UUID]string) (docLists, error) {
	if strings.TrimSpace(in.Query) == "" {
		return docLists{}, nil
	}
	in.Query = queryText(in.Query)
	l, err := knowledge.SearchLists(ctx, svc, c, in, depth)
	if err != nil {
		return docLists{}, err
	}
	docs := func(hits []knowledge.ListHit) []string {
		out := make([]string, len(hits))
		for i, h := range hits {
			// An entry not from the corpus cannot be judged; its uuid keeps its place.
			out[i] = cmp.Or(docOf[h.ID], h.ID.String())
		}
		return out
	}
	scores := make([]float64, len(l.Fused))
	for i, h := range l.Fused {
		scores[i] = h.Score
	}
	cands := make([]DumpCandidate, len(l.Candidates))
	for i, c := range l.Candidates {
		cands[i] = DumpCandidate{Doc: cmp.Or(docOf[c.ID], c.ID.String()), Candidate: c}
	}
	return docLists{
		Fused: docs(l.Fused), Vector: docs(l.Vector), FullText: docs(l.FullText), Title: docs(l.Title),
		Scores: scores, Searched: true, VectorSearch: l.VectorSearch, Candidates: cands, QueryIDF: l.QueryIDF,
	}, nil
}

// score runs SearchLists for every judged query and scores the four lists
// of the product, a plain RRF of its three base lists and the reference,
// plain BM25 (ref[i] is queries[i]'s ranking). It also returns
// each query's lists, in the order of queries, for the comparisons that
// follow (the per-term check).
func score(ctx context.Context, svc *knowledge.Service, c knowledge.Caller, ds *Dataset, queries []Query, docOf map[uuid.UUID]string, depth int, ref [][]string) ([]Row, []docLists, int, error) {
	rows := []Row{{Name: rowFused}, {Name: rowVector}, {Name: rowFullText}, {Name: rowTitle}, {Name: fmt.Sprintf("plain RRF (k=%d)", rrfK)}, {Name: rowBM25}}
	all := make([]docLists, len(queries))
	noVector := 0
	for qi, q := range queries {
		l, err := searchLists(ctx, svc, c, knowledge.SearchInput{Query: q.Text}, depth, docOf)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("query %s: %w", q.ID, err)
		}
		if l.Searched && !l.VectorSearch {
			noVector++
		}
		all[qi] = l
		if ds.Unanswerable[q.ID] {
			continue // nothing to find: the score study looks at these
		}
		rrf := RRF(rrfK, l.Vector, l.FullText, l.Title)
		for i, r := range [][]string{l.Fused, l.Vector, l.FullText, l.Title, rrf[:min(depth, len(rrf))], ref[qi]} {
			rows[i].Add(r, ds.Qrels[q.ID])
		}
	}
	for i := range rows {
		rows[i].Mean()
	}
	return rows, all, noVector, nil
}

// timeSearch times the agent-facing call with default options, once per
// query, after a warm-up, and counts the queries it answered.
func timeSearch(ctx context.Context, svc *knowledge.Service, c knowledge.Caller, queries []Query) (Latency, int, error) {
	var texts []string
	for _, q := range queries {
		if strings.TrimSpace(q.Text) != "" {
			texts = append(texts, queryText(q.Text))
		}
	}
	for i := range min(warmUp, len(texts)) {
		if _, err := svc.Search(ctx, c, knowledge.SearchInput{Query: texts[i]}); err != nil {
			return Latency{}, 0, err
		}
	}
	lat := make([]time.Duration, 0, len(texts))
	answered := 0
	for _, q := range texts {
		start := time.Now()
		res, err := svc.Search(ctx, c, knowledge.SearchInput{Query: q})
		if err != nil {
			return Latency{}, 0, fmt.Errorf("search %q: %w", q, err)
		}
		lat = append(lat, time.Since(start))
		if len(res.Hits) > 0 {
			answered++
		}
	}
	return Percentiles(lat), answered, nil
}

// NonsenseQueries returns n queries of 2-3 made-up words, the same on
// every run (fixed seed), so "answered" counts are comparable across runs.
func NonsenseQueries(n int, seed uint64) []string {
	r := mrand.New(mrand.NewPCG(seed, seed))
	out := make([]string, n)
	for i := range out {
		words := make([]string, 2+r.IntN(2))
		for w := range words {
			b := make([]byte, 4+r.IntN(7))
			for k := range b {
				b[k] = byte('a' + r.IntN(26))
			}
			words[w] = string(b)
		}
		out[i] = strings.Join(words, " ")
	}
	return out
}

// nonsense runs the nonsense queries through Search with default options:
// a relevance gate should answer them with nothing.
func nonsense(ctx context.Context, svc *knowledge.Service, c knowledge.Caller) (NonsenseResult, error) {
	res := NonsenseResult{Queries: nonsenseN}
	for _, q := range NonsenseQueries(nonsenseN, nonsenseSeed) {
		r, err := svc.Search(ctx, c, knowledge.SearchInput{Query: q})
		if err != nil {
			return res, fmt.Errorf("search %q: %w", q, err)
		}
		if len(r.Hits) > 0 {
			res.Answered++
			res.AnsweredQueries = append(res.AnsweredQueries, q)
		}
		// The raw vector list, before the calibration's floor: the best
		// cosine a query about nothing reaches is what the floor must clear.
		l, err := knowledge.SearchLists(ctx, svc, c, knowledge.SearchInput{Query: q}, 1)
		if err != nil {
			return res, fmt.Errorf("lists %q: %w", q, err)
		}
		if len(l.Vector) > 0 {
			res.MaxCosine = max(res.MaxCosine, l.Vector[0].Score)
		}
	}
	return res, nil
}

// statistics says whether the planner had table statistics, read after
// the measurements: autovacuum may analyse a freshly loaded table while
// the run goes on, which changes plans.
func statistics(ctx context.Context, pool *pgxpool.Pool, analyzed bool) (string, error) {
	if analyzed {
		return "VACUUM ANALYZE before searching (--analyze)", nil
	}
	rows, err := pool.Query(ctx, `SELECT relname FROM pg_stat_user_tables
		WHERE last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL ORDER BY relname`)
	if err != nil {
		return "", err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "never analyzed (as after a fresh load)", nil
	}
	return "not analyzed by the harness, but autovacuum analyzed " + strings.Join(names, ", ") + " during the run", nil
}

// gitCommit names the code measured; "unknown" outside a git checkout. A
// tree with uncommitted changes is marked, since the commit alone would
// then name code that was not the code measured.
func gitCommit(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		commit += " + uncommitted changes"
	}
	return commit
}

// defaultEmbedCache is --embed-cache's default: the user's cache folder.
func defaultEmbedCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "knowledge-eval")
}

// settings is eval's environment, read as the apps read theirs
// (knowledgeenv): every bad variable is named at once.
type settings struct {
	adminURL string       // TEST_DATABASE_URL
	embedder embed.Config // EMBEDDER, EMBEDDINGS_*
	// calibration is the operator's calibration of the model, if set
	// (SEARCH_COSINE_FLOOR, SEARCH_COSINE_FULL): the run then measures
	// the deployment's scoring.
	calibration *knowledge.VectorCalibration
	// budget is how long a search or a duplicate check waits for its
	// vector (SEARCH_EMBED_BUDGET; 0: the product's default). A study of
	// quality on a busy provider sets it high, so that every query has
	// its vector (the report counts those without).
	budget time.Duration
	// rerank is RERANK_* (knowledgeenv.Reranker), for --rerank.
	rerank knowledgeenv.Rerank
}

func readSettings(getenv func(string) string) (settings, error) {
	e := appenv.New(getenv)
	s := settings{
		adminURL:    e.String("TEST_DATABASE_URL", DefaultAdminURL),
		embedder:    knowledgeenv.Embedder(e),
		calibration: knowledgeenv.VectorCalibration(e),
		budget:      knowledgeenv.QueryEmbedBudget(e),
		rerank:      knowledgeenv.Reranker(e),
	}
	return s, e.Err()
}
