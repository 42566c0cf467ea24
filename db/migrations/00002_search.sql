-- Search that finds: a BM25 inverted index with per-org statistics, an
-- analysis function shared by indexing and querying, and list functions
-- whose plans do not depend on planner statistics.
--
-- Why an inverted index of our own: ranking by BM25 needs, for every query
-- term, the entries holding it in the order of their term weight, the
-- term's document frequency in the org, and the org's average length.
-- A GIN index on a tsvector answers "which rows match" but not "which rows
-- match best": ranking a common word read every matching row (docs/knowledge.md).
-- knowledge_postings is a btree keyed (org, field, term, impact), so the
-- best postings of a term are the first rows of one index range, whatever
-- the size of the org.
--
-- Why asynchronous: writing ~100 postings and ~100 statistics rows inside
-- the store transaction halved store throughput (measured with pgbench,
-- docs/knowledge.md). Store writes one small row to knowledge_index_queue;
-- the worker's indexer moves queued entries into the index in batches, one
-- statistics upsert per distinct term of a batch. Until then an entry is in
-- the "tail" that search scores on the fly, so it is found at once.

-- +goose Up
-- The old lexical machinery: a 'simple' tsvector (no stemming, stop words
-- kept) and its GIN index, whose pending list every search scanned, and the
-- title trigram index. A title holding the whole query holds every query
-- word, so the title list's substring test runs on the best titles by words
-- (queries/search.sql); through the trigram index, a three-letter fragment
-- common in an org of 100k entries took 776 ms.
DROP INDEX knowledge_search_tsv_idx;
ALTER TABLE knowledge DROP COLUMN search_tsv;
DROP INDEX knowledge_title_trgm_idx;

-- Vectors stored in the row, not in TOAST: the exact vector scan of an org
-- (the plan for orgs without an HNSW index of their own, see search.go)
-- detoasted every 3 KB vector, 5.2 us a row; inline it is 1.3 us. A
-- 768-dimension vector fits a page with the rest of the row; the body is
-- still compressed or moved out when large. Rows written before keep their
-- TOASTed vector until rewritten (re-embedding rewrites them).
ALTER TABLE knowledge ALTER COLUMN embedding SET STORAGE PLAIN;

