-- HNSW indexes of a large org's metadata pairs: a search filtered by a
-- pair that has one walks that pair's graph, not the org's testing the
-- filter on every entry it meets.
--
-- Walking the org's (or the space's) index with a filter passing one entry
-- in ten, the iterative scan visited ~500 entries to keep 40, each a heap
-- row read and rejected, and the graph's walk ten times as long: the
-- vector list 2.6x its unfiltered time at 100,000 entries
-- (docs/benchmarks.md, "Entry field filters"); ranking the matches by key
-- instead costs a row each (12x at 10,000). An index whose predicate is the org's heads of the space that
-- carry the pair holds only what the filter passes.
--
-- Only the pairs an org's searches filter by: a search that learns a
-- filter's matches (once per server and filter every 30 s: the search
-- package's filtersearch.go) records its pairs and the time in the org's
-- knowledge_search_stats.searched_pairs (pair -> epoch seconds), at most
-- the newest 64; Upkeep gives an index to the pairs searched lately and
-- drops the index of a pair no longer searched. A pair's index costs each
-- vector write of its entries a second HNSW insert: an index of every pair
-- large enough would tax the writes of pairs nobody filters by.
--
-- Upkeep builds them (maintenance/upkeep.go: which pairs, how many an org)
-- and names each knowledge_pair_index_name(prefix of the space, org, pair).
-- Their predicate names the pair by its hash,
-- knowledge_metadata_pair_keys(metadata) @> '{<pair>}', never by its value:
-- a metadata value may be personal, and an index definition is in the
-- catalog, where no erasure of the org's rows reaches. The vector list's
-- statement (packages/knowledge/search/sql/search_vector.sql) asks
-- knowledge_ready_pairs whether one of a filter's pairs has a valid
-- one and then runs knowledge_vector_hnsw with the space's prefix, which
-- writes each pair that has one as a constant clause equal to its index's
-- predicate, so that the planner can prove the index usable.

-- +goose Up
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

ALTER TABLE knowledge_search_stats ADD COLUMN searched_pairs jsonb NOT NULL DEFAULT '{}';

