-- Where an org's rows live on a Citus cluster, for `ctl isolate-org`
-- (packages/knowledge/isolate.go, docs/scale-out.md "Isolating a big
-- tenant"): the shard of the co-location group that holds the org, its
-- worker, and whether the shard holds that org alone (its hash range is
-- one value, as isolate_tenant_to_new_shard leaves it); and the indexes of
-- one shard as its worker has them (an org's own HNSW index is built on
-- the distributed table, so every shard has it, and a split builds it on
-- the new shards: the worker says whether it is there and valid, and its
-- definition, since Citus shortens a long index name on the shards).
--
-- Coordinator only; on a single node knowledge_org_shard returns no row.
-- Only the schema's owner may call them.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION knowledge_org_shard(p_org uuid)
RETURNS TABLE (shard_id bigint, shard text, node text, port int, isolated boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname = 'citus') THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE $q$
        SELECT s.shardid, pg_catalog.shard_name(s.logicalrelid, s.shardid), n.nodename::text, n.nodeport::int,
               s.shardminvalue = s.shardmaxvalue
        FROM pg_catalog.pg_dist_shard s
        JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid
        JOIN pg_catalog.pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary'
        WHERE s.shardid = pg_catalog.get_shard_id_for_distribution_column('knowledge', $1)
    $q$ USING p_org;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION knowledge_org_shard(uuid) FROM PUBLIC;

-- +goose StatementBegin
CREATE FUNCTION knowledge_shard_indexes(p_shard_id bigint)
RETURNS TABLE (name text, valid boolean, definition text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    nodes text[];
    ports int[];
    cmds text[];
    ok boolean;
    res text;
BEGIN
    EXECUTE $q$
        SELECT array_agg(n.nodename), array_agg(n.nodeport),
               array_agg(format($c$
                   SELECT coalesce(json_agg(json_build_object('name', c.relname, 'valid', i.indisvalid,
                                                       'definition', pg_catalog.pg_get_indexdef(i.indexrelid))), '[]')
                   FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
                   WHERE i.indrelid = %L::regclass $c$, pg_catalog.shard_name(s.logicalrelid, s.shardid)))
        FROM pg_catalog.pg_dist_shard s
        JOIN pg_catalog.pg_dist_placement p ON p.shardid = s.shardid
        JOIN pg_catalog.pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary'
        WHERE s.shardid = $1
    $q$ INTO nodes, ports, cmds USING p_shard_id;
    IF nodes IS NULL THEN
        RAISE EXCEPTION 'knowledge_shard_indexes: no shard %', p_shard_id;
    END IF;
    EXECUTE $q$ SELECT r.success, r.result FROM pg_catalog.master_run_on_worker($1, $2, $3, false) r LIMIT 1 $q$
        INTO ok, res USING nodes[1:1], ports[1:1], cmds[1:1];
    IF NOT ok THEN
        RAISE EXCEPTION 'knowledge_shard_indexes: shard %: %', p_shard_id, res;
    END IF;
    RETURN QUERY SELECT j->>'name', (j->>'valid')::boolean, j->>'definition' FROM json_array_elements(res::json) j ORDER BY 1;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION knowledge_shard_indexes(bigint) FROM PUBLIC;

-- Isolating an org copies its rows with logical replication (writes go
-- on), which needs a replica identity on every co-located table: a table
-- without a primary key (rate_limits: its agent may be NULL) logs its whole
-- old row instead. Nothing changes on a single node without logical
-- decoding; on a cluster Citus passes the setting on to the shards.
-- +goose StatementBegin
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN
        SELECT c.oid::regclass FROM pg_catalog.pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
          AND c.relname <> 'goose_db_version' AND c.relreplident = 'd'
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
    LOOP
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE rate_limits REPLICA IDENTITY DEFAULT;
DROP FUNCTION knowledge_shard_indexes(bigint);
DROP FUNCTION knowledge_org_shard(uuid);
