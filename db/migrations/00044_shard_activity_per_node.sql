-- knowledge_shard_activity (00035) reads the figures of every shard on
-- its worker with one command per node instead of one per placement.
--
-- master_run_on_worker opens a new connection for each command, and a new
-- backend on a Citus worker loads the cluster's metadata (every shard of
-- every table) the first time it plans a statement, for a statement that
-- then reads one row of pg_class. Upkeep asks for eight tables of 32
-- shards each, every minute (WORKER_UPKEEP_INTERVAL): 128 connections on
-- each worker of the loopback cluster (about 600 shards a worker), 1.0 s
-- of its CPU and 1.6-1.7 s a pass measured quiet, against 0.02 s and 0.1 s
-- with one command per node (docs/benchmarks.md, "Cluster"); under load
-- the planning of those first statements took 40-250 ms each. One command
-- per node reads all of that node's shards in one statement; a shard the node does not hold (moved meanwhile) is a row
-- with ok false, as before, and so is every shard of a node that does not
-- answer. Same arguments, same rows, same order.
-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_shard_activity(p_tables text[])
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
    cmd_nodes text[];
    cmd_ports int[];
    cmds text[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname = 'citus') THEN
        RETURN;
    END IF;
    -- Each placement (a shard on a worker) of the named tables.
    EXECUTE $q$
        SELECT array_agg(x.tbl ORDER BY x.shardid, x.nodename, x.nodeport),
               array_agg(x.shardid ORDER BY x.shardid, x.nodename, x.nodeport),
               array_agg(x.shard ORDER BY x.shardid, x.nodename, x.nodeport),
               array_agg(x.nodename ORDER BY x.shardid, x.nodename, x.nodeport),
               array_agg(x.nodeport ORDER BY x.shardid, x.nodename, x.nodeport)
        FROM (SELECT s.logicalrelid::regclass::text AS tbl, s.shardid,
                     pg_catalog.shard_name(s.logicalrelid, s.shardid) AS shard, n.nodename, n.nodeport
              FROM pg_catalog.pg_dist_shard s
              JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid
              JOIN pg_catalog.pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary'
              WHERE s.logicalrelid::regclass::text = ANY($1)) x
    $q$ INTO tables, ids, shards, nodes, ports USING p_tables;
    IF ids IS NULL THEN
        RETURN;
    END IF;
    -- The statement each node runs: sqlc's TableActivity (queries/search.sql)
    -- for each of its shards, as one JSON array; a shard it does not hold
    -- comes back without figures.
    EXECUTE $q$
        SELECT array_agg(n.node), array_agg(n.port),
               array_agg(format($c$
                   SELECT coalesce(json_agg(json_build_object(
                       'shard', s.name,
                       'found', c.oid IS NOT NULL,
                       'live', pg_catalog.pg_stat_get_live_tuples(c.oid),
                       'dead', pg_catalog.pg_stat_get_dead_tuples(c.oid),
                       'mod', pg_catalog.pg_stat_get_mod_since_analyze(c.oid),
                       'ins', pg_catalog.pg_stat_get_ins_since_vacuum(c.oid),
                       'analyzed', pg_catalog.pg_stat_get_last_analyze_time(c.oid) IS NOT NULL
                                   OR pg_catalog.pg_stat_get_last_autoanalyze_time(c.oid) IS NOT NULL,
                       'never', NOT EXISTS (SELECT 1 FROM pg_catalog.pg_statistic st WHERE st.starelid = c.oid),
                       'pages_seen', c.relpages,
                       'all_visible_seen', c.relallvisible,
                       'pages', CASE WHEN c.oid IS NOT NULL THEN pg_catalog.pg_relation_size(c.oid) / current_setting('block_size')::bigint END)), '[]')
                   FROM unnest(%L::text[]) AS s (name)
                   LEFT JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(s.name) $c$, n.names))
        FROM (SELECT t.node, t.port, array_agg(t.shard) AS names
              FROM unnest($1, $2, $3) AS t (node, port, shard)
              GROUP BY t.node, t.port) n
    $q$ INTO cmd_nodes, cmd_ports, cmds USING nodes, ports, shards;
    -- A worker that does not answer: a row with ok = false and its error
    -- for each of its shards; Upkeep goes on with the shards that answered.
    RETURN QUERY EXECUTE $q$
        WITH r AS MATERIALIZED (
            SELECT * FROM pg_catalog.master_run_on_worker($1, $2, $3, true) AS r (node_name, node_port, success, result)
        ), e AS (
            SELECT r.node_name, r.node_port, x.v
            FROM r, json_array_elements(CASE WHEN r.success AND r.result <> '' THEN r.result::json END) AS x (v)
        )
        SELECT t.tbl, t.id, t.shard, t.node, t.port,
               coalesce(r.success, false) AND coalesce((e.v->>'found')::boolean, false),
               CASE WHEN r.success IS NULL THEN 'the worker was not asked'
                    WHEN NOT r.success THEN r.result
                    WHEN NOT coalesce((e.v->>'found')::boolean, false) THEN 'the shard is not on that worker' END,
               (e.v->>'live')::bigint, (e.v->>'dead')::bigint, (e.v->>'mod')::bigint, (e.v->>'ins')::bigint,
               (e.v->>'analyzed')::boolean, (e.v->>'never')::boolean,
               (e.v->>'pages_seen')::bigint, (e.v->>'all_visible_seen')::bigint, (e.v->>'pages')::bigint
        FROM unnest($4, $5, $6, $7, $8) WITH ORDINALITY AS t (tbl, id, shard, node, port, i)
        LEFT JOIN r ON r.node_name = t.node AND r.node_port = t.port
        LEFT JOIN e ON e.node_name = t.node AND e.node_port = t.port AND e.v->>'shard' = t.shard
        ORDER BY t.i
    $q$ USING cmd_nodes, cmd_ports, cmds, tables, ids, shards, nodes, ports;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION knowledge_shard_activity(text[]) FROM PUBLIC;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_shard_activity(p_tables text[])
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