-- +goose StatementBegin
-- knowledge_pair_index_name: the name of an org's pair's HNSW index; the
-- prefix names the space (vecspace.Space.PairIndexPrefix).
CREATE FUNCTION knowledge_pair_index_name(p_prefix text, p_org uuid, p_pair bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT p_prefix || left(md5(p_org::text || ':' || p_pair::text), 16)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- knowledge_ready_pairs: the metadata filter's pairs that have a valid
-- index of the org's. Answered where the statement runs, the org's worker
-- on a cluster (as knowledge_index_ready, migration 00028): the vector
-- list's statement asks whether there is one, knowledge_vector_hnsw which.
CREATE FUNCTION knowledge_ready_pairs(p_prefix text, p_org uuid, p_metadata jsonb) RETURNS SETOF bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p.pair FROM unnest(knowledge_metadata_pair_keys(p_metadata)) AS p (pair)
    WHERE knowledge_index_ready(knowledge_pair_index_name(p_prefix, p_org, p.pair))
$$;
-- +goose StatementEnd

DROP FUNCTION knowledge_vector_hnsw(uuid, vector, text, text[], bool, bool, int, text, text, text, jsonb);

-- +goose StatementBegin
-- p_pair_prefix: the space's prefix of pairs' index names
-- (vecspace.Space.PairIndexPrefix), given when one of the filter's pairs
-- has a valid index (knowledge_ready_pairs): the walk is of a pair's
-- index. A pair's index is on the normalized vectors by inner product
-- (vecspace.Space.PairIndexDDL), the cosine's order by an expression and
-- operator no other index has, so the planner has no other index to
-- choose: on the cosine of the cast it chose among the space's, the org's
-- and the pair's by costs that tie on a table never analyzed.
CREATE FUNCTION knowledge_vector_hnsw(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                      p_include_superseded bool, p_include_expired bool, p_n int,
        p_kind text, p_source text, p_source_prefix text, p_metadata jsonb, p_pair_prefix text DEFAULT NULL)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET plan_cache_mode = force_custom_plan SET jit = off
AS $$
DECLARE
    d int := vector_dims(p_vec);
    typ text := CASE WHEN d <= 2000 THEN 'vector(' || d || ')' ELSE 'halfvec(' || d || ')' END;
    tk text := knowledge_org_table(p_org, 'knowledge');
    tc text := knowledge_org_table(p_org, 'knowledge_chunks');
    chunks boolean;
    -- The filters of an entry's row, but whether it is a head.
    filters text := '(cardinality($4) = 0 OR k.tags @> $4)
           AND ($6 OR k.expires_at IS NULL OR k.expires_at > now())
           AND ($8::text IS NULL OR k.kind = $8) AND ($9::text IS NULL OR k.source = $9)
           AND ($10::text IS NULL OR starts_with(k.source, $10)) AND ($11::jsonb IS NULL OR k.metadata @> $11)';
    -- Each of the filter's pairs that has a valid index, as a constant
    -- clause equal to the index's predicate (made below, only when the
    -- statement found one: a query of its own): the planner proves a
    -- partial index usable only from such a clause (and then drops it from
    -- the scan's filter: no row computes the hashes).
    pairs text := '';
    -- The entries' side: an HNSW scan of the space's index (or the org's
    -- own, or a pair's), which holds heads only, under a LIMIT. Each entry
    -- once.
    entries text;
BEGIN
    IF p_pair_prefix IS NOT NULL THEN
        pairs := coalesce((SELECT string_agg(format(' AND knowledge_metadata_pair_keys(k.metadata) @> %L::bigint[]', ARRAY[p.pair]::text), '' ORDER BY p.pair)
                           FROM knowledge_ready_pairs(p_pair_prefix, p_org, p_metadata) AS p (pair)), '');
    END IF;
    entries := format(
        'SELECT k.id, (k.embedding::%1$s <=> $2::%1$s)::float8 AS dist
         FROM %3$s k
         WHERE k.org_id = $1
           AND k.embedding_model = $3 AND vector_dims(k.embedding) = %2$s
           AND k.head_id IS NULL
           AND %4$s%6$s
         ORDER BY %5$s
         LIMIT $7', typ, d, tk, filters,
        CASE WHEN pairs <> '' THEN format('l2_normalize(k.embedding::%1$s)::%1$s <#> l2_normalize($2::%1$s)::%1$s', typ)
             ELSE format('k.embedding::%1$s <=> $2::%1$s', typ) END,
        pairs);
    -- Asked for superseded entries too: the org's superseded versions,
    -- ranked exactly (in no HNSW index), beside the heads, read through
    -- knowledge_head_idx (the org's superseded rows only: the inner order
    -- is that index's, which no sort may give, sorts being off).
    IF p_include_superseded THEN
        entries := format(
            'SELECT e.id, e.dist FROM (
                (%1$s)
                UNION ALL
                (SELECT s.id, (s.embedding <=> $2)::float8
                 FROM (SELECT k.id, k.embedding
                       FROM %2$s k
                       WHERE k.org_id = $1 AND k.head_id IS NOT NULL
                         AND k.embedding_model = $3 AND vector_dims(k.embedding) = %3$s
                         AND %4$s
                       ORDER BY k.head_id) s
                 ORDER BY 2
                 LIMIT $7)
             ) e
             ORDER BY 2, 1
             LIMIT $7', entries, tk, d, filters);
    END IF;
    -- An org without chunks of the space (short entries only, the common
    -- case) runs the entries' side alone: the chunks' side, even skipped at
    -- run time, was most of the planning of every call (0.55 ms of planning
    -- with it, 0.22 without). The probe is a static statement, planned as
    -- a key probe of the space index (on a worker, the shard's).
    IF tc = 'knowledge_chunks' THEN
        chunks := EXISTS (SELECT 1 FROM knowledge_chunks c0
                          WHERE c0.org_id = p_org AND c0.embedding_model = p_model AND vector_dims(c0.embedding) = d);
    ELSE
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s c0 WHERE c0.org_id = $1 AND c0.embedding_model = $2 AND vector_dims(c0.embedding) = $3)', tc)
            INTO chunks USING p_org, p_model, d;
    END IF;
    IF NOT chunks THEN
        RETURN QUERY EXECUTE entries USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n,
              p_kind, p_source, p_source_prefix, p_metadata;
        RETURN;
    END IF;
    -- An entry is ranked by its best vector: its own (the first chunk) or
    -- one of its chunks'. The chunks' side is an HNSW scan of the chunk
    -- index of the space under a LIMIT; a chunk's entry is checked against
    -- the filters by a primary-key probe. An entry may come from both sides
    -- and from several chunks: the best distance is kept.
    RETURN QUERY EXECUTE format(
        'SELECT x.id, min(x.dist) AS dist FROM (
            (%3$s)
            UNION ALL
            (SELECT c.entry_id, (c.embedding::%1$s <=> $2::%1$s)::float8
             FROM %4$s c
             WHERE c.org_id = $1
               AND c.embedding_model = $3 AND vector_dims(c.embedding) = %2$s
               AND EXISTS (SELECT 1 FROM %5$s k
                           WHERE k.org_id = $1 AND k.id = c.entry_id AND k.embedding IS NOT NULL
                             AND ($5 OR k.head_id IS NULL)
                             AND %6$s)
             ORDER BY c.embedding::%1$s <=> $2::%1$s
             LIMIT $7)
         ) x
         GROUP BY x.id
         ORDER BY 2, 1
         LIMIT $7',
        typ, d, entries, tc, tk, filters)
    USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n,
              p_kind, p_source, p_source_prefix, p_metadata;
END
$$;
-- +goose StatementEnd

-- On a cluster: made on every node.
SELECT knowledge_distribute();

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- +goose StatementBegin
DO $$
DECLARE
    ix text;
BEGIN
    FOR ix IN SELECT indexname FROM pg_indexes
              WHERE schemaname = current_schema() AND tablename = 'knowledge' AND indexname LIKE 'knowledge\_hnsw\_p\_%'
    LOOP
        EXECUTE format('DROP INDEX %I', ix);
    END LOOP;
END
$$;
-- +goose StatementEnd

DROP FUNCTION knowledge_vector_hnsw(uuid, vector, text, text[], bool, bool, int, text, text, text, jsonb, text);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_vector_hnsw(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                 p_include_superseded bool, p_include_expired bool, p_n int,
        p_kind text, p_source text, p_source_prefix text, p_metadata jsonb)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET plan_cache_mode = force_custom_plan SET jit = off
AS $$
DECLARE
    d int := vector_dims(p_vec);
    typ text := CASE WHEN d <= 2000 THEN 'vector(' || d || ')' ELSE 'halfvec(' || d || ')' END;
    tk text := knowledge_org_table(p_org, 'knowledge');
    tc text := knowledge_org_table(p_org, 'knowledge_chunks');
    chunks boolean;
    -- The filters of an entry's row, but whether it is a head.
    filters text := '(cardinality($4) = 0 OR k.tags @> $4)
           AND ($6 OR k.expires_at IS NULL OR k.expires_at > now())
           AND ($8::text IS NULL OR k.kind = $8) AND ($9::text IS NULL OR k.source = $9)
           AND ($10::text IS NULL OR starts_with(k.source, $10)) AND ($11::jsonb IS NULL OR k.metadata @> $11)';
    -- The entries' side: an HNSW scan of the space's index (or the org's
    -- own), which holds heads only, under a LIMIT. Each entry once.
    entries text := format(
        'SELECT k.id, (k.embedding::%1$s <=> $2::%1$s)::float8 AS dist
         FROM %3$s k
         WHERE k.org_id = $1
           AND k.embedding_model = $3 AND vector_dims(k.embedding) = %2$s
           AND k.head_id IS NULL
           AND %4$s
         ORDER BY k.embedding::%1$s <=> $2::%1$s
         LIMIT $7', typ, d, tk, filters);
BEGIN
    -- Asked for superseded entries too: the org's superseded versions,
    -- ranked exactly (in no HNSW index), beside the heads, read through
    -- knowledge_head_idx (the org's superseded rows only: the inner order
    -- is that index's, which no sort may give, sorts being off).
    IF p_include_superseded THEN
        entries := format(
            'SELECT e.id, e.dist FROM (
                (%1$s)
                UNION ALL
                (SELECT s.id, (s.embedding <=> $2)::float8
                 FROM (SELECT k.id, k.embedding
                       FROM %2$s k
                       WHERE k.org_id = $1 AND k.head_id IS NOT NULL
                         AND k.embedding_model = $3 AND vector_dims(k.embedding) = %3$s
                         AND %4$s
                       ORDER BY k.head_id) s
                 ORDER BY 2
                 LIMIT $7)
             ) e
             ORDER BY 2, 1
             LIMIT $7', entries, tk, d, filters);
    END IF;
    -- An org without chunks of the space (short entries only, the common
    -- case) runs the entries' side alone: the chunks' side, even skipped at
    -- run time, was most of the planning of every call (0.55 ms of planning
    -- with it, 0.22 without). The probe is a static statement, planned as
    -- a key probe of the space index (on a worker, the shard's).
    IF tc = 'knowledge_chunks' THEN
        chunks := EXISTS (SELECT 1 FROM knowledge_chunks c0
                          WHERE c0.org_id = p_org AND c0.embedding_model = p_model AND vector_dims(c0.embedding) = d);
    ELSE
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s c0 WHERE c0.org_id = $1 AND c0.embedding_model = $2 AND vector_dims(c0.embedding) = $3)', tc)
            INTO chunks USING p_org, p_model, d;
    END IF;
    IF NOT chunks THEN
        RETURN QUERY EXECUTE entries USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n,
              p_kind, p_source, p_source_prefix, p_metadata;
        RETURN;
    END IF;
    -- An entry is ranked by its best vector: its own (the first chunk) or
    -- one of its chunks'. The chunks' side is an HNSW scan of the chunk
    -- index of the space under a LIMIT; a chunk's entry is checked against
    -- the filters by a primary-key probe. An entry may come from both sides
    -- and from several chunks: the best distance is kept.
    RETURN QUERY EXECUTE format(
        'SELECT x.id, min(x.dist) AS dist FROM (
            (%3$s)
            UNION ALL
            (SELECT c.entry_id, (c.embedding::%1$s <=> $2::%1$s)::float8
             FROM %4$s c
             WHERE c.org_id = $1
               AND c.embedding_model = $3 AND vector_dims(c.embedding) = %2$s
               AND EXISTS (SELECT 1 FROM %5$s k
                           WHERE k.org_id = $1 AND k.id = c.entry_id AND k.embedding IS NOT NULL
                             AND ($5 OR k.head_id IS NULL)
                             AND %6$s)
             ORDER BY c.embedding::%1$s <=> $2::%1$s
             LIMIT $7)
         ) x
         GROUP BY x.id
         ORDER BY 2, 1
         LIMIT $7',
        typ, d, entries, tc, tk, filters)
    USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n,
              p_kind, p_source, p_source_prefix, p_metadata;
END
$$;
-- +goose StatementEnd

ALTER TABLE knowledge_search_stats DROP COLUMN searched_pairs;
DROP FUNCTION knowledge_ready_pairs(text, uuid, jsonb);
DROP FUNCTION knowledge_pair_index_name(text, uuid, bigint);
SELECT knowledge_distribute();
