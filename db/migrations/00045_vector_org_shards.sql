-- The vector list's functions read the org's shards by name on a Citus
-- worker, as the statements that call them do (00033, 00043).
--
-- The vector list (queries/search.sql) runs on the org's worker through
-- knowledge_run_org, its tables renamed to the org's shards. The two
-- functions it calls, knowledge_vector_exact (every vector of a small org)
-- and knowledge_vector_hnsw (an org with an HNSW index of its own), named
-- the distributed tables, so on the worker Citus planned their statement
-- as a distributed query, routed it to the local shard and planned it
-- again there: 2.4 ms of the worker's time a call for an org of five
-- entries, whose shard query took 0.1 ms; read on the shard by name, 0.9
-- to 1.3 ms, most of it the planning of the statement, made for each call
-- (pg_stat_statements with track = all on a worker, 200 orgs storing and
-- searching at once; docs/benchmarks.md, "Cluster"). On a single node the
-- vector list of the same search took 0.25 ms. The shards carry the
-- tables' row-level security policies: the caller (knowledge_app) sees
-- the org's rows only, as on the table.
--
-- knowledge_org_table(org, table) is the name to read one org's rows of a
-- distributed table by: on a node that holds the org's shard of it, the
-- shard; anywhere else (the coordinator, a single node) the table itself,
-- which Citus routes. On a single node it is the table's name, and the
-- functions keep their static statements there, planned as before.
-- Not p_org: not one of the per-org functions knowledge_distribute
-- delegates.
-- +goose Up
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- (SQL on a single node: inlined where it is called, it costs nothing, and
-- a row trigger calls it for each row: 00046.)
-- +goose StatementBegin
CREATE FUNCTION knowledge_org_table(org uuid, tbl text)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT tbl
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE $f$
        CREATE OR REPLACE FUNCTION knowledge_org_table(org uuid, tbl text)
        RETURNS text
        LANGUAGE plpgsql STABLE AS $body$
        DECLARE
            shard text := shard_name(tbl::regclass, get_shard_id_for_distribution_column(tbl::regclass, org));
        BEGIN
            IF to_regclass(shard) IS NOT NULL THEN
                RETURN shard;
            END IF;
            RETURN tbl;
        END
        $body$
        $f$;
    END IF;
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

-- knowledge_vector_exact: the static statement on a single node (and on
-- the coordinator); on the org's worker the same statement on its shards.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_vector_exact(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                  p_include_superseded bool, p_include_expired bool, p_n int,
        p_kind text, p_source text, p_source_prefix text, p_metadata jsonb)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET enable_seqscan = off SET enable_indexscan = off SET jit = off
SET enable_bitmapscan = on SET enable_sort = on SET enable_nestloop = off
AS $$
DECLARE
    tk text := knowledge_org_table(p_org, 'knowledge');
