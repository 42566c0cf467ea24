-- Metadata filters read their matches from a structure of their own
-- (issue 37; docs/knowledge.md, "Filtered search").
--
--   knowledge_metadata_pairs  one row per entry and metadata key/value pair
--                             it holds: (org, pair, entry). The pair is a
--                             64-bit hash of the key and its value
--                             (knowledge_metadata_pair_keys), so the rows are
--                             narrow and a filter's matches are one range of
--                             the primary key, the org's only.
--
-- A filter's matches were read from a GIN index of the entries' table
-- (knowledge_metadata_idx, 00030): a bitmap of heap rows, each entry's wide
-- row (its vector is inline) read and rechecked, as many as the filter
-- passes, before the search itself read them again; at 100,000 entries a
-- filter passing 1 in 100 made search 2.65x the unfiltered one
-- (docs/benchmarks.md, "Entry field filters"). The rows here are 40-odd
-- bytes. A hash that two pairs share only adds candidates: every reader
-- still tests the entry's metadata itself (metadata @> filter).
--
-- Kept by triggers on knowledge, in the writer's transaction, so every way
-- an entry is written keeps them: store, supersede and correct (new
-- entries), documents' sections, import (COPY fires them too), and
-- forget and purge (the delete takes the entry's pairs with it). An
-- entry's metadata never changes after its insert; an update of the column
-- is kept anyway. An entry without metadata has no rows.
-- +goose Up
-- On a cluster: one connection per worker lets the DDL and the function
-- commands through in one transaction (00030), and a trigger on a
-- distributed table needs citus.enable_unsafe_triggers (the trigger writes
-- rows of its own org, co-located: 00027). Placeholder settings on a single
-- node, where they do nothing. Writers wait for the migration (SHARE), so
-- no entry is written between the backfill and the triggers.
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);
LOCK TABLE knowledge IN SHARE MODE;

