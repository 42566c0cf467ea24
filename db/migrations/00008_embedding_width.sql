-- Any embedding width from 64 to 3,072 (issue 12, point 1; docs/embeddings.md,
-- "Widths and the vector index"), and the chunks of long entries (point 2,
-- below: knowledge_chunks).
--
-- knowledge.embedding was vector(768): one width for every model. It becomes
-- a vector of any width, and a vector's "space" is its (embedding_model,
-- width) pair: search compares only vectors of the configured model and
-- width. HNSW needs a fixed width, so there is no index on the column any
-- more; each space gets an expression index on a cast to its width, partial
-- to its model and width, which the worker creates at start (CREATE INDEX
-- CONCURRENTLY, knowledge.Service.EnsureVectorIndex):
--
--   CREATE INDEX knowledge_hnsw_m_<hash> ON knowledge USING hnsw
--     ((embedding::vector(384)) vector_cosine_ops)
--     WHERE embedding_model = 'all-minilm' AND vector_dims(embedding) = 384
--
-- (halfvec(N) and halfvec_cosine_ops past 2,000 dimensions, vector's HNSW
-- limit; halfvec's is 4,000). knowledge_vector_hnsw below orders by the same
-- cast under the same filters, so the planner uses that index.
--
-- Cost on a populated table (run in one transaction, writes to knowledge
-- wait for it): dropping the HNSW indexes is instant; the type change is a
-- catalog change (no rewrite and no scan: a width-free vector accepts every
-- stored value; checked with pg_relation_filenode); SET STORAGE only changes
-- how rows written from now on are stored; the CHECK is NOT VALID (new rows
-- only, no scan). The one step that reads the table is the btree
-- knowledge_embedding_space_idx (24 ms for 20,000 entries of 768
-- dimensions with the pages cached, on the 2-core benchmark machine; a
-- table read from disk costs its read, ~3 KB an entry). Until the worker has rebuilt the vector index of the
-- current model (its first start after this migration; the build runs in the
-- background, stores and searches go on), searches use the exact scan of the
-- org: correct, slower for orgs of many thousand entries.
-- +goose Up
DROP INDEX IF EXISTS knowledge_embedding_hnsw_idx;
-- Upkeep's per-org indexes (knowledge_hnsw_org_<org hex>) are on the typed
-- column too; Upkeep builds them again, per model, on its next passes.
-- +goose StatementBegin
DO $$
DECLARE
    ix text;
BEGIN
    FOR ix IN SELECT c.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
              WHERE i.indrelid = 'knowledge'::regclass AND c.relname LIKE 'knowledge_hnsw_org_%'
    LOOP
        EXECUTE format('DROP INDEX %I', ix);
    END LOOP;
END
$$;
-- +goose StatementEnd
ALTER TABLE knowledge ALTER COLUMN embedding TYPE vector;
-- MAIN, not PLAIN: a vector stays in the row (the exact scan of an org reads
-- it without detoasting, 00002_search.sql) as long as the row fits a page,
-- which holds up to ~1,900 dimensions; a wider one (3,072) cannot be inline
-- at all and is moved out of line instead of failing the write. pgvector's
-- floats do not compress, so MAIN's compression attempt gives up at once.
ALTER TABLE knowledge ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE knowledge ADD CONSTRAINT knowledge_embedding_width_check
    CHECK (vector_dims(embedding) BETWEEN 64 AND 3072) NOT VALID;

-- The spaces of the stored vectors per org: what the start check reads
-- (knowledge_embedding_spaces) without scanning the table, and the exact
-- scan's bitmap of an org's vectors of one space.
CREATE INDEX knowledge_embedding_space_idx ON knowledge (org_id, embedding_model, vector_dims(embedding))
    WHERE embedding IS NOT NULL;

-- Long entries are embedded in chunks (issue 12, point 2; docs/embeddings.md,
-- "Long entries: chunks"). The entry's own vector is its first chunk's
-- (title and the body's beginning); the chunks after it are here, each with
-- its span of the body in characters, so search ranks an entry by its best
-- chunk and centres the snippet on it. During a model switch (point 3) the
-- next model's vectors of an entry are here too, its first chunk (chunk 0)
-- included, so the entry's row and the current model's search are untouched
-- until the org cuts over. org_id leads every key; deleting an entry
-- deletes its chunks, and so does clearing its vector (re-embed, forget):
-- the trigger below, so no writer can leave vectors of erased text.
CREATE TABLE knowledge_chunks (
    org_id          uuid    NOT NULL,
    entry_id        uuid    NOT NULL,
    embedding_model text    NOT NULL,
    chunk           integer NOT NULL CHECK (chunk >= 0),
    start_char      integer NOT NULL CHECK (start_char >= 0),
    end_char        integer NOT NULL,
    embedding       vector  NOT NULL CHECK (vector_dims(embedding) BETWEEN 64 AND 3072),
    PRIMARY KEY (org_id, entry_id, embedding_model, chunk),
    FOREIGN KEY (org_id, entry_id) REFERENCES knowledge (org_id, id) ON DELETE CASCADE,
    CHECK (end_char > start_char)
);
ALTER TABLE knowledge_chunks ALTER COLUMN embedding SET STORAGE MAIN;
-- An org's chunks of one space: the exact scan's bitmap.
CREATE INDEX knowledge_chunks_space_idx ON knowledge_chunks (org_id, embedding_model, vector_dims(embedding));

-- +goose StatementBegin
CREATE FUNCTION knowledge_drop_chunks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM knowledge_chunks WHERE org_id = NEW.org_id AND entry_id = NEW.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER knowledge_drop_chunks AFTER UPDATE OF embedding ON knowledge
FOR EACH ROW WHEN (OLD.embedding IS NOT NULL AND NEW.embedding IS NULL)
EXECUTE FUNCTION knowledge_drop_chunks();

-- The model an org is served from during a model switch, once it has cut
-- over to the next model (packages/knowledge/modelswitch.go); no row: the
-- configured model.
CREATE TABLE knowledge_org_spaces (
    org_id      uuid        PRIMARY KEY REFERENCES orgs (id),
    model       text        NOT NULL,
    dims        integer     NOT NULL CHECK (dims BETWEEN 64 AND 3072),
    switched_at timestamptz NOT NULL DEFAULT now()
);

-- knowledge_embedding_spaces: every (model, width) with stored vectors, and
-- how many orgs hold some: a loose index scan of knowledge_embedding_space_idx
-- (one probe per distinct (org, model, width)), so it costs the same on a
-- 1M-entry table as on an empty one, statistics or not.
-- +goose StatementBegin
CREATE FUNCTION knowledge_embedding_spaces()
RETURNS TABLE (model text, dims int, orgs bigint)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
AS $$
BEGIN
    RETURN QUERY
    WITH RECURSIVE s (org_id, model, dims) AS (
        (SELECT k.org_id, k.embedding_model, vector_dims(k.embedding) FROM knowledge k
         WHERE k.embedding IS NOT NULL
         ORDER BY k.org_id, k.embedding_model, vector_dims(k.embedding) LIMIT 1)
        UNION ALL
        SELECT n.org_id, n.model, n.dims FROM s
        CROSS JOIN LATERAL (
            SELECT k.org_id, k.embedding_model AS model, vector_dims(k.embedding) AS dims FROM knowledge k
            WHERE k.embedding IS NOT NULL
              AND (k.org_id, k.embedding_model, vector_dims(k.embedding)) > (s.org_id, s.model, s.dims)
            ORDER BY k.org_id, k.embedding_model, vector_dims(k.embedding) LIMIT 1
        ) n
    )
    SELECT s.model, s.dims, count(*) FROM s GROUP BY s.model, s.dims;
END
$$;

-- The vector list's HNSW plan (00002_search.sql) for any width: the query
-- vector's width names the space, and the statement is made with that width
-- written into it (a cast's width cannot be a parameter), the same cast the
-- space's index is on, and with the model and width filters its predicate
-- names; EXECUTE plans it with the arguments' values, so the planner can
-- prove the partial indexes (the space's, and an org's own). No JIT: the
-- final sort, under enable_sort = off, costs past jit_above_cost (the search
-- statement turns JIT off too; other callers need not).
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

-- The exact plan: the org's vectors of the space, entries' and chunks'
-- (bitmaps of the space indexes), the best per entry, sorted by distance.
CREATE OR REPLACE FUNCTION knowledge_vector_exact(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                  p_include_superseded bool, p_include_expired bool, p_n int)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET enable_seqscan = off SET enable_indexscan = off SET jit = off
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
        SELECT c.entry_id, c.embedding <=> p_vec
        FROM knowledge_chunks c
        WHERE c.org_id = p_org
          AND c.embedding_model = p_model AND vector_dims(c.embedding) = vector_dims(p_vec)
          AND EXISTS (SELECT 1 FROM knowledge k
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

-- +goose Down
-- Back to vector(768): only possible while every stored vector has 768
-- dimensions (the type change checks each one).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_vector_exact(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                  p_include_superseded bool, p_include_expired bool, p_n int)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET enable_seqscan = off SET enable_indexscan = off
AS $$
BEGIN
    RETURN QUERY
    SELECT k.id, k.embedding <=> p_vec
    FROM knowledge k
    WHERE k.org_id = p_org
      AND k.embedding_status = 'ready' AND k.embedding_model = p_model
      AND (cardinality(p_tags) = 0 OR k.tags @> p_tags)
      AND (p_include_superseded OR k.head_id IS NULL)
      AND (p_include_expired OR k.expires_at IS NULL OR k.expires_at > now())
    ORDER BY k.embedding <=> p_vec
    LIMIT p_n;
END
$$;

CREATE OR REPLACE FUNCTION knowledge_vector_hnsw(p_org uuid, p_vec vector, p_model text, p_tags text[],
                                                 p_include_superseded bool, p_include_expired bool, p_n int)
RETURNS TABLE (id uuid, dist float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT k.id, k.embedding <=> p_vec
    FROM knowledge k
    WHERE k.org_id = p_org
      AND k.embedding_status = 'ready' AND k.embedding_model = p_model
      AND (cardinality(p_tags) = 0 OR k.tags @> p_tags)
      AND (p_include_superseded OR k.head_id IS NULL)
      AND (p_include_expired OR k.expires_at IS NULL OR k.expires_at > now())
    ORDER BY k.embedding <=> p_vec
    LIMIT p_n;
END
$$;

DO $$
DECLARE
    ix text;
BEGIN
    FOR ix IN SELECT c.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
              WHERE i.indrelid = 'knowledge'::regclass AND c.relname LIKE 'knowledge_hnsw_%'
    LOOP
        EXECUTE format('DROP INDEX %I', ix);
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION knowledge_embedding_spaces();
DROP TRIGGER knowledge_drop_chunks ON knowledge;
DROP FUNCTION knowledge_drop_chunks();
DROP TABLE knowledge_chunks;
DROP TABLE knowledge_org_spaces;
DROP INDEX knowledge_embedding_space_idx;
ALTER TABLE knowledge DROP CONSTRAINT knowledge_embedding_width_check;
ALTER TABLE knowledge ALTER COLUMN embedding SET STORAGE PLAIN;
ALTER TABLE knowledge ALTER COLUMN embedding TYPE vector(768);
CREATE INDEX knowledge_embedding_hnsw_idx ON knowledge USING hnsw (embedding vector_cosine_ops);
