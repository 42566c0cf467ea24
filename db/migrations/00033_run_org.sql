-- knowledge_run_org: one read-only statement of one org, run on the
-- worker that holds the org with a plan the worker keeps, for a Citus
-- cluster (docs/operators.md "Running on a cluster", "Search on a cluster").
--
-- A coordinator plans a routed statement on every call (custom plans: a
-- generic plan with parameters cannot be routed), and the worker plans the
-- shard query it is sent on every call too: the search's lexical statement
-- spent more time being planned than running. A call of a function
-- distributed by its org argument is delegated whole to the org's worker
-- (like knowledge_index_org, 00029). There the function prepares the
-- statement once per session (the coordinator's connections to a worker
-- are kept), with the distributed tables' names replaced by the org's
-- shards' (plain tables on that worker: the statement is then planned by
-- PostgreSQL alone, a generic plan kept like a single node's), and runs it.
--
-- p_name names the statement (the caller's; the prepared statement is
-- p_name plus the org's shard of knowledge, so every shard group gets its
-- own), p_sql is its text with positional parameters, p_args their values
-- as text (NULL for NULL) and p_settings name/value pairs set for the
-- call's transaction first (the search's efSearch and plan pins, which a
-- coordinator's set_config would not carry). app.org_id is set to p_org,
-- so the shards' row-level security policies hold as for any statement.
--
-- The function runs as its caller (a statement the caller could send
-- itself). On a single node it exists and is not used: the statements are
-- sent as they are.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION knowledge_run_org(p_org uuid, p_name text, p_sql text, p_settings text[], p_args text[])
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
        -- Longest names first, whole words only (knowledge_chunks is not
        -- knowledge followed by _chunks).
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

-- +goose StatementBegin
DO $$
DECLARE
    f regprocedure;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        -- Delegated when called on its own (not in a transaction block).
        PERFORM create_distributed_function('knowledge_run_org(uuid,text,text,text[],text[])',
                                            'p_org', colocate_with => 'knowledge');
        -- The statements run here keep generic plans (plan_cache_mode =
        -- force_generic_plan, as on a single node); the search functions
        -- they call (distributed by their org, 00027) query the
        -- distributed tables, whose statements Citus routes only when
        -- planned for the org's value: they plan custom whatever the
        -- caller's setting.
        FOR f IN
            SELECT p.oid::regprocedure FROM pg_proc p
            WHERE p.pronamespace = 'public'::regnamespace AND p.prokind = 'f'
              AND p.proargnames[1] = 'p_org' AND p.proargtypes[0] = 'uuid'::regtype
              AND p.proname <> 'knowledge_run_org'
        LOOP
            EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', f);
        END LOOP;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION knowledge_run_org(uuid, text, text, text[], text[]);
