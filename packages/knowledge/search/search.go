package search

import (
	"context"
	_ "embed"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
	"golang.org/x/sync/errgroup"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rank"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/vecspace"
)

// Search runs the hybrid search (search_knowledge): three ranked lists
// (vector, full text, title), each within the caller's org and the filters,
// fused by evidence-weighted RRF (rrf.go). Two ranking statements, the
// lexical lists' and the vector list's, run at once on two connections or
// one after the other (rank); then one query reads the bodies of the hits
// answered, for their snippets, and the documents of those that are
// sections.
//
// The pipeline, in order: the filters' matches (filtersearch.go), the
// ranked lists and their fusion (rank), the cut at the limit, the hops
// over relations (hops.go), the bodies, snippets and hits' documents in one
// read (hitbodies.go), the token budget (domain.FitSearch).
// With a reranker (rerank.go), the fused top candidates are reranked
// between the fusion and the cut, and the hops and the budget apply to
// its order; the answer says whether it was (Reranked, RerankReason).
//
// The query vector comes from the Embedder, through a cache (queryvec.go).
// If it cannot be made (error, wrong width) or not within the budget, the
// answer comes from the two lexical lists, with VectorSearch false and a
// Notice saying why: a degraded answer beats none.
func (s *Searcher) Search(ctx context.Context, c domain.Caller, in domain.SearchInput) (_ *domain.SearchResult, err error) {
	defer data.WrapOp(&err, "knowledge.Search")
	if n := s.servedByNext(ctx, c.OrgID); n != nil {
		return n.Search(ctx, c, in) // the org has cut over to the next model
	}
	began := time.Now()
	a, err := domain.ValidateSearch(c, in, s.opts.Now())
	if err != nil {
		return nil, err
	}
	r, err := s.rank(ctx, c, a, rank.Depth(a.Limit))
	if err != nil {
		return nil, err
	}
	skipped, bodies, err := s.rerank(ctx, c.OrgID, a, r, began)
	if err != nil {
		return nil, err
	}
	hits := r.hits
	if len(hits) > a.Limit {
		hits = hits[:a.Limit]
	}
	added, err := s.expand(ctx, c, a, hits)
	if err != nil {
		return nil, err
	}
	hits = mergeHits(hits, added)
	if bodies, err = s.bodies(ctx, c.OrgID, hits, r.vec, bodies); err != nil {
		return nil, err
	}
	res := &domain.SearchResult{Hits: make([]domain.Hit, 0, len(hits)), VectorSearch: r.vectorSearch, Notice: r.notice,
		Reranked: skipped == "", RerankReason: skipped}
	for _, h := range hits {
		b := bodies[h.ID]
		hit := h.hit(b.snippet(h, a.Query), b.fields)
		hit.Document = b.doc // read with the body
		res.Hits = append(res.Hits, hit)
	}
	domain.FitSearch(res, a.MaxTokens)
	return res, nil
}

// ranked is the inside of one search: every candidate with its metadata and
// signals, and the fused, gated ranking.
type ranked struct {
	rows         []candidateRow
	hits         []rankedHit
	vectorSearch bool
	notice       string
	vec          *pgvector.Vector // the query's, nil without vector search
	mass         QueryIDF
}

// candidateRow is one row of sql/search_candidates.sql.
type candidateRow struct {
	Candidate
	QueryIdfBody, QueryIdfTitle float64
	QueryTerms                  int     // the query's body terms looked up (lexical statement)
	OrgDocs                     float64 // the org's indexed entries (lexical statement)
	Title                       string
	Tags                        []string
	Confidence                  int16
	CreatedAt                   time.Time
	ExpiresAt                   *time.Time
	HeadID                      *uuid.UUID
	EmbeddingStatus             string
}

type rankedHit struct {
	fusedHit
	row *candidateRow
	via *domain.Via // set on an entry added by hops (hops.go)
}

