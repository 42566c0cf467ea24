-- The duplicate check's key look-up reads a table of its own (issue 37;
-- docs/knowledge.md, "Duplicates at store time").
--
--   knowledge_similar_keys  one row per entry that has keys: (org, entry,
--                           its sixteen MinHash band keys), with the GIN
--                           index of the keys the look-up walks.
--
-- The look-up (knowledge_similar_key_hits, 00020) walked a GIN index of
-- the entries' table (knowledge_similar_keys_idx, 00009) and read each hit's
-- row to recheck its keys and return them: an entry's row is wide (its
-- vector is inline, about 3 KB), and a row the worker has since given its
-- vector is a second version the index also points to, so up to @max_key_hits
-- (500) hits were as many heap pages. In an org of 100,000 short notes of
-- one vocabulary, where keys are shared by hundreds, that was 20-30 ms of
-- every store (docs/benchmarks.md, "MCP end to end"). The rows here are
-- about 200 bytes, 40 to a page, written once: an org of 100,000 entries
-- is 21 MB, which stays in shared buffers; and the entries' table loses a
-- GIN index that every update of a row (the vector's write included)
-- inserted sixteen keys into.
--
-- knowledge.similar_keys stays the record (written by every writer with
-- the row, exported and imported, filled in by Upkeep's backfill); this
-- table follows it by triggers in the writer's transaction, as the
-- metadata pairs (00041) follow metadata.
-- +goose Up
-- On a cluster, as 00041: one connection per worker for the DDL and the
-- function commands, triggers on a distributed table allowed. Writers
-- wait for the migration (SHARE), so no entry is written between the
-- backfill and the triggers.
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);
LOCK TABLE knowledge IN SHARE MODE;

-- The primary key leads with the entry, not the org: the look-up's org
-- test can then use no index but the keys' GIN (the keys are salted with
-- the org, so their matches are the org's), on a single node and on a
-- cluster alike, whatever the statistics; the triggers find an entry's
-- row by the key all the same.
CREATE TABLE knowledge_similar_keys (
    org_id   uuid     NOT NULL,
    entry_id uuid     NOT NULL,
    keys     bigint[] NOT NULL,
    PRIMARY KEY (entry_id, org_id)
);
-- fastupdate off, as the index it replaces (00009): a pending list is
-- read whole by every look-up until a vacuum moves it into the tree.
CREATE INDEX knowledge_similar_keys_keys_idx ON knowledge_similar_keys USING gin (keys) WITH (fastupdate = off);
ALTER TABLE knowledge_similar_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_similar_keys_org ON knowledge_similar_keys
    USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());