BEGIN
    IF tk <> 'knowledge' THEN
        RETURN QUERY EXECUTE format(
            'SELECT x.id, min(x.dist) AS dist FROM (
                SELECT k.id, k.embedding <=> $2 AS dist
                FROM %1$s k
                WHERE k.org_id = $1
                  AND k.embedding IS NOT NULL
                  AND k.embedding_model = $3 AND vector_dims(k.embedding) = vector_dims($2)
                  AND (cardinality($4) = 0 OR k.tags @> $4)
                  AND ($5 OR k.head_id IS NULL)
                  AND ($6 OR k.expires_at IS NULL OR k.expires_at > now())
                  AND ($8::text IS NULL OR k.kind = $8) AND ($9::text IS NULL OR k.source = $9)
                  AND ($10::text IS NULL OR starts_with(k.source, $10)) AND ($11::jsonb IS NULL OR k.metadata @> $11)
                UNION ALL
                SELECT c.entry_id, c.dist
                FROM (SELECT c.entry_id, c.embedding <=> $2 AS dist
                      FROM %2$s c
                      WHERE c.org_id = $1
                        AND c.embedding_model = $3 AND vector_dims(c.embedding) = vector_dims($2)
                      OFFSET 0) c
                WHERE EXISTS (SELECT 1 FROM %1$s k
                              WHERE k.org_id = $1 AND k.id = c.entry_id AND k.embedding IS NOT NULL
                                AND (cardinality($4) = 0 OR k.tags @> $4)
                                AND ($5 OR k.head_id IS NULL)
                                AND ($6 OR k.expires_at IS NULL OR k.expires_at > now())
                                AND ($8::text IS NULL OR k.kind = $8) AND ($9::text IS NULL OR k.source = $9)
                                AND ($10::text IS NULL OR starts_with(k.source, $10)) AND ($11::jsonb IS NULL OR k.metadata @> $11))
            ) x
            GROUP BY x.id
            ORDER BY 2, 1
            LIMIT $7', tk, knowledge_org_table(p_org, 'knowledge_chunks'))
        USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n,
              p_kind, p_source, p_source_prefix, p_metadata;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT x.id, min(x.dist) AS dist FROM (
        SELECT k.id, k.embedding <=> p_vec AS dist
        FROM knowledge k
        WHERE k.org_id = p_org
          AND k.embedding IS NOT NULL
          AND k.embedding_model = p_model AND vector_dims(k.embedding) = vector_dims(p_vec)
          AND (cardinality(p_tags) = 0 OR k.tags @> p_tags)
          AND (p_include_superseded OR k.head_id IS NULL)
          AND (p_include_expired OR k.expires_at IS NULL OR k.expires_at > now())
          AND (p_kind IS NULL OR k.kind = p_kind) AND (p_source IS NULL OR k.source = p_source)
          AND (p_source_prefix IS NULL OR starts_with(k.source, p_source_prefix)) AND (p_metadata IS NULL OR k.metadata @> p_metadata)
        UNION ALL
        SELECT c.entry_id, c.dist
        FROM (SELECT c.entry_id, c.embedding <=> p_vec AS dist
              FROM knowledge_chunks c
              WHERE c.org_id = p_org
                AND c.embedding_model = p_model AND vector_dims(c.embedding) = vector_dims(p_vec)
              OFFSET 0) c
        WHERE EXISTS (SELECT 1 FROM knowledge k
                      WHERE k.org_id = p_org AND k.id = c.entry_id AND k.embedding IS NOT NULL
                        AND (cardinality(p_tags) = 0 OR k.tags @> p_tags)
                        AND (p_include_superseded OR k.head_id IS NULL)
                        AND (p_include_expired OR k.expires_at IS NULL OR k.expires_at > now())
                        AND (p_kind IS NULL OR k.kind = p_kind) AND (p_source IS NULL OR k.source = p_source)
                        AND (p_source_prefix IS NULL OR starts_with(k.source, p_source_prefix)) AND (p_metadata IS NULL OR k.metadata @> p_metadata))
    ) x
    GROUP BY x.id
    ORDER BY 2, 1
    LIMIT p_n;
END
$$;
-- +goose StatementEnd

