-- Entries by kind, documents and sections in the org statistics (issue 27;
-- packages/knowledge/stats.go, docs/operators.md "Org statistics"),
-- counted the way 00007 counts the entries: statement-level triggers
-- append the net change of each key to knowledge_count_deltas in the
-- writer's transaction, and the worker's upkeep folds them. New keys:
--
--   entry_kind   heads (expired ones included) by kind: semantic,
--                episodic, procedural, reference
--   expiry       heads with an expiry, by the hour it falls in and their
--                kind: '<hour>/<kind>' (it was '<hour>'), so the expired
--                heads are known by kind and the current heads by kind add
--                up to the current heads
--   document     key 'live': the org's live documents
--                (knowledge_documents.live), by a trigger on that table
--   section      key 'live': the current sections (knowledge_sections
--                rows not ended: what get_knowledge of a document lists),
--                by a trigger on that table
--
-- The counts of what exists are made here from the rows. Writers wait
-- (SHARE locks, taken first) so that no write is counted twice or missed
-- between the old trigger and the new one.
-- +goose Up
-- On a cluster: one connection per worker lets the tables' DDL and the
-- function commands through in one transaction (00030), and a trigger on a
-- distributed table needs citus.enable_unsafe_triggers (each trigger
-- writes rows of its own org, co-located: 00027). Placeholder settings on
-- a single node, where they do nothing.
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);
LOCK TABLE knowledge, knowledge_documents, knowledge_sections IN SHARE MODE;

CREATE FUNCTION knowledge_count_keys(is_head boolean, status text, model text, agent uuid, tags text[], expires timestamptz, entry_kind text)
RETURNS TABLE (kind text, key text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'state', CASE WHEN is_head THEN 'head' ELSE 'superseded' END
    UNION ALL SELECT 'status', status
    UNION ALL SELECT 'model', coalesce(model, '') WHERE status = 'ready'
    UNION ALL SELECT 'agent', coalesce(agent::text, '')
    UNION ALL SELECT 'tag', t FROM unnest(tags) AS t
    UNION ALL SELECT 'entry_kind', entry_kind WHERE is_head
    -- Heads with an expiry, by the hour it falls in (hours since the
    -- epoch) and kind: "expired" is the hours past plus the current hour's
    -- heads already past their expiry (read through knowledge_expiry_idx).
    UNION ALL SELECT 'expiry', floor(extract(epoch FROM expires) / 3600)::bigint::text || '/' || entry_kind
        WHERE is_head AND expires IS NOT NULL
$$;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_count_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    deltas knowledge_count_deltas[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(ROW(NULL, x.org_id, x.kind, x.key, x.n)::knowledge_count_deltas ORDER BY x.org_id, x.kind, x.key) INTO deltas
        FROM (SELECT r.org_id, c.kind, c.key, count(*) AS n
              FROM new_rows r,
                   knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at, r.kind) c
              GROUP BY 1, 2, 3) x;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(ROW(NULL, x.org_id, x.kind, x.key, x.n)::knowledge_count_deltas ORDER BY x.org_id, x.kind, x.key) INTO deltas
        FROM (SELECT r.org_id, c.kind, c.key, -count(*) AS n
              FROM old_rows r,
                   knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at, r.kind) c
              GROUP BY 1, 2, 3) x;
    ELSE
        SELECT array_agg(ROW(NULL, x.org_id, x.kind, x.key, x.n)::knowledge_count_deltas ORDER BY x.org_id, x.kind, x.key) INTO deltas
        FROM (
            SELECT org_id, kind, key, sum(d)::bigint AS n
            FROM (
                SELECT r.org_id, c.kind, c.key, 1 AS d
                FROM new_rows r,
                     knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at, r.kind) c
                UNION ALL
                SELECT r.org_id, c.kind, c.key, -1
                FROM old_rows r,
                     knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at, r.kind) c
            ) y
            GROUP BY 1, 2, 3
            HAVING sum(d) <> 0) x;
    END IF;
    IF deltas IS NOT NULL THEN
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT u.org_id, u.kind, u.key, u.delta FROM unnest(deltas) AS u;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP FUNCTION knowledge_count_keys(boolean, text, text, uuid, text[], timestamptz);