func (h rankedHit) hit(snippet string, f entryFields) domain.Hit {
	r := h.row
	out := domain.Hit{
		Source: f.Source, Kind: f.Kind, Metadata: f.Metadata,
		ID: h.ID, Title: r.Title, Snippet: snippet, Score: h.Score,
		Tags: domain.NonNil(r.Tags), Confidence: int(r.Confidence), CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		Superseded: r.HeadID != nil, HeadID: r.HeadID, EmbeddingStatus: r.EmbeddingStatus,
		VectorRank: h.VectorRank, FullTextRank: h.FullTextRank, TitleRank: h.TitleRank, RerankRank: h.RerankRank, Via: h.via,
	}
	if h.RerankRank > 0 {
		out.Signals.Rerank = ptr(h.Rerank)
	}
	if h.VectorRank > 0 {
		out.Signals.Cosine = ptr(h.Cosine)
	}
	if h.FullTextRank > 0 {
		out.Signals.BM25 = ptr(h.BM25)
	}
	if h.TitleRank > 0 {
		out.Signals.TitleBM25 = ptr(h.TitleBM25)
		out.Signals.TitleContains = h.TitleContains
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// vecArg is a query vector as a statement argument: the vector itself, for
// pgvector's binary codec (a *pgvector.Vector is a driver.Valuer, which pgx
// prefers over dereferencing it: the vector went out as text, was parsed
// back and encoded again, 0.1 ms of CPU a statement), or NULL.
func vecArg(vec *pgvector.Vector) any {
	if vec == nil {
		return nil
	}
	return *vec
}

//go:embed sql/search_candidates.sql
var searchCandidatesSQL string

// searchCandidatesStmt is searchCandidatesSQL made positional once (pgbatch.Named).
var searchCandidatesStmt = pgbatch.NewNamed(searchCandidatesSQL)

//go:embed sql/search_vector.sql
var searchVectorSQL string

// vectorStmt is the vector list's statement for one embedding space: the
// template sql/search_vector.sql with the space's cast, width and model
// written in as literals, so that a plan made once per connection can use
// the space's partial HNSW indexes. A Searcher holds one for its embedder.
func vectorStmt(sp vecspace.Space) *pgbatch.Named {
	typ, _ := sp.Cast()
	return pgbatch.NewNamed(strings.NewReplacer(
		"{{cast}}", typ, "{{dims}}", strconv.Itoa(sp.Dims), "{{model}}", vecspace.QuoteLiteral(sp.Model),
	).Replace(searchVectorSQL))
}

// Bounds of the lexical lists (docs/knowledge.md, "Search").
const (
	// PerTermPostings is how many postings of one query term are read, best
	// (highest term weight) first. A term held by fewer entries is read
	// whole, so rare terms are exact; a common term's idf makes it a small
	// part of any score. apps/eval compares against an unbounded read.
	PerTermPostings = 1000
	// MinTermPostings is the least a query term is read: terms are read
	// PerTermPostings deep scaled by their idf relative to the query's most
	// informative term (sql/search_candidates.sql, picked), down to this.
	MinTermPostings = 300
	// TailEntries bounds the queued (not yet indexed) entries scored on the
	// fly: normally a second's worth of stores; if the indexer is stopped,
	// the newest TailEntries stay findable by words.
	TailEntries = 500
	// MaxQueryTerms keeps a long query's most informative terms.
	MaxQueryTerms = 32
	// minContainsChars: shorter queries have no trigram to look up, and a
	// one- or two-letter substring of a title is no evidence anyway.
	minContainsChars = 3
	// The title substring test (sql/search_candidates.sql, contains) runs
	// on the containsChecked best titles by BM25.
	containsChecked = 50
	// The vector plan (see tableDocsCache). An org with an HNSW index of
	// its own (built by Upkeep) uses it. Otherwise: an exact scan of the org
	// costs ~1.3 us an entry (vectors stored inline); the shared HNSW index
	// filters by org while it walks, ~10 us a visit, and visits about
	// 9 * candidates * table / docs entries (measured at 1M entries: 3,500
	// visits to keep 40 of a 10% org, not the ~400 a uniform spread would
	// take). HNSW wins when docs^2 >= hnswCostRatio * table * candidates:
	// for 40 candidates, an org alone in its table from ~1,700 entries, in
	// a 1M-entry table from ~53,000 (smaller orgs get their own index
	// sooner, from OrgVectorIndexMinDocs).
	hnswMinDocs   = 1000
	hnswCostRatio = 70
	// asOfWiden: an asOf search asks the vector functions for this many
	// times the candidates (their filters are of today) and keeps those
	// the org knew then. Entries stored or superseded since the asOf time
	// take places among the nearest; past this many, the vector list of
	// an asOf search is shorter than a search of today's.
	asOfWiden = 4
)

// The lists of a search: the lexical ones are sql/search_candidates.sql's
// @lists; listVector is sql/search_vector.sql.
const (

	// fanOutConns is what a fanned-out search holds at once.
	fanOutConns = 2
)

// rank runs the ranking statements and fuses their rows, each list depth
// deep, after reading the filters' matches first when few entries pass
// them (filtersearch.go): the lexical statement (sql/search_candidates.sql), whose two lists
// share the org's statistics, the query's terms and the postings' scores,
// and the vector statement (sql/search_vector.sql, of the Searcher's
// embedding space).
//
// On an idle pool the two run at once, on two connections (a search is
// latency-bound, not throughput-bound, until the pool is busy), with the
// query embedded while the lexical statement runs. Three statements (a
// list each) were 0.5-0.8 ms slower on two cores, at 5,000 and 100,000
// entries (docs/benchmarks.md, "Why search is built so"): the title list
// recomputed what the full-text list had. When the pool is busy, or with
// SerialSearch, they run one after the other, which holds one connection
// at a time.
func (s *Searcher) rank(ctx context.Context, c domain.Caller, a *domain.SearchArgs, depth int) (*ranked, error) {
	minScore := DefaultMinScore
	if a.MinScore != nil {
		minScore = *a.MinScore
	}
	tableDocs, err := s.tableDocs.get(ctx, s.q.SearchTableDocs, s.log())
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	if err := s.searchMatches(ctx, c.OrgID, a); err != nil {
		return nil, err
	}
	run := func(ctx context.Context, lists int, vec *pgvector.Vector) ([]candidateRow, error) {
		return s.candidates(ctx, s.pool, c, a, depth, tableDocs, lists, vec)
	}
	var (
		cands  []candidateRow
		vec    *pgvector.Vector
		notice string
		parts  [2][]candidateRow
	)
	// The mode's lists only (a.Lists): a lexical search embeds no query.
	lexical := func(ctx context.Context) (err error) {
		if a.Lists&domain.ListsLexical != 0 {
			parts[0], err = run(ctx, a.Lists&domain.ListsLexical, nil)
		}
		return err
	}
	vector := func(ctx context.Context) (err error) {
		if a.Lists&domain.ListVector == 0 {
			return nil
		}
		if vec, notice = s.queryVector(ctx, a.Query); vec == nil {
			if a.Lists&domain.ListsLexical == 0 {
				// Semantic mode has no lexical lists to fall back on.
				notice = strings.TrimSuffix(notice, lexicalFallback) + "; mode " + domain.ModeSemantic + " searches by meaning only, so there are no hits"
			}
			return nil
		}
		parts[1], err = run(ctx, domain.ListVector, vec)
		return err
	}
	if s.fanOut() && a.Lists&domain.ListsLexical != 0 && a.Lists&domain.ListVector != 0 {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return lexical(gctx) })
		g.Go(func() error { return vector(gctx) })
		if err := g.Wait(); err != nil {
			return nil, err
		}
	} else {
		if err := lexical(ctx); err != nil {
			return nil, err
		}
		if err := vector(ctx); err != nil {
			return nil, err
		}
	}
	cands = mergeCandidates(parts[:]...)
	out := &ranked{rows: cands, vectorSearch: vec != nil, notice: notice, vec: vec}
	if len(cands) == 0 {
		return out, nil
	}
	byID := make(map[uuid.UUID]*candidateRow, len(cands))
	plain := make([]Candidate, len(cands))
	for i := range cands {
		byID[cands[i].ID] = &cands[i]
		plain[i] = cands[i].Candidate
		out.mass.Body = max(out.mass.Body, cands[i].QueryIdfBody)
		out.mass.Title = max(out.mass.Title, cands[i].QueryIdfTitle)
		out.mass.OrgDocs = max(out.mass.OrgDocs, cands[i].OrgDocs)
		out.mass.Terms = max(out.mass.Terms, cands[i].QueryTerms)
	}
	fuse := rank.Fuse
	if a.Lists == domain.ListVector {
		fuse = rank.FuseByMeaning // semantic mode: no crowd floor (rank.FuseByMeaning says why)
	}
	for _, h := range fuse(plain, out.mass, *s.opts.VectorCalibration, minScore) {
		out.hits = append(out.hits, rankedHit{fusedHit: h, row: byID[h.ID]})
	}
	return out, nil
}