-- On a cluster, as 00033: the coordinator's static statement plans custom
-- (a replaced function loses the setting).
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        ALTER FUNCTION knowledge_vector_exact(uuid, vector, text, text[], bool, bool, int, text, text, text, jsonb)
            SET plan_cache_mode = force_custom_plan;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
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
    -- The entries' side: an HNSW scan of the space's index (or the org's
    -- own) under a LIMIT. Each entry once.
    entries text := format(
        'SELECT k.id, (k.embedding::%1$s <=> $2::%1$s)::float8 AS dist
         FROM knowledge k
         WHERE k.org_id = $1
           AND k.embedding_model = $3 AND vector_dims(k.embedding) = %2$s
           AND (cardinality($4) = 0 OR k.tags @> $4)
           AND ($5 OR k.head_id IS NULL)
           AND ($6 OR k.expires_at IS NULL OR k.expires_at > now())
           AND ($8::text IS NULL OR k.kind = $8) AND ($9::text IS NULL OR k.source = $9)
           AND ($10::text IS NULL OR starts_with(k.source, $10)) AND ($11::jsonb IS NULL OR k.metadata @> $11)
         ORDER BY k.embedding::%1$s <=> $2::%1$s
         LIMIT $7', typ, d);
BEGIN
    -- An org without chunks of the space (short entries only, the common
    -- case) runs the entries' side alone: the chunks' side, even skipped at
    -- run time, was most of the planning of every call (0.55 ms of planning
    -- with it, 0.22 without). The probe is a static statement, planned as
    -- a key probe of the space index.
    IF NOT EXISTS (SELECT 1 FROM knowledge_chunks c0
                   WHERE c0.org_id = p_org AND c0.embedding_model = p_model AND vector_dims(c0.embedding) = d) THEN
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
             FROM knowledge_chunks c
             WHERE c.org_id = $1
               AND c.embedding_model = $3 AND vector_dims(c.embedding) = %2$s
               AND EXISTS (SELECT 1 FROM knowledge k
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
        typ, d, entries)
    USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n,
              p_kind, p_source, p_source_prefix, p_metadata;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_vector_exact(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                  p_include_superseded bool, p_include_expired bool, p_n int,
        p_kind text, p_source text, p_source_prefix text, p_metadata jsonb)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET enable_seqscan = off SET enable_indexscan = off SET jit = off
SET enable_bitmapscan = on SET enable_sort = on SET enable_nestloop = off
AS $$
BEGIN
    RETURN QUERY
    SELECT x.id, min(x.dist) AS dist FROM (
        SELECT k.id, k.embedding <=> p_vec AS dist
        FROM knowledge k
        WHERE k.org_id = p_org
          AND k.embedding IS NOT NULL
          AND k.embedding_model = p_model AND vector_dims(k.embedding) = vector_dims(p_vec)
          AND (cardinality(p_tags) = 0 OR k.tags @> p_tags)
          AND (p_include_superseded OR k.head_id IS NULL)
          AND (p_include_expired OR k.expires_at IS NULL OR k.expires_at > now())
          AND (p_kind IS NULL OR k.kind = p_kind) AND (p_source IS NULL OR k.source = p_source)
          AND (p_source_prefix IS NULL OR starts_with(k.source, p_source_prefix)) AND (p_metadata IS NULL OR k.metadata @> p_metadata)
        UNION ALL
        SELECT c.entry_id, c.dist
        FROM (SELECT c.entry_id, c.embedding <=> p_vec AS dist
              FROM knowledge_chunks c
              WHERE c.org_id = p_org
                AND c.embedding_model = p_model AND vector_dims(c.embedding) = vector_dims(p_vec)
              OFFSET 0) c
        WHERE EXISTS (SELECT 1 FROM knowledge k
                      WHERE k.org_id = p_org AND k.id = c.entry_id AND k.embedding IS NOT NULL
                        AND (cardinality(p_tags) = 0 OR k.tags @> p_tags)
                        AND (p_include_superseded OR k.head_id IS NULL)
                        AND (p_include_expired OR k.expires_at IS NULL OR k.expires_at > now())
                        AND (p_kind IS NULL OR k.kind = p_kind) AND (p_source IS NULL OR k.source = p_source)
                        AND (p_source_prefix IS NULL OR starts_with(k.source, p_source_prefix)) AND (p_metadata IS NULL OR k.metadata @> p_metadata))
    ) x
    GROUP BY x.id
    ORDER BY 2, 1
    LIMIT p_n;
END
$$;
-- +goose StatementEnd


-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        ALTER FUNCTION knowledge_vector_exact(uuid, vector, text, text[], bool, bool, int, text, text, text, jsonb)
            SET plan_cache_mode = force_custom_plan;
    END IF;
END
$$;
-- +goose StatementEnd

DROP FUNCTION knowledge_org_table(uuid, text);