-- knowledge_identifiers: the identifier-like tokens of a text, whole and
-- lower-cased, with their counts: pg_stat_activity, err_conn_reset,
-- v1.2.3, user-id, api.example.com/v2, net/http. The text search parser
-- splits these at '_' (and sometimes '.', '/'), so without them a query for
-- pg_stat_activity would only find entries holding "pg", "stat" and
-- "activ" somewhere. A dotted or slashed token also yields its pieces that
-- are identifiers themselves (pg_stat_activity.state -> pg_stat_activity).
-- +goose StatementBegin
CREATE FUNCTION knowledge_identifiers(t text)
RETURNS TABLE (term text, tf integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    WITH tok AS (
        SELECT lower(m[1]) AS tok
        FROM regexp_matches(t, '([[:alnum:]]+(?:[-_.:/@]+[[:alnum:]]+)+)', 'g') AS m
    ),
    parts AS (
        SELECT tok AS term FROM tok
        UNION ALL
        SELECT p FROM tok, regexp_split_to_table(tok, '[.:/@]+') AS p
        WHERE tok ~ '[.:/@]' AND p ~ '[-_]' AND p ~ '^[[:alnum:]].*[[:alnum:]]$'
    )
    SELECT term, count(*)::integer FROM parts GROUP BY term
$$;
-- +goose StatementEnd

-- knowledge_terms: the one analysis of the module, used by the indexer, by
-- search for entries not indexed yet, and (title '') for queries.
-- Two fields: 't' is the title, 'b' is title and body as one text (the
-- "flat" setting of BEIR/Anserini). Words come from the text search
-- configuration cfg (stop words, stemming); identifiers are added whole
-- (knowledge_identifiers). tf is the term's count in the field; len is the
-- field's length in terms, the same on every row of a field.
-- +goose StatementBegin
CREATE FUNCTION knowledge_terms(cfg regconfig, title text, body text)
RETURNS TABLE (field "char", term text, tf integer, len integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    WITH t AS (
        SELECT term, max(tf)::integer AS tf FROM (
            SELECT lexeme AS term, coalesce(cardinality(positions), 1) AS tf FROM unnest(to_tsvector(cfg, title))
            UNION ALL
            SELECT term, tf FROM knowledge_identifiers(title)
        ) x GROUP BY term
    ),
    b AS (
        SELECT term, max(tf)::integer AS tf FROM (
            SELECT lexeme AS term, coalesce(cardinality(positions), 1) AS tf FROM unnest(to_tsvector(cfg, body))
            UNION ALL
            SELECT term, tf FROM knowledge_identifiers(body)
        ) x GROUP BY term
    ),
    f AS (
        SELECT term, sum(tf)::integer AS tf FROM (SELECT * FROM t UNION ALL SELECT * FROM b) x GROUP BY term
    )
    SELECT 't'::"char", term, tf, (sum(tf) OVER ())::integer FROM t
    UNION ALL
    SELECT 'b'::"char", term, tf, (sum(tf) OVER ())::integer FROM f
$$;
-- +goose StatementEnd

-- Per-org search statistics: the text search configuration the org's
-- index was built with, how many entries are indexed and their total
-- length per field (average length = total / entries). Written only by the
-- indexer, under the row lock of this row, so it always equals the index.
CREATE TABLE knowledge_search_stats (
    org_id     uuid        NOT NULL PRIMARY KEY REFERENCES orgs (id),
    config     regconfig   NOT NULL,
    docs       bigint      NOT NULL DEFAULT 0 CHECK (docs >= 0),
    len_b      bigint      NOT NULL DEFAULT 0 CHECK (len_b >= 0),
    len_t      bigint      NOT NULL DEFAULT 0 CHECK (len_t >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Per-org document frequency of every term of every field.
CREATE TABLE knowledge_term_stats (
    org_id uuid    NOT NULL REFERENCES orgs (id),
    field  "char"  NOT NULL CHECK (field IN ('b', 't')),
    term   text    NOT NULL,
    df     integer NOT NULL CHECK (df > 0),
    PRIMARY KEY (org_id, field, term)
);

-- The inverted index. impact is the BM25 term-frequency part of the
-- posting, computed with the org's average length when it was indexed: it
-- orders a term's postings best first. Scores are computed at search time
-- from tf and len with the current statistics; impact only decides which
-- postings of a very common term are read (see queries/search.sql).
-- The key covers everything search reads, so the read is an index-only
-- scan once the visibility map is set (the indexer's upkeep vacuums).
CREATE TABLE knowledge_postings (
    org_id   uuid    NOT NULL,
    field    "char"  NOT NULL CHECK (field IN ('b', 't')),
    term     text    NOT NULL,
    impact   real    NOT NULL,
    entry_id uuid    NOT NULL,
    tf       integer NOT NULL CHECK (tf > 0),
    len      integer NOT NULL CHECK (len > 0),
    PRIMARY KEY (org_id, field, term, impact, entry_id) INCLUDE (tf, len)
);
-- No foreign key to knowledge and no index by entry: postings are derived
-- data written only by the indexer from the entry's own row (so org_id and
-- entry_id always name an entry of that org), and a second index on the
-- largest table of the module would double the indexer's writes. Search
-- joins every candidate to its knowledge row, so a posting of an entry that
-- is gone is never answered.

-- The indexer's outbox: one row per entry not in the index yet, written by
-- a trigger in the statement that inserts the entry (whatever inserts it:
-- Store, an import, a bulk load), so no entry is ever left out of the index.
-- Search scores queued entries on the fly.
CREATE TABLE knowledge_index_queue (
    org_id     uuid        NOT NULL,
    entry_id   uuid        NOT NULL,
    queued_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (org_id, entry_id),
    FOREIGN KEY (org_id, entry_id) REFERENCES knowledge (org_id, id)
);
CREATE INDEX knowledge_index_queue_org_idx ON knowledge_index_queue (org_id, queued_at);

-- +goose StatementBegin
CREATE FUNCTION knowledge_queue_for_index() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO knowledge_index_queue (org_id, entry_id) VALUES (NEW.org_id, NEW.id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER knowledge_queue_for_index AFTER INSERT ON knowledge
FOR EACH ROW EXECUTE FUNCTION knowledge_queue_for_index();

-- Entries that existed before this migration go through the indexer too.
INSERT INTO knowledge_index_queue (org_id, entry_id, queued_at)
SELECT org_id, id, created_at FROM knowledge;

-- knowledge_vector_hnsw / knowledge_vector_exact: the vector list's two
-- plans, chosen by the caller from the org's size, with the planner's
-- choices pinned by each function's own settings (they apply during the
-- call only). On a never-analyzed table the planner assumed an org is 0.5%
-- of the table and read a 100k-entry org through its btree to sort it
-- (507 ms); on a small org in a big table the HNSW scan must visit ~table/org
-- tuples per hit found. Neither choice should rest on statistics we do not
-- control. The HNSW plan: no sort and no bitmap allowed, so ORDER BY
-- distance LIMIT n is the HNSW index scan (iterative, relaxed order: the
-- caller re-ranks). The exact plan: no plain index scan, so it cannot be the
-- HNSW scan; the org's rows come from a btree bitmap and are sorted.
-- PL/pgSQL rather than SQL: its plans are cached per connection (an SQL
-- function of this kind is planned again on every call). The two bodies
-- are the same query on purpose: a function's planner settings are fixed
-- per function, so each plan needs a function of its own.
-- +goose StatementBegin
-- The HNSW plan is made for each call (force_custom_plan), with the org's
-- id as a constant: so the planner can use the org's own HNSW index when
-- Upkeep built one (upkeep.go), a partial index no generic plan can prove.
CREATE FUNCTION knowledge_vector_hnsw(p_org uuid, p_vec vector, p_model text, p_tags text[],
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

CREATE FUNCTION knowledge_vector_exact(p_org uuid, p_vec vector, p_model text, p_tags text[],
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

-- knowledge_queued: the newest p_n queued entries of the org, read backwards
-- along (org_id, queued_at) and stopping at p_n, even when the queue is long
-- (a stopped indexer) and the planner has no statistics to know it.
CREATE FUNCTION knowledge_queued(p_org uuid, p_n int)
RETURNS TABLE (entry_id uuid)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
AS $$
BEGIN
    RETURN QUERY
    SELECT q.entry_id FROM knowledge_index_queue q
    WHERE q.org_id = p_org
    ORDER BY q.queued_at DESC
    LIMIT p_n;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION knowledge_queued(uuid, int);
DROP FUNCTION knowledge_vector_exact(uuid, vector, text, text[], bool, bool, int);
DROP FUNCTION knowledge_vector_hnsw(uuid, vector, text, text[], bool, bool, int);
DROP TRIGGER knowledge_queue_for_index ON knowledge;
DROP FUNCTION knowledge_queue_for_index();
DROP TABLE knowledge_index_queue;
DROP TABLE knowledge_postings;
DROP TABLE knowledge_term_stats;
DROP TABLE knowledge_search_stats;
DROP FUNCTION knowledge_terms(regconfig, text, text);
DROP FUNCTION knowledge_identifiers(text);
CREATE INDEX knowledge_title_trgm_idx ON knowledge USING gin (title gin_trgm_ops);
ALTER TABLE knowledge ALTER COLUMN embedding SET STORAGE EXTERNAL;
ALTER TABLE knowledge ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', title), 'A') || setweight(to_tsvector('simple', body), 'B')
) STORED;
CREATE INDEX knowledge_search_tsv_idx ON knowledge USING gin (search_tsv);