// fanOut says whether a search may hold fanOutConns connections now. The
// pool's count is read without a lock, so two searches may both fan out
// on the last spare connections; the later one then waits for a
// connection, as any query does when the pool is full.
func (s *Searcher) fanOut() bool {
	if s.opts.SerialSearch {
		return false
	}
	st := s.pool.Stat()
	return st.MaxConns()-st.AcquiredConns() >= fanOutConns
}

// candidates runs the ranking statement of lists on db (the pool, or one
// connection): the vector list's (listVector), planned with its scans
// pinned (SearchConfig), or the lexical one for the lexical lists asked.
func (s *Searcher) candidates(ctx context.Context, db pgbatch.Sender, c domain.Caller, a *domain.SearchArgs, depth int, tableDocs int64, lists int, vec *pgvector.Vector) ([]candidateRow, error) {
	stmt, pin := searchCandidatesStmt, false
	if lists == domain.ListVector {
		stmt, pin = s.vecStmt, true
	}
	args := s.candidateArgs(c, a, depth, tableDocs, lists, vec)
	if db == pgbatch.Sender(s.pool) {
		rows, ok, err := s.data.OnWorker(ctx, stmt, c.OrgID, searchSettings(a.EfSearch, pin), args)
		if ok {
			return collectCandidates(rows, err)
		}
		if err != nil {
			return nil, data.MapErr(err, "")
		}
	}
	p := pgbatch.New(db)
	// Queued, not sent: it goes in the same batch as the search below.
	if err := sqlc.New(p).SearchConfig(ctx, sqlc.SearchConfigParams{EfSearch: strconv.Itoa(a.EfSearch), PinVectorPlan: pin}); err != nil {
		return nil, data.MapErr(err, "")
	}
	return collectCandidates(stmt.Query(ctx, p, args))
}

