-- The counters' deltas are written to the org's shard by name on a Citus
-- worker, as the duplicate-check keys and the index queue are (00046).
--
-- On a cluster the store's triggers run on the shards of knowledge, on the
-- org's worker, and every insert and every vector write appended its
-- deltas to the distributed table: Citus planned the INSERT as a
-- distributed statement there and routed it to the local shard, 0.55-0.86
-- ms a statement on a worker against 0.06-0.07 ms on a single node
-- (pg_stat_statements with track = all, the 200-org run; docs/benchmarks.md,
-- "Cluster"). 00046 left them so because their id is an identity column,
-- which Citus fills from the worker's own range of the sequence
-- (knowledge_count_deltas_id_seq on each worker starts at its group's
-- 2^48 block), and the shard has no default for it, nor may knowledge_app
-- take values of the worker's sequence (Citus does not propagate the grant).
--
-- knowledge_count_delta_ids hands out n values of that sequence, as the
-- owner (SECURITY DEFINER): numbers only, nothing written, so any role may
-- call it. knowledge_append_count_deltas is the one place the three
-- counting triggers (entries, documents and sections, relations) append
-- their deltas: to the shard by name, with ids from the node's sequence,
-- when the rows' shard is on this node; else to the table as before (a
-- single node; the coordinator). A statement's rows are all of one shard
-- of their table, so of one shard group: the first delta's org names the
-- shard of knowledge_count_deltas (knowledge_org_table, 00045). The fold
-- (CompactCounts) takes the oldest ids first on each shard; ids of two
-- workers' ranges never meet in one shard, as an org's deltas are all on
-- its worker.
--
-- Measured by the workers' CPU, not by the statements' times: the
-- trigger's call took 0.41 ms on an insert against 0.55 through Citus, and
-- 0.91 against 0.86 on a vector write, yet in the 200-org run with the Go
-- load (64 clients, interleaved) the workers spent 148-152 s against
-- 153-164 and answered 84-85 stores/s against 77-86: the distributed
-- INSERT cost its transaction more than its own execution
-- (docs/benchmarks.md, "Cluster").
-- +goose Up
-- On a cluster, as 00046: one connection per worker for the function
-- commands; the triggers on distributed tables are allowed.
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);

-- +goose StatementBegin
CREATE FUNCTION knowledge_count_delta_ids(n int)
RETURNS bigint[]
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT array_agg(nextval('public.knowledge_count_deltas_id_seq'::regclass)) FROM generate_series(1, n)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_append_count_deltas(deltas knowledge_count_deltas[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    target text;
BEGIN
    IF deltas IS NULL THEN
        RETURN;
    END IF;
    target := knowledge_org_table(deltas[1].org_id, 'knowledge_count_deltas');
    IF target = 'knowledge_count_deltas' THEN
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT u.org_id, u.kind, u.key, u.delta FROM unnest(deltas) AS u;
    ELSE
        EXECUTE format('INSERT INTO %s (id, org_id, kind, key, delta) '
                       'SELECT i.id, u.org_id, u.kind, u.key, u.delta '
                       'FROM unnest($1) WITH ORDINALITY AS u (id, org_id, kind, key, delta, n) '
                       'JOIN unnest(knowledge_count_delta_ids(cardinality($1))) WITH ORDINALITY AS i (id, n) USING (n)', target)
            USING deltas;
    END IF;
END
$$;
-- +goose StatementEnd

-- On a cluster the new functions go to the workers before the triggers
-- call them there.
SELECT knowledge_distribute();

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
    PERFORM knowledge_append_count_deltas(deltas);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_live_count_changes() RETURNS trigger
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
    PERFORM knowledge_append_count_deltas(deltas);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_relation_count_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    deltas knowledge_count_deltas[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(ROW(NULL, x.org_id, 'relation', x.type, x.n)::knowledge_count_deltas ORDER BY x.org_id, x.type) INTO deltas
        FROM (SELECT r.org_id, r.type, count(*) AS n FROM new_rows r WHERE r.valid_to IS NULL GROUP BY 1, 2) x;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(ROW(NULL, x.org_id, 'relation', x.type, x.n)::knowledge_count_deltas ORDER BY x.org_id, x.type) INTO deltas
        FROM (SELECT r.org_id, r.type, -count(*) AS n FROM old_rows r WHERE r.valid_to IS NULL GROUP BY 1, 2) x;
    ELSE
        SELECT array_agg(ROW(NULL, x.org_id, 'relation', x.type, x.n)::knowledge_count_deltas ORDER BY x.org_id, x.type) INTO deltas
        FROM (
            SELECT org_id, type, sum(d)::bigint AS n
            FROM (
                SELECT r.org_id, r.type, 1 AS d FROM new_rows r WHERE r.valid_to IS NULL
                UNION ALL
                SELECT r.org_id, r.type, -1 FROM old_rows r WHERE r.valid_to IS NULL
            ) y
            GROUP BY 1, 2
            HAVING sum(d) <> 0) x;
    END IF;
    PERFORM knowledge_append_count_deltas(deltas);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
SELECT set_config('citus.enable_unsafe_triggers', 'on', true);

-- The triggers keep calling knowledge_append_count_deltas, which appends
-- to the table again, as they did before; the ids function goes.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_append_count_deltas(deltas knowledge_count_deltas[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF deltas IS NOT NULL THEN
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT u.org_id, u.kind, u.key, u.delta FROM unnest(deltas) AS u;
    END IF;
END
$$;
-- +goose StatementEnd
DROP FUNCTION knowledge_count_delta_ids(int);
