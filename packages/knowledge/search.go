package knowledge

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Search runs the hybrid search (search_knowledge): three ranked lists
// (vector, full text, title), each within the caller's org and the filters,
// fused by RRF (k = 60) in SQL, in one round trip to Postgres.
//
// The query vector comes from the Embedder. If it cannot be made (error,
// timeout, wrong width), the answer comes from the two lexical lists, with
// VectorSearch false and a Notice saying why: a degraded answer beats none.
func (s *Service) Search(ctx context.Context, c Caller, in SearchInput) (*SearchResult, error) {
	a, err := validateSearch(c, in)
	if err != nil {
		return nil, err
	}
	vec, notice := s.queryVector(ctx, a.Query)
	minScore := 0.0
	if a.MinScore != nil {
		minScore = *a.MinScore
	}
	p := &pipeline{pool: s.pool}
	q := sqlc.New(p)
	// Queued, not sent: it goes in the same batch as the search below.
	if err := q.SearchConfig(ctx, strconv.Itoa(a.EfSearch)); err != nil {
		return nil, mapErr(err, "")
	}
	rows, err := q.SearchHybrid(ctx, sqlc.SearchHybridParams{
		OrgID: c.OrgID, QueryVec: vec, Model: s.opts.Embedder.Model(), Tags: a.Tags,
		IncludeSuperseded: a.IncludeSuperseded, IncludeExpired: a.IncludeExpired,
		Candidates: int32(candidateCount(a.Limit)), Pool: LexicalPool, Query: a.Query, TitlePattern: LikePattern(a.Query),
		MinScore: minScore, MaxHits: int32(a.Limit),
	})
	if err != nil {
		return nil, mapErr(err, "")
	}
	res := &SearchResult{Hits: make([]Hit, 0, len(rows)), VectorSearch: vec != nil, Notice: notice}
	for _, r := range rows {
		res.Hits = append(res.Hits, Hit{
			ID: r.ID, Title: r.Title, Snippet: Snippet(r.Body, a.Query), Score: r.Score,
			Tags: nonNil(r.Tags), Confidence: int(r.Confidence), CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
			Superseded: r.HeadID != nil, HeadID: r.HeadID, EmbeddingStatus: r.EmbeddingStatus,
			VectorRank: int(r.VectorRank), FullTextRank: int(r.FullTextRank), TitleRank: int(r.TitleRank),
		})
	}
	return res, nil
}

// queryVector embeds the query, or says why it could not.
func (s *Service) queryVector(ctx context.Context, query string) (*pgvector.Vector, string) {
	const fallback = "; results come from full text and title only"
	e := s.opts.Embedder
	if d := e.Dimensions(); d != embed.Dimensions {
		s.log().Error("knowledge: embedder has the wrong width", "model", e.Model(), "dimensions", d, "want", embed.Dimensions)
		return nil, fmt.Sprintf("vector search unavailable: the embedder %q makes %d-dimensional vectors, the index holds %d%s",
			e.Model(), d, embed.Dimensions, fallback)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.EmbedTimeout)
	defer cancel()
	vs, err := e.Embed(ctx, []string{query})
	if err == nil && (len(vs) != 1 || len(vs[0]) != embed.Dimensions) {
		err = fmt.Errorf("embedder returned %d vectors for 1 text", len(vs))
		if len(vs) == 1 {
			err = fmt.Errorf("embedder returned a %d-dimensional vector", len(vs[0]))
		}
	}
	if err != nil {
		s.log().Warn("knowledge: query embedding failed; lexical search only", "model", e.Model(), "err", err)
		return nil, "vector search unavailable: the query could not be embedded" + fallback
	}
	v := pgvector.NewVector(vs[0])
	return &v, ""
}

// LexicalPool bounds the work of the two lexical lists: each ranks at most
// the LexicalPool newest entries that match (full text, title), not every
// match. A common word matches a large share of an org, and ranking every
// match reads every matching row; an entry older than the LexicalPool newest
// matches can then only be found by the vector list (see docs/knowledge.md,
// "Search", for the measured effect).
const LexicalPool = 1000

// LikePattern is the ILIKE pattern matching query anywhere, with the
// query's own %, _ and \ matching literally (\ is ILIKE's default escape).
func LikePattern(query string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(query) + "%"
}

// pipeline is a sqlc.DBTX that holds back every Exec and sends them with the
// next Query as one pgx batch. A batch is one network round trip and, in the
// extended protocol, ends with a single Sync, so its statements run in one
// implicit transaction: the set_config(..., true) of SearchConfig applies to
// the search statement and ends with it. This keeps both statements in sqlc
// (a multi-statement string cannot carry parameters) without a BEGIN and a
// COMMIT round trip. Exec answers an empty tag: errors surface on Query.
type pipeline struct {
	pool  *pgxpool.Pool
	batch *pgx.Batch
}

func (p *pipeline) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if p.batch == nil {
		p.batch = &pgx.Batch{}
	}
	p.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (p *pipeline) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	batch := p.batch
	p.batch = &pgx.Batch{}
	if batch == nil {
		batch = &pgx.Batch{}
	}
	held := batch.Len()
	batch.Queue(sql, args...)
	br := p.pool.SendBatch(ctx, batch)
	for range held {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (p *pipeline) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := p.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return rowOf{rows}
}

// batchRows closes the batch (giving the connection back) with the rows.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

type rowOf struct{ rows pgx.Rows }

func (r rowOf) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