-- The new entries' keys, one INSERT a statement, the transition table read
-- into arrays first (a distributed table's INSERT cannot read it: 00041).
-- +goose StatementBegin
CREATE FUNCTION knowledge_similar_keys_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    orgs uuid[];
    entries uuid[];
    keysets text[];
BEGIN
    -- (Arrays of arrays must be of one length; the keys go as text.)
    SELECT array_agg(n.org_id), array_agg(n.id), array_agg(n.similar_keys::text) INTO orgs, entries, keysets
    FROM new_rows n
    WHERE n.similar_keys IS NOT NULL;
    IF entries IS NOT NULL THEN
        INSERT INTO knowledge_similar_keys (org_id, entry_id, keys)
        SELECT u.org_id, u.entry_id, u.keys::bigint[] FROM unnest(orgs, entries, keysets) AS u (org_id, entry_id, keys);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- An erased entry's keys, and keys written later (Upkeep's backfill, an
-- import's entry without them): a row at a time, each a primary-key
-- statement Citus routes to the org's shard.
-- +goose StatementBegin
CREATE FUNCTION knowledge_similar_keys_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.similar_keys IS NULL THEN
        DELETE FROM knowledge_similar_keys s WHERE s.entry_id = OLD.id AND s.org_id = OLD.org_id;
    ELSE
        INSERT INTO knowledge_similar_keys AS s (org_id, entry_id, keys) VALUES (NEW.org_id, NEW.id, NEW.similar_keys)
        ON CONFLICT (entry_id, org_id) DO UPDATE SET keys = excluded.keys;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- knowledge_distribute (00027) made the cluster's own look-up each time it
-- ran, which would put back a look-up of the entries' table at the next
-- migration that distributes a table: the block goes, and the look-up
-- below is the one on every node.
-- +goose StatementBegin
DO $$
DECLARE
    src text;
BEGIN
    SELECT p.prosrc INTO src FROM pg_proc p WHERE p.oid = 'knowledge_distribute()'::regprocedure;
    src := regexp_replace(src, '-- The duplicate check''s key look-up leaves.*?\$f\$;', '');
    IF position('knowledge_similar_key_hits' IN src) > 0 THEN
        RAISE EXCEPTION 'knowledge_distribute: its look-up block was not found as 00027 wrote it';
    END IF;
    EXECUTE format('CREATE OR REPLACE FUNCTION knowledge_distribute() RETURNS integer LANGUAGE plpgsql AS %L', src);
END
$$;
-- +goose StatementEnd

-- The look-up: at most p_max of the org's entries sharing a key with
-- p_keys, with their keys (similar_candidates.sql ranks them by how many
-- they share). One statement for both a single node and a cluster: the
-- org test names the shard on a cluster and can use no index here.
-- SECURITY DEFINER as before (00020): && is not LEAKPROOF, so under the
-- policy the GIN index could not be used; the function checks the org
-- against the policies itself and returns ids and keys, never content.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_similar_key_hits(p_org uuid, p_keys bigint[], p_max int)
RETURNS TABLE (id uuid, similar_keys bigint[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp
SET enable_seqscan = off SET jit = off
AS $$
BEGIN
    IF p_org IS DISTINCT FROM coalesce(app_org_id(), p_org) THEN
        RETURN; -- another org than the one the policies enforce: nothing
    END IF;
    RETURN QUERY
    SELECT s.entry_id, s.keys FROM knowledge_similar_keys s
    WHERE s.org_id = p_org AND s.keys && p_keys
    LIMIT p_max;
END
$$;
-- +goose StatementEnd


DROP INDEX knowledge_similar_keys_idx;

-- On a cluster: the table distributed by org_id, co-located with
-- knowledge, before the triggers and the backfill.
SELECT knowledge_distribute();

-- On a cluster the function is distributed by its org and keeps the two
-- settings 00027 and 00033 gave it (CREATE OR REPLACE replaced them):
-- called inside a statement routed to the org's worker it runs in the
-- shard's query, and its statement is planned for the org's value, the
-- only plan Citus routes.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        ALTER FUNCTION knowledge_similar_key_hits(uuid, bigint[], int) SET citus.allow_nested_distributed_execution = on;
        ALTER FUNCTION knowledge_similar_key_hits(uuid, bigint[], int) SET plan_cache_mode = force_custom_plan;
    END IF;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER knowledge_similar_keys_inserts AFTER INSERT ON knowledge
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION knowledge_similar_keys_insert();
CREATE TRIGGER knowledge_similar_keys_deletes AFTER DELETE ON knowledge
FOR EACH ROW WHEN (OLD.similar_keys IS NOT NULL) EXECUTE FUNCTION knowledge_similar_keys_sync();
CREATE TRIGGER knowledge_similar_keys_updates AFTER UPDATE OF similar_keys ON knowledge
FOR EACH ROW WHEN (OLD.similar_keys IS DISTINCT FROM NEW.similar_keys) EXECUTE FUNCTION knowledge_similar_keys_sync();

-- The entries that have keys.
INSERT INTO knowledge_similar_keys (org_id, entry_id, keys)
SELECT k.org_id, k.id, k.similar_keys FROM knowledge k WHERE k.similar_keys IS NOT NULL;

-- +goose Down
-- knowledge_distribute makes the cluster's look-up again, as 00027 wrote it.
-- +goose StatementBegin
DO $$
DECLARE
    src text;
    marker text := '    -- The per-org search functions run where the org''s shards are.';
    block text := $b$    -- The duplicate check's key look-up leaves its org test outside the
    -- GIN look-up on a single node (00020); on a cluster the look-up must
    -- name the org, or it would read every shard of every worker.
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION knowledge_similar_key_hits(p_org uuid, p_keys bigint[], p_max int)
    RETURNS TABLE (id uuid, similar_keys bigint[])
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $body$
    BEGIN
        IF p_org IS DISTINCT FROM coalesce(app_org_id(), p_org) THEN
            RETURN;
        END IF;
        RETURN QUERY
        SELECT k.id, k.similar_keys FROM knowledge k
        WHERE k.org_id = p_org AND k.similar_keys && p_keys
        LIMIT p_max;
    END
    $body$
    $f$;

$b$;
BEGIN
    SELECT p.prosrc INTO src FROM pg_proc p WHERE p.oid = 'knowledge_distribute()'::regprocedure;
    src := replace(src, marker, block || marker);
    EXECUTE format('CREATE OR REPLACE FUNCTION knowledge_distribute() RETURNS integer LANGUAGE plpgsql AS %L', src);
END
$$;
-- +goose StatementEnd
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);
DROP TRIGGER knowledge_similar_keys_updates ON knowledge;
DROP TRIGGER knowledge_similar_keys_deletes ON knowledge;
DROP TRIGGER knowledge_similar_keys_inserts ON knowledge;
DROP FUNCTION knowledge_similar_keys_sync();
DROP FUNCTION knowledge_similar_keys_insert();
DROP TABLE knowledge_similar_keys;
CREATE INDEX knowledge_similar_keys_idx ON knowledge USING gin (similar_keys) WITH (fastupdate = off);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_similar_key_hits(p_org uuid, p_keys bigint[], p_max int)
RETURNS TABLE (id uuid, similar_keys bigint[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF p_org IS DISTINCT FROM coalesce(app_org_id(), p_org) THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN QUERY
        SELECT k.id, k.similar_keys FROM knowledge k
        WHERE k.org_id = p_org AND k.similar_keys && p_keys
        LIMIT p_max;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT h.id, h.similar_keys FROM (
        SELECT k.id, k.org_id, k.similar_keys FROM knowledge k
        WHERE k.similar_keys && p_keys
        LIMIT p_max
    ) h
    WHERE h.org_id = p_org;
END
$$;
-- +goose StatementEnd
-- On a cluster the function is distributed by its org and keeps the two
-- settings 00027 and 00033 gave it (CREATE OR REPLACE replaced them):
-- called inside a statement routed to the org's worker it runs in the
-- shard's query, and its statement is planned for the org's value, the
-- only plan Citus routes.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        ALTER FUNCTION knowledge_similar_key_hits(uuid, bigint[], int) SET citus.allow_nested_distributed_execution = on;
        ALTER FUNCTION knowledge_similar_key_hits(uuid, bigint[], int) SET plan_cache_mode = force_custom_plan;
    END IF;
END
$$;
-- +goose StatementEnd
