-- The vector list of one search, restricted to the org and the filters (tags,
-- and the entry fields: kind, source, source prefix, metadata; each NULL
-- when not asked for; and @ids with @by_ids) and
-- cut at @candidates: one row per entry found, with its rank and cosine
-- similarity, and the columns sql/search_candidates.sql gives (the lexical
-- ones zero). Run by packages/knowledge (search.go) through pgx with named
-- arguments, after SearchConfig with pin_vector_plan.
--
-- A template of the embedding space: its placeholders in double braces are
-- replaced once per Service by the space's cast (vector(N), or halfvec(N)
-- past 2,000 dimensions), width and model (a quoted literal), so that the
-- space's partial HNSW indexes (vectorspace.go) are proven usable by a
-- generic plan, made once per connection. The vector list's function
-- (knowledge_vector_hnsw) builds its statement at run time instead, and
-- planning it was about 1 ms of every call at 5,000 entries with chunks
-- (the list 2.3-3.0 ms p50 through the function, 1.4-1.7 ms here;
-- docs/benchmarks.md, "Why search is built so").
--
-- One of four plans runs, chosen here from the filters' matches (a
-- count: filtersearch.go, and mset below), the org's size, its share of
-- the table and the indexes that exist, never by the planner's statistics
-- (search.go, hnswCostRatio):
--   ids:   the search has a set of entries (within): a document's
--          sections or a filter's few matches, read by the caller
--          (@by_ids, @ids), or a metadata filter's, read here (mset):
--          each entry of the set is read by its primary key and ranked by
--          its best vector exactly, as the exact plan ranks the org.
--   org:   the org has a valid HNSW index of its own (Upkeep's, for large
--          orgs), or one of its metadata filter's pairs has (pidx). Its
--          predicate names the org (and the pair), so only a plan made for
--          the org's id (and the pair) can use it: knowledge_vector_hnsw,
--          planned per call.
--   space: the org is a large share of the table: the space's HNSW index,
--          filtered by org while it walks, here with a plan made once.
--   exact: otherwise, every vector of the org (knowledge_vector_exact).
-- Each branch is gated by a one-time filter: the branches not chosen do
-- not run. The plan is pinned by the settings SearchConfig gives this
-- statement (no sequential scans, sorts or bitmap scans where an index
-- order exists), not by statistics, which may be missing.
WITH mpairs AS MATERIALIZED (
    SELECT unnest(knowledge_metadata_pair_keys(@metadata::jsonb)) AS pair
),
-- Whether one of a metadata filter's pairs has an HNSW index of the org's
-- (Upkeep's, for a large org's pairs: db/migrations/00050): its graph holds
-- only what the filter passes, so it is walked (the org plan, whose
-- function, told so, names each pair as its index's predicate does and
-- orders as only a pair's index can) instead of the matches being read and
-- ranked by key, even when the caller read them (@ids_of_metadata: they
-- are the filter's, which the function tests itself; never a document's).
pidx AS MATERIALIZED (
    SELECT @metadata::jsonb IS NOT NULL AND (NOT @by_ids::bool OR @ids_of_metadata::bool)
           AND EXISTS (SELECT 1 FROM knowledge_ready_pairs(@pair_index_prefix::text, @org_id, @metadata::jsonb)) AS ready
),
-- A metadata filter's matches, as sql/search_candidates.sql reads them
-- (mread, mpick, mset: the same CTEs, explained there).
mread AS MATERIALIZED (
    SELECT p.pair, m.entry_id
    FROM mpairs p
    CROSS JOIN LATERAL (SELECT m.entry_id FROM knowledge_metadata_pairs m
                        WHERE m.org_id = @org_id AND m.pair = p.pair
                        LIMIT @match_max::int + 1) m
    WHERE @match_max::int > 0 AND NOT (SELECT ready FROM pidx)
),
mpick AS MATERIALIZED (
    SELECT r.pair FROM mread r GROUP BY r.pair HAVING count(*) <= @match_max::int ORDER BY count(*), r.pair LIMIT 1
),
mset AS MATERIALIZED (
    SELECT r.entry_id AS id
    FROM mread r
    WHERE r.pair = (SELECT pair FROM mpick)
      AND ((SELECT count(*) FROM mpairs) = 1
           OR (SELECT count(*) FROM mpairs p
               CROSS JOIN LATERAL (SELECT 1 FROM knowledge_metadata_pairs m
                                   WHERE m.org_id = @org_id AND m.pair = p.pair AND m.entry_id = r.entry_id LIMIT 1) m)
              = (SELECT count(*) FROM mpairs))
),
within AS MATERIALIZED (
    SELECT i.id FROM unnest(@ids::uuid[]) AS i (id) WHERE @by_ids::bool
    UNION ALL
    SELECT mset.id FROM mset WHERE NOT @by_ids::bool
),
st AS MATERIALIZED (
    SELECT CASE
               WHEN (SELECT ready FROM pidx) THEN 'org'
               WHEN @by_ids::bool THEN 'ids'
               WHEN EXISTS (SELECT 1 FROM mpick) THEN 'ids'
               WHEN coalesce(s.docs, 0) < @hnsw_min_docs::bigint THEN 'exact'
               -- (knowledge_index_ready, migration 00028: answered where the
               -- statement runs, the org's worker on a cluster.)
               WHEN knowledge_index_ready(@org_vector_index::text) THEN 'org'
               WHEN s.docs::float8 * s.docs >= @hnsw_cost_ratio::float8 * @table_docs::float8 * @candidates::float8
                    AND knowledge_index_ready(@vector_index::text) THEN 'space'
               ELSE 'exact'
           END AS plan
    FROM (SELECT 1) one
    LEFT JOIN knowledge_search_stats s ON s.org_id = @org_id
),
-- The space's plan: an entry is ranked by its best vector, its own (the
-- first chunk) or one of its chunks'. Each side is an HNSW scan of its
-- table's index of the space under a LIMIT (the iterative scan keeps
-- walking while the org filter rejects; the entries' index holds heads
-- only: internal/vecspace); a chunk's entry is checked
-- against the filters by a primary-key probe. The chunks' side runs only
-- when the org has chunks of the space (a key probe): walking the chunk
-- index for an org it holds nothing of would visit up to
-- hnsw.max_scan_tuples chunks to find none.
space AS MATERIALIZED (
    SELECT x.id, min(x.dist) AS dist
    FROM (
        (SELECT k.id, (k.embedding::{{cast}} <=> @query_vec::vector::{{cast}})::float8 AS dist
         FROM knowledge k
         WHERE k.org_id = @org_id
           AND k.embedding_model = {{model}} AND vector_dims(k.embedding) = {{dims}}
           AND k.head_id IS NULL
           AND (cardinality(@tags::text[]) = 0 OR k.tags @> @tags::text[])
           AND (@wide_expired::bool OR k.expires_at IS NULL OR k.expires_at > now())
           AND (@kind::text IS NULL OR k.kind = @kind::text) AND (@source::text IS NULL OR k.source = @source::text)
           AND (@source_prefix::text IS NULL OR starts_with(k.source, @source_prefix::text))
           AND (@metadata::jsonb IS NULL OR k.metadata @> @metadata::jsonb)
           AND (SELECT plan FROM st) = 'space'
         ORDER BY k.embedding::{{cast}} <=> @query_vec::vector::{{cast}}
         LIMIT @wide_n::int)
        UNION ALL
        -- Asked for superseded entries too: the org's superseded versions,
        -- in no HNSW index, ranked exactly. They are read through
        -- knowledge_head_idx, the org's superseded rows only: the inner
        -- order is that index's, which no sort may give (sorts are off),
        -- so no scan of all the org's vectors is chosen instead.
        (SELECT s.id, (s.embedding <=> @query_vec::vector)::float8
         FROM (SELECT k.id, k.embedding
               FROM knowledge k
               WHERE k.org_id = @org_id AND k.head_id IS NOT NULL AND @wide_superseded::bool
                 AND k.embedding_model = {{model}} AND vector_dims(k.embedding) = {{dims}}
                 AND (cardinality(@tags::text[]) = 0 OR k.tags @> @tags::text[])
                 AND (@wide_expired::bool OR k.expires_at IS NULL OR k.expires_at > now())
                 AND (@kind::text IS NULL OR k.kind = @kind::text) AND (@source::text IS NULL OR k.source = @source::text)
                 AND (@source_prefix::text IS NULL OR starts_with(k.source, @source_prefix::text))
                 AND (@metadata::jsonb IS NULL OR k.metadata @> @metadata::jsonb)
                 AND (SELECT plan FROM st) = 'space'
               ORDER BY k.head_id) s
         ORDER BY 2
         LIMIT @wide_n::int)
        UNION ALL
        (SELECT c.entry_id, (c.embedding::{{cast}} <=> @query_vec::vector::{{cast}})::float8
         FROM knowledge_chunks c
         WHERE c.org_id = @org_id
           AND c.embedding_model = {{model}} AND vector_dims(c.embedding) = {{dims}}
           AND (SELECT plan FROM st) = 'space'
           AND EXISTS (SELECT 1 FROM knowledge_chunks c0
                       WHERE c0.org_id = @org_id AND c0.embedding_model = {{model}} AND vector_dims(c0.embedding) = {{dims}})
           AND EXISTS (SELECT 1 FROM knowledge k
                       WHERE k.org_id = @org_id AND k.id = c.entry_id AND k.embedding IS NOT NULL
                         AND (cardinality(@tags::text[]) = 0 OR k.tags @> @tags::text[])
                         AND (@wide_superseded::bool OR k.head_id IS NULL)
                         AND (@wide_expired::bool OR k.expires_at IS NULL OR k.expires_at > now())
                         AND (@kind::text IS NULL OR k.kind = @kind::text) AND (@source::text IS NULL OR k.source = @source::text)
                         AND (@source_prefix::text IS NULL OR starts_with(k.source, @source_prefix::text))
                         AND (@metadata::jsonb IS NULL OR k.metadata @> @metadata::jsonb))
         ORDER BY c.embedding::{{cast}} <=> @query_vec::vector::{{cast}}
         LIMIT @wide_n::int)
    ) x
    GROUP BY x.id
),
-- The ids plan: the entries of the set that pass the filters as the other
-- plans test them (the asOf test is vec's), a primary-key probe each, with
-- the distance of their own vector when it is of the space; then their
-- chunks' (a key range each, only when the org has chunks of the space),
-- and each entry's best. Not cut: vec keeps the best @candidates.
ids_read AS MATERIALIZED (
    SELECT k.id, k.dist
    FROM within i
    CROSS JOIN LATERAL (
        SELECT k.id, CASE WHEN k.embedding_model = {{model}} AND vector_dims(k.embedding) = {{dims}}
                          THEN (k.embedding <=> @query_vec::vector)::float8 END AS dist
        FROM knowledge k
        WHERE k.org_id = @org_id AND k.id = i.id AND k.embedding IS NOT NULL
          AND (cardinality(@tags::text[]) = 0 OR k.tags @> @tags::text[])
          AND (@wide_superseded::bool OR k.head_id IS NULL)
          AND (@wide_expired::bool OR k.expires_at IS NULL OR k.expires_at > now())
          AND (@kind::text IS NULL OR k.kind = @kind::text) AND (@source::text IS NULL OR k.source = @source::text)
          AND (@source_prefix::text IS NULL OR starts_with(k.source, @source_prefix::text))
          AND (@metadata::jsonb IS NULL OR k.metadata @> @metadata::jsonb)
        LIMIT 1
    ) k
    WHERE (SELECT plan FROM st) = 'ids'
),
ids AS MATERIALIZED (
    SELECT x.id, min(x.dist) AS dist
    FROM (
        SELECT r.id, r.dist FROM ids_read r WHERE r.dist IS NOT NULL
        UNION ALL
        SELECT r.id, c.dist
        FROM ids_read r
        CROSS JOIN LATERAL (
            SELECT (c.embedding <=> @query_vec::vector)::float8 AS dist
            FROM knowledge_chunks c
            WHERE c.org_id = @org_id AND c.entry_id = r.id
              AND c.embedding_model = {{model}} AND vector_dims(c.embedding) = {{dims}}
        ) c
        WHERE EXISTS (SELECT 1 FROM knowledge_chunks c0
                      WHERE c0.org_id = @org_id AND c0.embedding_model = {{model}} AND vector_dims(c0.embedding) = {{dims}})
    ) x
    GROUP BY x.id
),
vec AS MATERIALIZED (
    SELECT v.id, v.dist
    FROM (
        SELECT v.id, v.dist
        FROM knowledge_vector_hnsw(@org_id, @query_vec::vector, @model::text, @tags::text[],
                                   @wide_superseded::bool, @wide_expired::bool, @wide_n::int,
                                   @kind::text, @source::text, @source_prefix::text, @metadata::jsonb,
                                   CASE WHEN (SELECT ready FROM pidx) THEN @pair_index_prefix::text END) AS v (id, dist)
        WHERE (SELECT plan FROM st) = 'org'
        UNION ALL
        SELECT space.id, space.dist FROM space
        UNION ALL
        SELECT ids.id, ids.dist FROM ids
        UNION ALL
        SELECT v.id, v.dist
        FROM knowledge_vector_exact(@org_id, @query_vec::vector, @model::text, @tags::text[],
                                    @wide_superseded::bool, @wide_expired::bool, @wide_n::int,
                                    @kind::text, @source::text, @source_prefix::text, @metadata::jsonb) AS v (id, dist)
        WHERE (SELECT plan FROM st) = 'exact'
    ) v
    -- asOf: the plans' own filters are of today, so they were asked for
    -- everything (@wide_*: superseded and expired too, and more of them)
    -- and what the org knew then is kept here.
    WHERE @as_of::timestamptz IS NULL OR EXISTS (
        SELECT 1 FROM knowledge k
        WHERE k.org_id = @org_id AND k.id = v.id
          AND k.created_at <= @as_of::timestamptz
          AND (@include_superseded::bool OR k.superseded_at IS NULL OR k.superseded_at > @as_of::timestamptz)
          AND (@include_expired::bool OR k.expires_at IS NULL OR k.expires_at > @as_of::timestamptz))
    ORDER BY v.dist, v.id
    LIMIT @candidates::int
)
-- relaxed_order may return rows slightly out of order: ranked here.
SELECT v.id, (row_number() OVER (ORDER BY v.dist, v.id))::int AS vector_rank, (1 - v.dist)::float8 AS cosine,
       0 AS full_text_rank, 0::float8 AS bm25, 0 AS title_rank, 0::float8 AS title_bm25, false AS title_contains,
       0::float8 AS full_text_coverage, 0::float8 AS title_coverage,
       0::float8 AS query_idf_b, 0::float8 AS query_idf_t, 0 AS query_terms, 0::float8 AS org_docs,
       k.title, k.tags, k.confidence, k.created_at, k.expires_at, k.head_id, k.embedding_status
FROM vec v
CROSS JOIN LATERAL (
    SELECT k.title, k.tags, k.confidence, k.created_at, k.expires_at, k.head_id, k.embedding_status
    FROM knowledge k WHERE k.org_id = @org_id AND k.id = v.id LIMIT 1
) k;