-- knowledge_live_count_changes: the trigger of knowledge_documents
-- (TG_ARGV[0] 'document': rows with live) and of knowledge_sections
-- ('section': rows without ended_at). Each statement appends, per org, the
-- net change of its rows that count (key 'live'). The transition tables
-- are read in statements of their own, as 00027 does for Citus. The
-- argument, not the table's name, says which table: on a cluster the
-- trigger fires on shards, whose names differ.
-- +goose StatementBegin
CREATE FUNCTION knowledge_live_count_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    what text := TG_ARGV[0];
    counted knowledge_count_deltas[] := '{}'; -- per org: + the new rows that count, - the old
    deltas knowledge_count_deltas[];
BEGIN
    IF TG_OP <> 'DELETE' THEN
        IF what = 'document' THEN
            counted := counted || ARRAY(SELECT ROW(NULL, r.org_id, what, 'live', count(*))::knowledge_count_deltas
                                        FROM new_rows r WHERE r.live GROUP BY r.org_id);
        ELSE
            counted := counted || ARRAY(SELECT ROW(NULL, r.org_id, what, 'live', count(*))::knowledge_count_deltas
                                        FROM new_rows r WHERE r.ended_at IS NULL GROUP BY r.org_id);
        END IF;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        IF what = 'document' THEN
            counted := counted || ARRAY(SELECT ROW(NULL, r.org_id, what, 'live', -count(*))::knowledge_count_deltas
                                        FROM old_rows r WHERE r.live GROUP BY r.org_id);
        ELSE
            counted := counted || ARRAY(SELECT ROW(NULL, r.org_id, what, 'live', -count(*))::knowledge_count_deltas
                                        FROM old_rows r WHERE r.ended_at IS NULL GROUP BY r.org_id);
        END IF;
    END IF;
    SELECT array_agg(ROW(NULL, x.org_id, what, 'live', x.n)::knowledge_count_deltas ORDER BY x.org_id) INTO deltas
    FROM (SELECT c.org_id, sum(c.delta)::bigint AS n FROM unnest(counted) AS c GROUP BY 1 HAVING sum(c.delta) <> 0) x;
    IF deltas IS NOT NULL THEN
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT u.org_id, u.kind, u.key, u.delta FROM unnest(deltas) AS u;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER knowledge_document_count_inserts AFTER INSERT ON knowledge_documents
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_live_count_changes('document');
CREATE TRIGGER knowledge_document_count_updates AFTER UPDATE ON knowledge_documents
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_live_count_changes('document');
CREATE TRIGGER knowledge_document_count_deletes AFTER DELETE ON knowledge_documents
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_live_count_changes('document');
CREATE TRIGGER knowledge_section_count_inserts AFTER INSERT ON knowledge_sections
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_live_count_changes('section');
CREATE TRIGGER knowledge_section_count_updates AFTER UPDATE ON knowledge_sections
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_live_count_changes('section');
CREATE TRIGGER knowledge_section_count_deletes AFTER DELETE ON knowledge_sections
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_live_count_changes('section');

-- On a cluster the new functions go to the workers before the counts
-- below call them there.
SELECT knowledge_distribute();

-- The counts of what exists: the expiry counters again with their new
-- keys, and the new keys.
DELETE FROM knowledge_count_deltas WHERE kind = 'expiry';
DELETE FROM knowledge_counts WHERE kind = 'expiry';
INSERT INTO knowledge_counts (org_id, kind, key, n)
SELECT k.org_id, c.kind, c.key, count(*)
FROM knowledge k,
     knowledge_count_keys(k.head_id IS NULL, k.embedding_status, k.embedding_model, k.created_by_agent_id, k.tags, k.expires_at, k.kind) c