// Neighbour is an entry near a vector (VectorNeighbours).
type Neighbour struct {
	ID     uuid.UUID
	Title  string
	Cosine float64
}

// VectorNeighbours lists the org's head, unexpired entries nearest to vec,
// n at most, nearest first, found as the vector list finds them
// (sql/search_vector.sql, same plans): the duplicate check of a store
// compares a new text with them. Its errors are the statement's, unmapped
// (the check logs them and answers without).
func (s *Searcher) VectorNeighbours(ctx context.Context, org uuid.UUID, vec []float32, n int) ([]Neighbour, error) {
	tableDocs, err := s.tableDocs.get(ctx, s.q.SearchTableDocs, s.log())
	if err != nil {
		return nil, err
	}
	a := &domain.SearchArgs{Tags: []string{}, EfSearch: domain.DefaultEfSearch}
	pv := pgvector.NewVector(vec)
	args := s.candidateArgs(domain.Caller{OrgID: org}, a, n, tableDocs, domain.ListVector, &pv)
	rows, ok, err := s.data.OnWorker(ctx, s.vecStmt, org, searchSettings(a.EfSearch, true), args)
	if !ok && err == nil {
		p := pgbatch.New(s.pool)
		if err := sqlc.New(p).SearchConfig(ctx, sqlc.SearchConfigParams{EfSearch: strconv.Itoa(a.EfSearch), PinVectorPlan: true}); err != nil {
			return nil, err
		}
		rows, err = s.vecStmt.Query(ctx, p, args)
	}
	if err != nil {
		return nil, err
	}
	cands, err := pgx.CollectRows(rows, scanCandidate)
	if err != nil {
		return nil, err
	}
	out := make([]Neighbour, len(cands))
	for i, c := range cands {
		out[i] = Neighbour{ID: c.ID, Title: c.Title, Cosine: c.Cosine}
	}
	return out, nil
}

