-- The exact vector list on the org's Citus worker runs a statement
-- prepared once per session and shard group (knowledge_org_prepare, 00043)
-- with its generic plan kept, instead of a dynamic statement planned on
-- every call (00045).
--
-- On a worker, knowledge_vector_exact built the statement for the org's
-- shards and ran it with EXECUTE: planned each call, 0.8 ms of a worker's
-- time for a scan of 0.26 ms, 4,141 plans in 4,141 calls a run
-- (pg_stat_statements with track_planning, 200 orgs storing and searching;
-- docs/benchmarks.md, "Cluster"). Prepared by name per shard group
-- (knowledge_vexact_<hash of the text>_<shard>) like the indexer's batch,
-- it is planned once per session and group, and again only after the
-- shards' tables change. A single node and the coordinator keep the static
-- statement. PARALLEL RESTRICTED (was SAFE): a PREPARE and a session
-- setting cannot be made in a parallel worker.
-- +goose Up
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- knowledge_vector_exact_run runs the statement knowledge_vector_exact
-- prepared (its name, then its arguments), with the generic plan: VOLATILE
-- because an EXECUTE of a prepared statement is not allowed in a STABLE
-- function (it could name a write); it only reads. The arguments travel as
-- literals: an EXECUTE's parameters are expressions that cannot name the
-- caller's ($1 is not in scope), as in knowledge_run_org (00043).
-- +goose StatementBegin
CREATE FUNCTION knowledge_vector_exact_run(p_stmt text, p_org uuid, p_vec vector, p_model text, p_tags text[],
                                           p_include_superseded bool, p_include_expired bool, p_n int,
        p_kind text, p_source text, p_source_prefix text, p_metadata jsonb)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY EXECUTE format('EXECUTE %I (%L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L)', p_stmt,
        p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n,
        p_kind, p_source, p_source_prefix, p_metadata);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_vector_exact(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                  p_include_superseded bool, p_include_expired bool, p_n int,
        p_kind text, p_source text, p_source_prefix text, p_metadata jsonb)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
SET enable_seqscan = off SET enable_indexscan = off SET jit = off
SET enable_bitmapscan = on SET enable_sort = on SET enable_nestloop = off
AS $$
DECLARE
    tk text := knowledge_org_table(p_org, 'knowledge');
    -- The statement on the org's worker, its tables renamed to the org's
    -- shards (knowledge_org_sql) when prepared.
    q constant text := $q$SELECT x.id, min(x.dist) AS dist FROM (
    SELECT k.id, k.embedding <=> $2 AS dist
    FROM knowledge k
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
          FROM knowledge_chunks c
          WHERE c.org_id = $1
            AND c.embedding_model = $3 AND vector_dims(c.embedding) = vector_dims($2)
          OFFSET 0) c
    WHERE EXISTS (SELECT 1 FROM knowledge k
                  WHERE k.org_id = $1 AND k.id = c.entry_id AND k.embedding IS NOT NULL
                    AND (cardinality($4) = 0 OR k.tags @> $4)
                    AND ($5 OR k.head_id IS NULL)
                    AND ($6 OR k.expires_at IS NULL OR k.expires_at > now())
                    AND ($8::text IS NULL OR k.kind = $8) AND ($9::text IS NULL OR k.source = $9)
                    AND ($10::text IS NULL OR starts_with(k.source, $10)) AND ($11::jsonb IS NULL OR k.metadata @> $11))
) x
GROUP BY x.id
ORDER BY 2, 1
LIMIT $7$q$;
    stmt text;
BEGIN
    IF tk <> 'knowledge' THEN
        -- Prepared once per session and shard group, its generic plan
        -- made on its first run and kept: planned as a dynamic statement
        -- on every call it cost 0.8 ms of the worker's time for a 0.26 ms
        -- scan (pg_stat_statements, the 200-org load; docs/benchmarks.md,
        -- "Cluster"). The function's settings pin the plan (a bitmap
        -- scan of the org's rows), not the arguments.
        stmt := 'knowledge_vexact_' || left(md5(q), 12) || '_' || get_shard_id_for_distribution_column('knowledge', p_org);
        PERFORM knowledge_org_prepare(p_org, stmt, q, '(uuid, vector, text, text[], bool, bool, int, text, text, text, jsonb)');
        RETURN QUERY SELECT r.id, r.dist FROM knowledge_vector_exact_run(stmt, p_org, p_vec, p_model, p_tags,
            p_include_superseded, p_include_expired, p_n, p_kind, p_source, p_source_prefix, p_metadata) AS r;
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

-- On a cluster, as 00045: the coordinator's static statement plans custom
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

-- On a cluster, as 00045: the coordinator's static statement plans custom
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

DROP FUNCTION knowledge_vector_exact_run(text, uuid, vector, text, text[], bool, bool, int, text, text, text, jsonb);
