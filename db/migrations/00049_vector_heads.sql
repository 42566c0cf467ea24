-- The vector indexes of the entries hold the heads of their chains only
-- (head_id IS NULL): a superseded version is never in an HNSW index.
--
-- A supersession points every earlier version's head_id at the new head
-- (MoveHeads), and no update of an entry is HOT (a page holds two or three
-- ~3 KB rows, the vector inline), so each earlier version's new row was
-- inserted into every index of the table, the HNSW ones included: a graph
-- search for a vector that had not changed, about 85% of the update's cost
-- (BenchmarkSupersedeChain, docs/benchmarks.md "Supersession chains": 0.37
-- ms more a supersession for each earlier version). With the predicate the
-- rows of superseded versions are in no HNSW index, and neither searches
-- of today nor the duplicate check ever ranked them.
--
-- A search that asks for superseded entries (includeSuperseded, asOf)
-- ranks the org's superseded versions exactly beside the index's heads
-- (the superseded side here and in sql/search_vector.sql): they are read
-- through knowledge_head_idx, the org's superseded rows only.
--
-- The indexes are dropped here and built again with the predicate by the
-- worker (EnsureVectorIndex at its start and every Upkeep pass; an org's
-- own by Upkeep): until then the vector list ranks the org exactly
-- (knowledge_vector_exact), as before any index was built.

-- +goose Up
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- +goose StatementBegin
DO $$
DECLARE
    ix text;
BEGIN
    FOR ix IN SELECT indexname FROM pg_indexes
              WHERE schemaname = current_schema() AND tablename = 'knowledge'
                AND (indexname LIKE 'knowledge\_hnsw\_m\_%' OR indexname LIKE 'knowledge\_hnsw\_org\_%')
    LOOP
        EXECUTE format('DROP INDEX %I', ix);
    END LOOP;
END
$$;
-- +goose StatementEnd

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

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- +goose StatementBegin
DO $$
DECLARE
    ix text;
BEGIN
    FOR ix IN SELECT indexname FROM pg_indexes
              WHERE schemaname = current_schema() AND tablename = 'knowledge'
                AND (indexname LIKE 'knowledge\_hnsw\_m\_%' OR indexname LIKE 'knowledge\_hnsw\_org\_%')
    LOOP
        EXECUTE format('DROP INDEX %I', ix);
    END LOOP;
END
$$;
-- +goose StatementEnd

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
    -- The entries' side: an HNSW scan of the space's index (or the org's
    -- own) under a LIMIT. Each entry once.
    entries text := format(
        'SELECT k.id, (k.embedding::%1$s <=> $2::%1$s)::float8 AS dist
         FROM %3$s k
         WHERE k.org_id = $1
           AND k.embedding_model = $3 AND vector_dims(k.embedding) = %2$s
           AND (cardinality($4) = 0 OR k.tags @> $4)
           AND ($5 OR k.head_id IS NULL)
           AND ($6 OR k.expires_at IS NULL OR k.expires_at > now())
           AND ($8::text IS NULL OR k.kind = $8) AND ($9::text IS NULL OR k.source = $9)
           AND ($10::text IS NULL OR starts_with(k.source, $10)) AND ($11::jsonb IS NULL OR k.metadata @> $11)
         ORDER BY k.embedding::%1$s <=> $2::%1$s
         LIMIT $7', typ, d, tk);
BEGIN
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
                             AND (cardinality($4) = 0 OR k.tags @> $4)
                             AND ($5 OR k.head_id IS NULL)
                             AND ($6 OR k.expires_at IS NULL OR k.expires_at > now())
                             AND ($8::text IS NULL OR k.kind = $8) AND ($9::text IS NULL OR k.source = $9)
                             AND ($10::text IS NULL OR starts_with(k.source, $10)) AND ($11::jsonb IS NULL OR k.metadata @> $11))
             ORDER BY c.embedding::%1$s <=> $2::%1$s
             LIMIT $7)
         ) x
         GROUP BY x.id
         ORDER BY 2, 1
         LIMIT $7',
        typ, d, entries, tc, tk)
    USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n,
              p_kind, p_source, p_source_prefix, p_metadata;
END
$$;
-- +goose StatementEnd