WHERE c.kind IN ('entry_kind', 'expiry')
GROUP BY 1, 2, 3;
INSERT INTO knowledge_counts (org_id, kind, key, n)
SELECT d.org_id, 'document', 'live', count(*) FROM knowledge_documents d WHERE d.live GROUP BY 1;
INSERT INTO knowledge_counts (org_id, kind, key, n)
SELECT s.org_id, 'section', 'live', count(*) FROM knowledge_sections s WHERE s.ended_at IS NULL GROUP BY 1;

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);
LOCK TABLE knowledge, knowledge_documents, knowledge_sections IN SHARE MODE;
DROP TRIGGER knowledge_section_count_deletes ON knowledge_sections;
DROP TRIGGER knowledge_section_count_updates ON knowledge_sections;
DROP TRIGGER knowledge_section_count_inserts ON knowledge_sections;
DROP TRIGGER knowledge_document_count_deletes ON knowledge_documents;
DROP TRIGGER knowledge_document_count_updates ON knowledge_documents;
DROP TRIGGER knowledge_document_count_inserts ON knowledge_documents;
DROP FUNCTION knowledge_live_count_changes();
CREATE FUNCTION knowledge_count_keys(is_head boolean, status text, model text, agent uuid, tags text[], expires timestamptz)
RETURNS TABLE (kind text, key text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'state', CASE WHEN is_head THEN 'head' ELSE 'superseded' END
    UNION ALL SELECT 'status', status
    UNION ALL SELECT 'model', coalesce(model, '') WHERE status = 'ready'
    UNION ALL SELECT 'agent', coalesce(agent::text, '')
    UNION ALL SELECT 'tag', t FROM unnest(tags) AS t
    UNION ALL SELECT 'expiry', floor(extract(epoch FROM expires) / 3600)::bigint::text WHERE is_head AND expires IS NOT NULL
$$;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_count_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    deltas knowledge_count_deltas[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(ROW(NULL, x.org_id, x.kind, x.key, x.n)::knowledge_count_deltas ORDER BY x.org_id, x.kind, x.key) INTO deltas
        FROM (SELECT r.org_id, c.kind, c.key, count(*) AS n
              FROM new_rows r,
                   knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at) c
              GROUP BY 1, 2, 3) x;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(ROW(NULL, x.org_id, x.kind, x.key, x.n)::knowledge_count_deltas ORDER BY x.org_id, x.kind, x.key) INTO deltas
        FROM (SELECT r.org_id, c.kind, c.key, -count(*) AS n
              FROM old_rows r,
                   knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at) c
              GROUP BY 1, 2, 3) x;
    ELSE
        SELECT array_agg(ROW(NULL, x.org_id, x.kind, x.key, x.n)::knowledge_count_deltas ORDER BY x.org_id, x.kind, x.key) INTO deltas
        FROM (
            SELECT org_id, kind, key, sum(d)::bigint AS n
            FROM (
                SELECT r.org_id, c.kind, c.key, 1 AS d
                FROM new_rows r,
                     knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at) c
                UNION ALL
                SELECT r.org_id, c.kind, c.key, -1
                FROM old_rows r,
                     knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at) c
            ) y
            GROUP BY 1, 2, 3
            HAVING sum(d) <> 0) x;
    END IF;
    IF deltas IS NOT NULL THEN
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT u.org_id, u.kind, u.key, u.delta FROM unnest(deltas) AS u;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP FUNCTION knowledge_count_keys(boolean, text, text, uuid, text[], timestamptz, text);
SELECT knowledge_distribute();
DELETE FROM knowledge_count_deltas WHERE kind IN ('entry_kind', 'expiry', 'document', 'section');
DELETE FROM knowledge_counts WHERE kind IN ('entry_kind', 'expiry', 'document', 'section');
INSERT INTO knowledge_counts (org_id, kind, key, n)
SELECT k.org_id, c.kind, c.key, count(*)
FROM knowledge k,
     knowledge_count_keys(k.head_id IS NULL, k.embedding_status, k.embedding_model, k.created_by_agent_id, k.tags, k.expires_at) c
WHERE c.kind = 'expiry'
GROUP BY 1, 2, 3;
