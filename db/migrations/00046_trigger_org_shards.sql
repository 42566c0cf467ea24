-- Two of the store's triggers write the org's shards by name on a Citus
-- worker, as the vector functions read them (00045).
--
-- On a cluster the triggers of knowledge run on its shards, on the org's
-- worker, and the rows they write (the duplicate-check keys, the lexical
-- index's queue) went to the distributed tables: Citus planned each as a
-- distributed statement there and routed it to the local shard, 0.2-0.7
-- ms each a store (pg_stat_statements with track = all on a worker),
-- where the same statements take 0.05-0.1 ms on a single node. (The
-- counters' deltas stay on the distributed table: their id is an identity
-- column, which Citus fills from the worker's own range of the sequence;
-- the shard itself has no default for it.) A statement's rows are
-- all in one shard of knowledge, so of one shard group: any row's org
-- names the shard of the target table (knowledge_org_table, 00045). On a
-- single node, and wherever the shard is not local, the static statements
-- run as before.
-- +goose Up
-- On a cluster, as 00037: one connection per worker for the function
-- commands; the triggers on distributed tables are allowed.
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_similar_keys_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    orgs uuid[];
    entries uuid[];
    keysets text[];
    target text;
BEGIN
    -- (Arrays of arrays must be of one length; the keys go as text.)
    SELECT array_agg(n.org_id), array_agg(n.id), array_agg(n.similar_keys::text) INTO orgs, entries, keysets
    FROM new_rows n
    WHERE n.similar_keys IS NOT NULL;
    IF entries IS NULL THEN
        RETURN NULL;
    END IF;
    target := knowledge_org_table(orgs[1], 'knowledge_similar_keys');
    IF target = 'knowledge_similar_keys' THEN
        INSERT INTO knowledge_similar_keys (org_id, entry_id, keys)
        SELECT u.org_id, u.entry_id, u.keys::bigint[] FROM unnest(orgs, entries, keysets) AS u (org_id, entry_id, keys);
    ELSE
        EXECUTE format('INSERT INTO %s (org_id, entry_id, keys) SELECT u.org_id, u.entry_id, u.keys::bigint[] FROM unnest($1, $2, $3) AS u (org_id, entry_id, keys)', target)
            USING orgs, entries, keysets;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_queue_for_index() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    target text := knowledge_org_table(NEW.org_id, 'knowledge_index_queue');
BEGIN
    IF target = 'knowledge_index_queue' THEN
        INSERT INTO knowledge_index_queue (org_id, entry_id) VALUES (NEW.org_id, NEW.id);
    ELSE
        EXECUTE format('INSERT INTO %s (org_id, entry_id) VALUES ($1, $2)', target) USING NEW.org_id, NEW.id;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_similar_keys_insert() RETURNS trigger
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_queue_for_index() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO knowledge_index_queue (org_id, entry_id) VALUES (NEW.org_id, NEW.id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
