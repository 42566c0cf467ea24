-- The chunk side of the vector list's HNSW plan reads as many chunks as
-- the list has places (p_n), not twice as many. The list keeps the p_n
-- entries nearest the query by their best vector (their own or a chunk's);
-- a chunk past the p_n nearest chunks can only place its entry when several
-- of those belong to one entry, and the HNSW scan is iterative
-- (relaxed_order): each chunk past ef_search costs more of the scan. The
-- second p_n cost 0.4 ms of a 5,000-entry org's search with 988 chunks
-- (1.1 -> 0.7 ms for that side) and changed nothing measurable on NFCorpus
-- (docs/benchmarks.md, "Issue 9, sixth pass").
--
-- And an org without chunks of the space no longer has the chunks' side
-- planned on every call (below). Otherwise as in 00008_embedding_width.sql.
-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_vector_hnsw(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                 p_include_superseded bool, p_include_expired bool, p_n int)
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
        RETURN QUERY EXECUTE entries USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n;
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
                             AND ($6 OR k.expires_at IS NULL OR k.expires_at > now()))
             ORDER BY c.embedding::%1$s <=> $2::%1$s
             LIMIT $7)
         ) x
         GROUP BY x.id
         ORDER BY 2, 1
         LIMIT $7',
        typ, d, entries)
    USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_vector_hnsw(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                 p_include_superseded bool, p_include_expired bool, p_n int)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET plan_cache_mode = force_custom_plan SET jit = off
AS $$
DECLARE
    d int := vector_dims(p_vec);
BEGIN
    -- An entry is ranked by its best vector: its own (the first chunk) or
    -- one of its chunks'. Each side is an HNSW scan of its table's index of
    -- the space, under a LIMIT; a chunk's entry is checked against the
    -- filters by a primary-key probe. An entry may come from both sides and
    -- from several chunks: the best distance is kept.
    RETURN QUERY EXECUTE format(
        'SELECT x.id, min(x.dist) AS dist FROM (
            (SELECT k.id, (k.embedding::%1$s <=> $2::%1$s)::float8 AS dist
             FROM knowledge k
             WHERE k.org_id = $1
               AND k.embedding_model = $3 AND vector_dims(k.embedding) = %2$s
               AND (cardinality($4) = 0 OR k.tags @> $4)
               AND ($5 OR k.head_id IS NULL)
               AND ($6 OR k.expires_at IS NULL OR k.expires_at > now())
             ORDER BY k.embedding::%1$s <=> $2::%1$s
             LIMIT $7)
            UNION ALL
            (SELECT c.entry_id, (c.embedding::%1$s <=> $2::%1$s)::float8
             FROM knowledge_chunks c
             WHERE c.org_id = $1
               AND c.embedding_model = $3 AND vector_dims(c.embedding) = %2$s
               -- An org without chunks of the space skips the scan (a one-
               -- time btree probe): walking the shared chunk index for an
               -- org it holds nothing of would visit up to
               -- hnsw.max_scan_tuples entries to find none.
               AND EXISTS (SELECT 1 FROM knowledge_chunks c0
                           WHERE c0.org_id = $1 AND c0.embedding_model = $3 AND vector_dims(c0.embedding) = %2$s)
               AND EXISTS (SELECT 1 FROM knowledge k
                           WHERE k.org_id = $1 AND k.id = c.entry_id AND k.embedding IS NOT NULL
                             AND (cardinality($4) = 0 OR k.tags @> $4)
                             AND ($5 OR k.head_id IS NULL)
                             AND ($6 OR k.expires_at IS NULL OR k.expires_at > now()))
             ORDER BY c.embedding::%1$s <=> $2::%1$s
             LIMIT $7 * 2)
         ) x
         GROUP BY x.id
         ORDER BY 2, 1
         LIMIT $7',
        CASE WHEN d <= 2000 THEN 'vector(' || d || ')' ELSE 'halfvec(' || d || ')' END, d)
    USING p_org, p_vec, p_model, p_tags, p_include_superseded, p_include_expired, p_n;
END
$$;
-- +goose StatementEnd