-- The pairs of a metadata object: for each key with a string, number or
-- boolean value, a hash of "<key>=<type><value>", the value in the form
-- containment (@>) compares: a string as its text, a number without
-- trailing zeros (42 and 42.0 are equal to @>, so they hash alike), a
-- boolean as true or false. Arrays, objects and null have no pair (stored
-- metadata holds none of them: domain.CheckMetadataEntry); hashtextextended
-- is PostgreSQL's stable 64-bit text hash (the one hash partitioning
-- relies on). PL/pgSQL, not SQL: its query is planned once per connection
-- (an SQL function of this shape, which cannot be inlined, was planned
-- again at each call from a trigger or a search statement: 0.9 ms an
-- inserted row under load, against 0.1 ms).
-- +goose StatementBegin
CREATE FUNCTION knowledge_metadata_pair_keys(metadata jsonb) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $$
BEGIN
    RETURN (SELECT coalesce(array_agg(DISTINCT hashtextextended(e.key || '=' || CASE jsonb_typeof(e.value)
                                          WHEN 'string' THEN 's' || (e.value #>> '{}')
                                          WHEN 'number' THEN 'n' || trim_scale((e.value #>> '{}')::numeric)::text
                                          ELSE 'b' || (e.value #>> '{}') END, 0)), '{}')
            FROM jsonb_each(CASE WHEN jsonb_typeof(metadata) = 'object' THEN metadata ELSE '{}' END) AS e
            WHERE jsonb_typeof(e.value) IN ('string', 'number', 'boolean'));
END
$$;
-- +goose StatementEnd

CREATE TABLE knowledge_metadata_pairs (
    org_id   uuid   NOT NULL,
    pair     bigint NOT NULL,
    entry_id uuid   NOT NULL,
    PRIMARY KEY (org_id, pair, entry_id)
);
-- No foreign key to knowledge: a cascade would need a second index (by
-- entry) on every pair row; the delete trigger finds an entry's rows by
-- the primary key instead, from the entry's own metadata.
ALTER TABLE knowledge_metadata_pairs ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_metadata_pairs_org ON knowledge_metadata_pairs
    USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());

-- The new entries' pairs, one INSERT a statement (a COPY of an import or
-- a document's sections: one for all its rows; a trigger a row cost 0.4
-- ms an entry under load, this one 0.1). The transition table is read
-- into arrays by a statement of its own and the INSERT reads the arrays:
-- on Citus the trigger runs on the shard, and an INSERT into a
-- distributed table cannot read a transition table (as
-- knowledge_count_changes, 00027).
-- +goose StatementBegin
CREATE FUNCTION knowledge_metadata_pairs_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    orgs uuid[];
    pairs bigint[];
    entries uuid[];
BEGIN
    SELECT array_agg(n.org_id), array_agg(p), array_agg(n.id) INTO orgs, pairs, entries
    FROM new_rows n CROSS JOIN LATERAL unnest(knowledge_metadata_pair_keys(n.metadata)) AS p
    WHERE n.metadata <> '{}';
    IF entries IS NOT NULL THEN
        INSERT INTO knowledge_metadata_pairs (org_id, pair, entry_id)
        SELECT u.org_id, u.pair, u.entry_id FROM unnest(orgs, pairs, entries) AS u (org_id, pair, entry_id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- An erased entry's pairs (and an update of the column, which no writer
-- makes), a row at a time: each a primary-key delete of the org's rows, a
-- statement Citus routes to the org's shard.
-- +goose StatementBegin
CREATE FUNCTION knowledge_metadata_pairs_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM knowledge_metadata_pairs m
    WHERE m.org_id = OLD.org_id AND m.pair = ANY (knowledge_metadata_pair_keys(OLD.metadata)) AND m.entry_id = OLD.id;
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO knowledge_metadata_pairs (org_id, pair, entry_id)
        SELECT NEW.org_id, p, NEW.id FROM unnest(knowledge_metadata_pair_keys(NEW.metadata)) AS p;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- knowledge_metadata_matches (00030), read from the pairs: at most p_max
-- of the org's entries whose metadata holds p_metadata, for a listing's
-- and a search's filter (search/filtersearch.go). Fewer than p_max rows
-- are every match (a candidate of each of the filter's pairs, checked for
-- the others by key); p_max rows say that the filter is common. The
-- filter's pairs are read in turn, each up to p_max entries, until one has
-- fewer: the matches are among those, and each is probed (primary key) for
-- the filter's other pairs. When every pair is held by p_max entries or
-- more the filter counts as common, however few entries hold them all
-- (the lists then test it on their candidates: the same answer). Plans
-- pinned by the settings and the shape (a probe is a LATERAL with LIMIT
-- 1, never a join over the org's pairs), not by statistics. SECURITY
-- DEFINER, as before: it checks the org against the policies itself.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_metadata_matches(p_org uuid, p_metadata jsonb, p_max int)
RETURNS TABLE (id uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET jit = off
AS $$
DECLARE
    pairs bigint[] := knowledge_metadata_pair_keys(p_metadata);
    p bigint;
    o bigint;
    got uuid[];
BEGIN
    IF p_org IS DISTINCT FROM coalesce(app_org_id(), p_org) THEN
        RETURN; -- another org than the one the policies enforce: nothing
    END IF;
    IF coalesce(cardinality(pairs), 0) = 0 THEN
        -- Nothing a pair can find (not an object of strings, numbers and
        -- booleans; the domain lets no such filter through): the rows.
        RETURN QUERY SELECT k.id FROM knowledge k WHERE k.org_id = p_org AND k.metadata @> p_metadata LIMIT p_max;
        RETURN;
    END IF;
    FOREACH p IN ARRAY pairs LOOP
        SELECT array_agg(m.entry_id) INTO got
        FROM (SELECT m.entry_id FROM knowledge_metadata_pairs m
              WHERE m.org_id = p_org AND m.pair = p LIMIT p_max) m;
        IF coalesce(cardinality(got), 0) < p_max THEN
            FOREACH o IN ARRAY pairs LOOP
                CONTINUE WHEN o = p OR got IS NULL;
                SELECT array_agg(g.id) INTO got
                FROM unnest(got) AS g (id)
                CROSS JOIN LATERAL (SELECT 1 FROM knowledge_metadata_pairs m
                                    WHERE m.org_id = p_org AND m.pair = o AND m.entry_id = g.id LIMIT 1) x;
            END LOOP;
            RETURN QUERY SELECT g.id FROM unnest(got) AS g (id);
            RETURN;
        END IF;
    END LOOP;
    RETURN QUERY SELECT g.id FROM unnest(got) AS g (id); -- p_max rows: common
END
$$;
-- +goose StatementEnd

-- The GIN index served only the function above; every store paid for it.
DROP INDEX knowledge_metadata_idx;
DROP FUNCTION knowledge_org_metadata(uuid, jsonb);

-- On a cluster: the table distributed by org_id, co-located with knowledge
-- (00027), and the functions made on every node, before the triggers that
-- call them and the backfill that writes the shards.
SELECT knowledge_distribute();

CREATE TRIGGER knowledge_metadata_pairs_inserts AFTER INSERT ON knowledge
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION knowledge_metadata_pairs_insert();
CREATE TRIGGER knowledge_metadata_pairs_deletes AFTER DELETE ON knowledge
FOR EACH ROW WHEN (OLD.metadata <> '{}') EXECUTE FUNCTION knowledge_metadata_pairs_sync();
CREATE TRIGGER knowledge_metadata_pairs_updates AFTER UPDATE OF metadata ON knowledge
FOR EACH ROW WHEN (OLD.metadata IS DISTINCT FROM NEW.metadata) EXECUTE FUNCTION knowledge_metadata_pairs_sync();

-- The entries that exist.
INSERT INTO knowledge_metadata_pairs (org_id, pair, entry_id)
SELECT k.org_id, p, k.id
FROM knowledge k CROSS JOIN LATERAL unnest(knowledge_metadata_pair_keys(k.metadata)) AS p
WHERE k.metadata <> '{}';

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);
DROP TRIGGER knowledge_metadata_pairs_updates ON knowledge;
DROP TRIGGER knowledge_metadata_pairs_deletes ON knowledge;
DROP TRIGGER knowledge_metadata_pairs_inserts ON knowledge;
DROP FUNCTION knowledge_metadata_pairs_sync();
DROP FUNCTION knowledge_metadata_pairs_insert();
DROP TABLE knowledge_metadata_pairs;
CREATE FUNCTION knowledge_org_metadata(org uuid, metadata jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object(org::text, metadata)
$$;
CREATE INDEX knowledge_metadata_idx ON knowledge USING gin (knowledge_org_metadata(org_id, metadata) jsonb_path_ops);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_metadata_matches(p_org uuid, p_metadata jsonb, p_max int)
RETURNS TABLE (id uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF p_org IS DISTINCT FROM coalesce(app_org_id(), p_org) THEN
        RETURN;
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
DROP FUNCTION knowledge_metadata_pair_keys(jsonb);
SELECT knowledge_distribute();
