-- Hybrid search (packages/knowledge).

-- name: SearchConfig :exec
-- Transaction-local settings of the search statement that follows it in the
-- same pipeline (see search.go): the HNSW probe width, pgvector 0.8's
-- iterative index scan so a small org's filter does not starve the vector
-- list, and custom plans (a cached generic plan cannot see the query's
-- selectivity).
SELECT set_config('hnsw.ef_search', @ef_search::text, true),
       set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('plan_cache_mode', 'force_custom_plan', true);

-- name: SearchHybrid :many
-- Three candidate lists, each restricted to the org and the filters and cut
-- at @candidates, fused by Reciprocal Rank Fusion (k = 60):
--   score = sum over lists of 1/(60 + rank), divided by 3/61 (a hit ranked
--   first in all three lists), so it lies in (0, 1].
-- A NULL query_vec (the embedder failed) leaves the vector list empty.
WITH vec AS MATERIALIZED (
    -- relaxed_order may return rows slightly out of order: re-rank below.
    SELECT k.id, k.embedding <=> sqlc.narg(query_vec)::vector AS dist
    FROM knowledge k
    WHERE sqlc.narg(query_vec)::vector IS NOT NULL
      AND k.org_id = @org_id
      AND k.embedding_status = 'ready' AND k.embedding_model = @model::text
      AND k.tags @> @tags::text[]
      AND (@include_superseded::bool OR k.head_id IS NULL)
      AND (@include_expired::bool OR k.expires_at IS NULL OR k.expires_at > now())
    ORDER BY k.embedding <=> sqlc.narg(query_vec)::vector
    LIMIT @candidates::int
),
vec_ranked AS (
    SELECT id, row_number() OVER (ORDER BY dist, id) AS rank FROM vec
),
fts_pool AS MATERIALIZED (
    -- The newest @pool matches only (see docs/knowledge.md, "Search"): a
    -- common word matches a large share of the org, and ranking every match
    -- reads every matching row. Few matches: a bitmap scan of the GIN index
    -- and a sort of what it found; many: the org's (org_id, created_at, id)
    -- index read backwards, stopping at @pool matches.
    SELECT k.id, k.search_tsv
    FROM knowledge k
    WHERE k.org_id = @org_id
      AND k.search_tsv @@ plainto_tsquery('simple', @query::text)
      AND k.tags @> @tags::text[]
      AND (@include_superseded::bool OR k.head_id IS NULL)
      AND (@include_expired::bool OR k.expires_at IS NULL OR k.expires_at > now())
    ORDER BY k.created_at DESC, k.id DESC
    LIMIT @pool::int
),
fts AS (
    SELECT p.id,
           row_number() OVER (ORDER BY ts_rank_cd(p.search_tsv, plainto_tsquery('simple', @query::text)) DESC, p.id) AS rank
    FROM fts_pool p
    ORDER BY rank
    LIMIT @candidates::int
),
ttl_pool AS MATERIALIZED (
    -- title_pattern is '%' || the query with %, _ and \ escaped || '%'.
    -- Bounded like fts_pool.
    SELECT k.id, k.title
    FROM knowledge k
    WHERE k.org_id = @org_id
      AND k.title ILIKE @title_pattern::text
      AND k.tags @> @tags::text[]
      AND (@include_superseded::bool OR k.head_id IS NULL)
      AND (@include_expired::bool OR k.expires_at IS NULL OR k.expires_at > now())
    ORDER BY k.created_at DESC, k.id DESC
    LIMIT @pool::int
),
ttl AS (
    SELECT p.id,
           row_number() OVER (ORDER BY similarity(p.title, @query::text) DESC,
                                       strpos(lower(p.title), lower(@query::text)), p.id) AS rank
    FROM ttl_pool p
    ORDER BY rank
    LIMIT @candidates::int
),
lists AS (
    SELECT id, rank, 1 AS list FROM vec_ranked
    UNION ALL SELECT id, rank, 2 FROM fts
    UNION ALL SELECT id, rank, 3 FROM ttl
),
fused AS (
    SELECT id,
           (sum(1.0::float8 / (60 + rank)) / (3.0::float8 / 61))::float8 AS score,
           coalesce(max(rank) FILTER (WHERE list = 1), 0)::int AS vector_rank,
           coalesce(max(rank) FILTER (WHERE list = 2), 0)::int AS full_text_rank,
           coalesce(max(rank) FILTER (WHERE list = 3), 0)::int AS title_rank
    FROM lists
    GROUP BY id
)
SELECT k.id, k.title, k.body, k.tags, k.confidence, k.created_at, k.expires_at,
       k.head_id, k.embedding_status,
       f.score, f.vector_rank, f.full_text_rank, f.title_rank
FROM fused f
JOIN knowledge k ON k.org_id = @org_id AND k.id = f.id
WHERE f.score >= @min_score::float8
ORDER BY f.score DESC, f.id
LIMIT @max_hits::int;