// collectCandidates reads the rows of a ranking statement.
func collectCandidates(rows pgx.Rows, err error) ([]candidateRow, error) {
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	cands, err := pgx.CollectRows(rows, scanCandidate)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	return cands, nil
}

// scanCandidate reads a row of either ranking statement (same columns).
func scanCandidate(row pgx.CollectableRow) (candidateRow, error) {
	var r candidateRow
	err := row.Scan(&r.ID, &r.VectorRank, &r.Cosine, &r.FullTextRank, &r.BM25, &r.TitleRank, &r.TitleBM25,
		&r.TitleContains, &r.Coverage, &r.TitleCoverage, &r.QueryIdfBody, &r.QueryIdfTitle, &r.QueryTerms, &r.OrgDocs,
		&r.Title, &r.Tags, &r.Confidence, &r.CreatedAt, &r.ExpiresAt, &r.HeadID, &r.EmbeddingStatus)
	return r, err
}

// candidateArgs are the arguments of both ranking statements
// (sql/search_candidates.sql, sql/search_vector.sql); each uses its own.
func (s *Searcher) candidateArgs(c domain.Caller, a *domain.SearchArgs, depth int, tableDocs int64, lists int, vec *pgvector.Vector) pgx.NamedArgs {
	sp := vecspace.Of(s.opts.Embedder)
	// The vector plans' own filters are of today: an asOf search asks them
	// for everything, asOfWiden times as many (sql/search_vector.sql).
	wideN := depth
	if a.AsOf != nil {
		wideN *= asOfWiden
	}
	return pgx.NamedArgs{
		"vector_index":       sp.IndexName(),
		"org_vector_index":   sp.OrgIndexName(c.OrgID),
		"pair_index_prefix":  sp.PairIndexPrefix(),
		"lists":              lists,
		"org_id":             c.OrgID,
		"default_config":     s.opts.TextSearchConfig,
		"query":              a.Query,
		"query_vec":          vecArg(vec),
		"model":              s.opts.Embedder.Model(),
		"tags":               a.Tags,
		"include_superseded": a.IncludeSuperseded,
		"include_expired":    a.IncludeExpired,
		"as_of":              a.AsOf,
		"wide_superseded":    a.IncludeSuperseded || a.AsOf != nil,
		"wide_expired":       a.IncludeExpired || a.AsOf != nil,
		"wide_n":             wideN,
		"candidates":         depth,
		"per_term":           s.perTerm(PerTermPostings),
		"min_per_term":       s.perTerm(MinTermPostings),
		"tail":               TailEntries,
		"max_terms":          MaxQueryTerms,
		"k1":                 BM25K1,
		"b":                  BM25B,
		"title_pattern":      LikePattern(a.Query),
		"use_contains":       utf8.RuneCountInString(a.Query) >= minContainsChars,
		"contains_checked":   containsChecked,
		"hnsw_min_docs":      hnswMinDocs,
		"hnsw_cost_ratio":    hnswCostRatio,
		"table_docs":         tableDocs,
		"kind":               a.Filters.Kind,
		"source":             a.Filters.Source,
		"source_prefix":      a.Filters.SourcePrefix,
		"metadata":           a.Filters.Metadata,
		"by_ids":             a.Within.ByIDs,
		"ids_of_metadata":    a.Within.OfMetadata,
		"ids":                domain.NonNil(a.Within.Ids),
		"match_max":          a.Within.MetadataMax,
	}
}

