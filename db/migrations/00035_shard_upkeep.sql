-- Upkeep on a Citus cluster reads and acts on the shards (docs/operators.md
-- "Running on a cluster", packages/knowledge/upkeep.go).
--
-- On a coordinator a distributed table is an empty shell: its pg_class
-- figures (pages, all-visible pages) and its pg_stat counters (rows
-- inserted, changed, dead since the last vacuum or analyze) stay at zero
-- whatever the shards hold, so Upkeep's decisions, read there, would never
-- vacuum anything; and a VACUUM of the distributed table runs on every
-- shard of every worker, however few of them are due. These functions
-- read the same figures on each shard, on the worker that holds it, and
-- vacuum or analyze one shard, so Upkeep decides per shard with the same
-- rules as per table on a single node.
--
-- Both go through Citus's master_run_on_worker (what run_command_on_shards
-- calls): a new connection per placement, outside any transaction block,
-- so VACUUM may run there. On a single node they exist (one schema) and
-- are not called: knowledge_shard_activity returns no row there.
-- Only the schema's owner (the worker) may call them.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION knowledge_shard_activity(p_tables text[])
RETURNS TABLE (table_name text, shard_id bigint, shard text, node text, port int, ok boolean, error text,
               live bigint, dead bigint, mod_since_analyze bigint, ins_since_vacuum bigint,
               analyzed boolean, never_analyzed boolean, pages_seen bigint, all_visible_seen bigint, pages bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    tables text[];
    ids bigint[];
    shards text[];
    nodes text[];
    ports int[];
    cmds text[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname = 'citus') THEN
        RETURN;
    END IF;
    -- Each placement (a shard on a worker) of the named tables, and the
    -- statement that reads its figures there: sqlc's TableActivity
    -- (queries/search.sql) for one relation.
    EXECUTE $q$
        SELECT array_agg(x.tbl ORDER BY x.shardid, x.nodename, x.nodeport),
               array_agg(x.shardid ORDER BY x.shardid, x.nodename, x.nodeport),
               array_agg(x.shard ORDER BY x.shardid, x.nodename, x.nodeport),
               array_agg(x.nodename ORDER BY x.shardid, x.nodename, x.nodeport),
               array_agg(x.nodeport ORDER BY x.shardid, x.nodename, x.nodeport),
               array_agg(format($c$
                   SELECT json_build_object(
                       'live', pg_catalog.pg_stat_get_live_tuples(c.oid),
                       'dead', pg_catalog.pg_stat_get_dead_tuples(c.oid),
                       'mod', pg_catalog.pg_stat_get_mod_since_analyze(c.oid),
                       'ins', pg_catalog.pg_stat_get_ins_since_vacuum(c.oid),
                       'analyzed', pg_catalog.pg_stat_get_last_analyze_time(c.oid) IS NOT NULL
                                   OR pg_catalog.pg_stat_get_last_autoanalyze_time(c.oid) IS NOT NULL,
                       'never', NOT EXISTS (SELECT 1 FROM pg_catalog.pg_statistic s WHERE s.starelid = c.oid),
                       'pages_seen', c.relpages,
                       'all_visible_seen', c.relallvisible,
                       'pages', pg_catalog.pg_relation_size(c.oid) / current_setting('block_size')::bigint)
                   FROM pg_catalog.pg_class c WHERE c.oid = %L::regclass $c$, x.shard)
                   ORDER BY x.shardid, x.nodename, x.nodeport)
        FROM (SELECT s.logicalrelid::regclass::text AS tbl, s.shardid,
                     pg_catalog.shard_name(s.logicalrelid, s.shardid) AS shard, n.nodename, n.nodeport
              FROM pg_catalog.pg_dist_shard s
              JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid
              JOIN pg_catalog.pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary'
              WHERE s.logicalrelid::regclass::text = ANY($1)) x
    $q$ INTO tables, ids, shards, nodes, ports, cmds USING p_tables;
    IF ids IS NULL THEN
        RETURN;
    END IF;
    -- A worker that does not answer is a row with ok = false and its
    -- error: Upkeep goes on with the shards that answered.
    RETURN QUERY EXECUTE $q$
        SELECT t.tbl, t.id, t.shard, r.node_name, r.node_port, r.success AND j.v IS NOT NULL,
               CASE WHEN NOT r.success THEN r.result WHEN j.v IS NULL THEN 'the shard is not on that worker' END,
               (j.v->>'live')::bigint, (j.v->>'dead')::bigint, (j.v->>'mod')::bigint, (j.v->>'ins')::bigint,
               (j.v->>'analyzed')::boolean, (j.v->>'never')::boolean,
               (j.v->>'pages_seen')::bigint, (j.v->>'all_visible_seen')::bigint, (j.v->>'pages')::bigint
        FROM pg_catalog.master_run_on_worker($1, $2, $3, true) WITH ORDINALITY AS r (node_name, node_port, success, result, i)
        JOIN unnest($4, $5, $6) WITH ORDINALITY AS t (tbl, id, shard, i) ON t.i = r.i
        CROSS JOIN LATERAL (SELECT CASE WHEN r.success AND r.result <> '' THEN r.result::json END AS v) j
    $q$ USING nodes, ports, cmds, tables, ids, shards;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION knowledge_shard_activity(text[]) FROM PUBLIC;

-- knowledge_shard_upkeep runs VACUUM (ANALYZE) (p_vacuum) or ANALYZE on
-- every placement of one shard, on its worker, and raises the worker's
-- error if one fails. The shard is named by its id, so no statement text
-- comes from the caller.
-- +goose StatementBegin
CREATE FUNCTION knowledge_shard_upkeep(p_shard_id bigint, p_vacuum boolean)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    nodes text[];
    ports int[];
    cmds text[];
    failed text;
BEGIN
    EXECUTE $q$
        SELECT array_agg(n.nodename), array_agg(n.nodeport),
               array_agg(CASE WHEN $2 THEN 'VACUUM (ANALYZE) ' ELSE 'ANALYZE ' END
                         || pg_catalog.shard_name(s.logicalrelid, s.shardid))
        FROM pg_catalog.pg_dist_shard s
        JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid
        JOIN pg_catalog.pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary'
        WHERE s.shardid = $1
    $q$ INTO nodes, ports, cmds USING p_shard_id, p_vacuum;
    IF nodes IS NULL THEN
        RAISE EXCEPTION 'knowledge_shard_upkeep: no shard %', p_shard_id;
    END IF;
    EXECUTE $q$
        SELECT string_agg(r.node_name || ':' || r.node_port || ': ' || r.result, '; ')
        FROM pg_catalog.master_run_on_worker($1, $2, $3, false) r WHERE NOT r.success
    $q$ INTO failed USING nodes, ports, cmds;
    IF failed IS NOT NULL THEN
        RAISE EXCEPTION 'knowledge_shard_upkeep: shard %: %', p_shard_id, failed;
    END IF;
    RETURN array_length(nodes, 1);
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION knowledge_shard_upkeep(bigint, boolean) FROM PUBLIC;

-- +goose Down
DROP FUNCTION knowledge_shard_upkeep(bigint, boolean);
DROP FUNCTION knowledge_shard_activity(text[]);
