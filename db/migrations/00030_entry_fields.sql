-- Provenance, kind and metadata on every entry (docs/knowledge.md,
-- "Entry fields: source, kind, metadata").
--
-- The old column source ('agent' | 'operator' | 'import': who made the
-- entry) becomes origin, so that "source" means one thing: where the
-- knowledge came from (a URL, a path, a ticket id), given by the agent.
--
--   source    NULL or 1..1000 characters; collated "C" so that its index
--             serves an exact match and a prefix (a byte range: the
--             caller's prefix up to the prefix followed by the highest
--             code point), whatever the database's collation.
--   kind      'semantic' (the default), 'episodic', 'procedural',
--             'reference'.
--   metadata  a flat JSON object (the domain checks keys, value types and
--             size; the CHECK here keeps the shape and bounds the size).
--
-- Indexes, so that a filter never reads the org (plans checked with
-- EXPLAIN on never-analyzed tables, docs/knowledge.md):
--   (org_id, kind, created_at, id)          list_knowledge by kind, newest first
--   (org_id, source, created_at, id)        list by source (exact: in order;
--                                           prefix: a range), get by source
--   gin (knowledge_org_metadata(org_id, metadata) jsonb_path_ops)
--                                           metadata equality (@>), per org:
--                                           {"<org>": metadata}, so a key and
--                                           value held by many orgs' entries
--                                           is a posting list per org
-- A search reads its candidates by the lists' own indexes and checks each
-- candidate's fields as it does tags (sql/search_candidates.sql: the
-- primary-key probe; the vector functions, redefined here with the
-- filters' arguments: the row the HNSW or exact scan reads).
-- +goose Up
-- On a cluster, the table's DDL below runs on its shards in parallel, and
-- Citus then refuses the function commands in the same transaction; one
-- connection per worker lets both through (a placeholder setting on a
-- single node, where it does nothing).
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
-- The constraint is dropped and added rather than renamed: Citus cannot
-- rename a constraint of a distributed table.
ALTER TABLE knowledge RENAME COLUMN source TO origin;
ALTER TABLE knowledge DROP CONSTRAINT knowledge_source_check;
ALTER TABLE knowledge ADD CONSTRAINT knowledge_origin_check CHECK (origin IN ('agent', 'operator', 'import'));

ALTER TABLE knowledge
    ADD COLUMN source text COLLATE "C"
        CONSTRAINT knowledge_source_check CHECK (char_length(source) BETWEEN 1 AND 1000),
    ADD COLUMN kind text NOT NULL DEFAULT 'semantic'
        CONSTRAINT knowledge_kind_check CHECK (kind IN ('semantic', 'episodic', 'procedural', 'reference')),
    ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'
        CONSTRAINT knowledge_metadata_check CHECK (jsonb_typeof(metadata) = 'object' AND pg_column_size(metadata) <= 16384);

CREATE INDEX knowledge_org_kind_idx ON knowledge (org_id, kind, created_at, id);
CREATE INDEX knowledge_org_source_idx ON knowledge (org_id, source, created_at, id) WHERE source IS NOT NULL;
-- IMMUTABLE: the object of an org's id and a jsonb value is the same for
-- the same arguments (jsonb_build_object is marked STABLE only because it
-- takes any type). Not p_org: not one of the per-org search functions
-- knowledge_distribute delegates by their org.
CREATE FUNCTION knowledge_org_metadata(org uuid, metadata jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object(org::text, metadata)
$$;
CREATE INDEX knowledge_metadata_idx ON knowledge USING gin (knowledge_org_metadata(org_id, metadata) jsonb_path_ops);

-- knowledge_metadata_matches: the org's entries whose metadata holds
-- p_metadata, at most p_max of them, for list_knowledge's metadata filter
-- (browse.go). As knowledge_similar_key_hits (00020): the GIN look-up
-- alone, whose key holds the org, and the org test outside it, so that no
-- other index is chosen; without statistics the planner preferred any
-- index leading with org_id (it read all of the org's 20,000 entries to
-- keep 40). SECURITY DEFINER, so the policies' org test is not one more
-- way in: the function checks the org against them itself.
-- +goose StatementBegin
CREATE FUNCTION knowledge_metadata_matches(p_org uuid, p_metadata jsonb, p_max int)
RETURNS TABLE (id uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF p_org IS DISTINCT FROM coalesce(app_org_id(), p_org) THEN
        RETURN; -- another org than the one the policies enforce: nothing
    END IF;
    RETURN QUERY
    SELECT h.id FROM (
        SELECT k.id, k.org_id FROM knowledge k
        WHERE knowledge_org_metadata(k.org_id, k.metadata) @> knowledge_org_metadata(p_org, p_metadata)
        LIMIT p_max
    ) h
    WHERE h.org_id = p_org;
END
$$;
-- +goose StatementEnd

-- The vector list's functions with the filters: kind, source (exact),
-- source prefix and metadata (@>), each NULL when not asked for. Otherwise
-- as in 00011_vector_chunk_limit.sql and 00017_vector_exact_chunks.sql,
-- settings included.
DROP FUNCTION knowledge_vector_hnsw(uuid, vector, text, text[], bool, bool, int);
DROP FUNCTION knowledge_vector_exact(uuid, vector, text, text[], bool, bool, int);
-- +goose StatementBegin
CREATE FUNCTION knowledge_vector_hnsw(p_org uuid, p_vec vector, p_model text, p_tags text[],
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
CREATE FUNCTION knowledge_vector_exact(p_org uuid, p_vec vector, p_model text, p_tags text[],
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

-- On a cluster: nothing new to distribute (columns of a distributed
-- table); kept so every migration ends the same way.
SELECT knowledge_distribute();

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
DROP FUNCTION knowledge_vector_hnsw(uuid, vector, text, text[], bool, bool, int, text, text, text, jsonb);
DROP FUNCTION knowledge_vector_exact(uuid, vector, text, text[], bool, bool, int, text, text, text, jsonb);
-- +goose StatementBegin
CREATE FUNCTION knowledge_vector_hnsw(p_org uuid, p_vec vector, p_model text, p_tags text[],
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
-- +goose StatementBegin
CREATE FUNCTION knowledge_vector_exact(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                  p_include_superseded bool, p_include_expired bool, p_n int)
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
                        AND (p_include_expired OR k.expires_at IS NULL OR k.expires_at > now()))
    ) x
    GROUP BY x.id
    ORDER BY 2, 1
    LIMIT p_n;
END
$$;
-- +goose StatementEnd
DROP FUNCTION knowledge_metadata_matches(uuid, jsonb, int);
DROP INDEX knowledge_metadata_idx;
DROP FUNCTION knowledge_org_metadata(uuid, jsonb);
DROP INDEX knowledge_org_source_idx;
DROP INDEX knowledge_org_kind_idx;
ALTER TABLE knowledge DROP COLUMN metadata, DROP COLUMN kind, DROP COLUMN source;
ALTER TABLE knowledge DROP CONSTRAINT knowledge_origin_check;
ALTER TABLE knowledge RENAME COLUMN origin TO source;
ALTER TABLE knowledge ADD CONSTRAINT knowledge_source_check CHECK (source IN ('agent', 'operator', 'import'));
