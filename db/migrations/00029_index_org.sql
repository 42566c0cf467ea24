-- knowledge_index_org: the lexical indexer's transaction (lock the org's
-- statistics row, then packages/knowledge/sql/index_batch.sql) as one
-- function call, for a Citus cluster. The batch statement writes through
-- data-modifying CTEs, which Citus never plans as one routed query (it ran
-- as 9 steps from the coordinator); a call of a function distributed by
-- its org argument is delegated whole to the worker that holds the org,
-- where the statement reads and writes only that worker's shards.
--
-- The statement itself stays in index_batch.sql (one copy): the caller
-- passes its text with positional parameters ($1 org, $2 max, $3 k1, $4 b).
-- On a single node the function exists but is not used (indexer.go runs
-- the two statements directly, as before). Only the schema's owner (the
-- worker) may call it: it runs whatever statement it is given.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION knowledge_index_org(p_org_id uuid, p_sql text, p_max int, p_k1 float8, p_b float8, p_config regconfig)
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
REVOKE EXECUTE ON FUNCTION knowledge_index_org(uuid, text, int, float8, float8, regconfig) FROM PUBLIC;

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        -- Delegated even inside a transaction block (the worker's
        -- transactions set the org first: db.Scoped).
        PERFORM create_distributed_function('knowledge_index_org(uuid,text,int,float8,float8,regconfig)',
                                            'p_org_id', colocate_with => 'knowledge', force_delegation => true);
        -- The search's transaction-local settings (SearchConfig's
        -- set_config) stay on the coordinator; the workers plan the
        -- shard queries with the database's. These two decide what the
        -- vector list finds (pgvector's iterative scan, so an org's filter
        -- does not starve the space index's candidates, and the default
        -- probe width, SearchInput.EfSearch 0): the database's defaults
        -- on a cluster, passed on to every node by Citus.
        EXECUTE format('ALTER DATABASE %I SET hnsw.iterative_scan = relaxed_order', current_database());
        EXECUTE format('ALTER DATABASE %I SET hnsw.ef_search = 64', current_database());
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION knowledge_index_org(uuid, text, int, float8, float8, regconfig);
