-- The lexical indexer's batch reads and writes the org's shards by name on
-- a Citus cluster, as the search's statements do (00033), instead of the
-- distributed tables.
--
-- knowledge_index_org (00029) is delegated to the org's worker, and there
-- Citus planned the batch, a statement of data-modifying CTEs, as a
-- distributed query of several steps whose intermediate results it sent
-- to every node over new connections (COPY ... WITH (format result)): a
-- batch cost about three backends started, one on each node, and a run of
-- 200 orgs storing at once started 900 on each (docs/benchmarks.md,
-- "Cluster"). With the tables' names replaced by the org's shards' (plain
-- tables on that worker) PostgreSQL plans and runs the batch alone.
--
-- knowledge_org_sql is that replacement, the one rule both functions use:
-- every distributed table of the schema named in p_sql (whole words,
-- longest names first: knowledge_chunks is not knowledge followed by
-- _chunks) becomes the org's shard of it; a reference table's, its one
-- shard. It reads the cluster's metadata, so it is only called on a node
-- that has it (a worker the call was delegated to).
--
-- knowledge_org_prepare prepares a statement so renamed once per session
-- (the coordinator keeps its connections to a worker), for both. It learns
-- whether the session has from a setting of the session, a hash look-up:
-- pg_prepared_statements builds a row with the text of every statement
-- the session prepared (dozens of long ones per shard group on a worker),
-- and reading it was 0.33 ms of every knowledge_run_org call, 3.2 s of a
-- worker's 20 s in the 200-org run. The view is read only when the
-- setting says no (a PREPARE is not undone by a rollback, the setting
-- is). The indexer's batch, renamed and planned on every call, cost the
-- worker 11.3-11.6 ms a call in that run; prepared, 5.4 (docs/benchmarks.md,
-- "Cluster").
-- +goose Up
-- On a cluster, as 00041: one connection per worker for the function
-- commands.
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- +goose StatementBegin
CREATE FUNCTION knowledge_org_sql(p_org uuid, p_sql text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q text := p_sql;
    t record;
BEGIN
    FOR t IN
        SELECT p.logicalrelid::regclass AS rel, c.relname::text AS name, p.partmethod
        FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
        WHERE c.relnamespace = 'public'::regnamespace
        ORDER BY length(c.relname) DESC
    LOOP
        IF q ~ ('\m' || t.name || '\M') THEN
            q := regexp_replace(q, '\m' || t.name || '\M',
                shard_name(t.rel, get_shard_id_for_distribution_column(t.rel, CASE WHEN t.partmethod = 'h' THEN p_org END)), 'g');
        END IF;
    END LOOP;
    RETURN q;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION knowledge_org_prepare(p_org uuid, p_name text, p_sql text, p_params text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('knowledge_prepared.' || p_name, true) IS DISTINCT FROM 'on' THEN
        IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = p_name) THEN
            EXECUTE format('PREPARE %I %s AS %s', p_name, p_params, knowledge_org_sql(p_org, p_sql));
        END IF;
        PERFORM set_config('knowledge_prepared.' || p_name, 'on', false);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_run_org(p_org uuid, p_name text, p_sql text, p_settings text[], p_args text[])
RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
    stmt text;
    args text;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_settings), 0) / 2 LOOP
        PERFORM set_config(p_settings[2 * i - 1], p_settings[2 * i], true);
    END LOOP;
    PERFORM set_config('app.org_id', p_org::text, true);
    stmt := p_name || '_' || get_shard_id_for_distribution_column('knowledge', p_org);
    PERFORM knowledge_org_prepare(p_org, stmt, p_sql, '');
    SELECT string_agg(quote_nullable(a), ', ' ORDER BY n) INTO args FROM unnest(p_args) WITH ORDINALITY AS u (a, n);
    IF args IS NULL THEN
        RETURN QUERY EXECUTE format('EXECUTE %I', stmt);
    ELSE
        RETURN QUERY EXECUTE format('EXECUTE %I (%s)', stmt, args);
    END IF;
END
$$;
-- +goose StatementEnd

-- On a single node (no Citus) the function runs the statement as given;
-- it is not called there (indexer.go runs the two statements directly).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_index_org(p_org_id uuid, p_sql text, p_max int, p_k1 float8, p_b float8, p_config regconfig)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
    stmt text;
BEGIN
    INSERT INTO knowledge_search_stats (org_id, config, updated_at) VALUES (p_org_id, p_config, now())
    ON CONFLICT (org_id) DO UPDATE SET updated_at = excluded.updated_at;
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE p_sql INTO n USING p_org_id, p_max, p_k1, p_b;
        RETURN n;
    END IF;
    stmt := 'knowledge_index_' || md5(p_sql) || '_' || get_shard_id_for_distribution_column('knowledge', p_org_id);
    PERFORM knowledge_org_prepare(p_org_id, stmt, p_sql, '(uuid, int, float8, float8)');
    EXECUTE format('EXECUTE %I (%L, %s, %L, %L)', stmt, p_org_id, p_max, p_k1, p_b) INTO n;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_index_org(p_org_id uuid, p_sql text, p_max int, p_k1 float8, p_b float8, p_config regconfig)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    INSERT INTO knowledge_search_stats (org_id, config, updated_at) VALUES (p_org_id, p_config, now())
    ON CONFLICT (org_id) DO UPDATE SET updated_at = excluded.updated_at;
    EXECUTE p_sql INTO n USING p_org_id, p_max, p_k1, p_b;
    RETURN n;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_run_org(p_org uuid, p_name text, p_sql text, p_settings text[], p_args text[])
RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
    shard bigint;
    stmt text;
    q text;
    t record;
    args text;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_settings), 0) / 2 LOOP
        PERFORM set_config(p_settings[2 * i - 1], p_settings[2 * i], true);
    END LOOP;
    PERFORM set_config('app.org_id', p_org::text, true);
    shard := get_shard_id_for_distribution_column('knowledge', p_org);
    stmt := p_name || '_' || shard;
    IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = stmt) THEN
        q := p_sql;
        FOR t IN
            SELECT p.logicalrelid::regclass AS rel, c.relname::text AS name, p.partmethod
            FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
            WHERE c.relnamespace = 'public'::regnamespace
            ORDER BY length(c.relname) DESC
        LOOP
            IF q ~ ('\m' || t.name || '\M') THEN
                q := regexp_replace(q, '\m' || t.name || '\M',
                    shard_name(t.rel, get_shard_id_for_distribution_column(t.rel, CASE WHEN t.partmethod = 'h' THEN p_org END)), 'g');
            END IF;
        END LOOP;
        EXECUTE format('PREPARE %I AS %s', stmt, q);
    END IF;
    SELECT string_agg(quote_nullable(a), ', ' ORDER BY n) INTO args FROM unnest(p_args) WITH ORDINALITY AS u (a, n);
    IF args IS NULL THEN
        RETURN QUERY EXECUTE format('EXECUTE %I', stmt);
    ELSE
        RETURN QUERY EXECUTE format('EXECUTE %I (%s)', stmt, args);
    END IF;
END
$$;
-- +goose StatementEnd

DROP FUNCTION knowledge_org_prepare(uuid, text, text, text);
DROP FUNCTION knowledge_org_sql(uuid, text);