// mergeCandidates joins the rows of lists run apart into one row per entry,
// as the single statement gives them: each run fills its own list's rank
// and signal, and the entry's columns are the same in every run.
func mergeCandidates(parts ...[]candidateRow) []candidateRow {
	var out []candidateRow
	at := map[uuid.UUID]int{}
	for _, part := range parts {
		for _, r := range part {
			i, ok := at[r.ID]
			if !ok {
				at[r.ID] = len(out)
				out = append(out, r)
				continue
			}
			m := &out[i]
			if r.VectorRank > 0 {
				m.VectorRank, m.Cosine = r.VectorRank, r.Cosine
			}
			if r.FullTextRank > 0 {
				m.FullTextRank, m.BM25, m.Coverage = r.FullTextRank, r.BM25, r.Coverage
			}
			if r.TitleRank > 0 {
				m.TitleRank, m.TitleBM25, m.TitleContains, m.TitleCoverage = r.TitleRank, r.TitleBM25, r.TitleContains, r.TitleCoverage
			}
			m.QueryIdfBody = max(m.QueryIdfBody, r.QueryIdfBody)
			m.QueryIdfTitle = max(m.QueryIdfTitle, r.QueryIdfTitle)
			m.OrgDocs = max(m.OrgDocs, r.OrgDocs)
			m.QueryTerms = max(m.QueryTerms, r.QueryTerms)
		}
	}
	return out
}

// perTerm is n, or the unbounded read an evaluation asks for.
func (s *Searcher) perTerm(n int) int {
	if s.opts.UnboundedPostings {
		return math.MaxInt32
	}
	return n
}

// tableDocsCache holds the number of indexed entries of all orgs, read at
// most every tableDocsTTL. With the org's own count (read by the search
// statement) it picks the vector plan: the HNSW scan visits about
// table/org entries per hit it keeps, so for an org that is a small share
// of the table an exact scan of the org is cheaper, and for a large org the
// exact scan reads too much. Neither choice is left to the planner, whose
// statistics may be missing (docs/knowledge.md).
//
// The count reads every org's rows: on a Citus cluster every worker. One
// that does not answer must not fail the search of an org on another, nor
// hold the others: while a count is under way the other searches use the
// count held; a count that fails keeps the last one read; before any, a
// table so large that every org is a small share of it (the exact scan:
// slower for a large org, never missing a hit). A failed count is tried
// again after tableDocsRetry.
type tableDocsCache struct {
	mu       sync.Mutex
	n        int64
	read     time.Time // when n was read, or when a failed count is next tried less tableDocsTTL
	known    bool      // n was read at least once
	counting bool      // a count is under way
}

const (
	tableDocsTTL   = 30 * time.Second
	tableDocsRetry = 5 * time.Second
	// unknownTableDocs stands for the count before any was read.
	unknownTableDocs = int64(1) << 40
)

// get is the count, read by count (by this caller, the others meanwhile
// using the count held) when the one held is older than tableDocsTTL. It
// fails only when ctx has ended during its own count.
func (t *tableDocsCache) get(ctx context.Context, count func(context.Context) (int64, error), log *slog.Logger) (int64, error) {
	t.mu.Lock()
	// Wall time, not the service's clock: the cache's age is how long
	// ago the table was counted.
	if (!t.read.IsZero() && time.Since(t.read) < tableDocsTTL) || t.counting {
		n := t.held()
		t.mu.Unlock()
		return n, nil
	}
	t.counting = true
	t.mu.Unlock()
	n, err := count(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.counting = false
	if err != nil {
		if ctx.Err() != nil {
			return 0, err
		}
		t.read = time.Now().Add(tableDocsRetry - tableDocsTTL)
		log.Warn("knowledge: counting every org's entries for the vector plan failed; searching with the count held",
			"count", t.held(), "retry", tableDocsRetry, "err", err)
		return t.held(), nil
	}
	t.n, t.read, t.known = n, time.Now(), true
	return n, nil
}

// held is the count to use now: the last one read, or unknownTableDocs.
func (t *tableDocsCache) held() int64 {
	if !t.known {
		return unknownTableDocs
	}
	return t.n
}

// LikePattern is the ILIKE pattern matching query anywhere, with the
// query's own %, _ and \ matching literally (\ is ILIKE's default escape).
func LikePattern(query string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(query) + "%"
}
