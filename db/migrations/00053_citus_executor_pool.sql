-- On a Citus cluster a session runs a statement across shards over one
-- connection to each worker (citus.max_adaptive_executor_pool_size = 1,
-- for the database, on every node), instead of opening more to run a
-- worker's shards in parallel.
--
-- Citus keeps one connection a worker cached per session
-- (citus.max_cached_conns_per_worker) and, by default, opens up to 16 more
-- for a statement across shards whose tasks wait longer than 10 ms
-- (citus.executor_slow_start_interval), closing them when the transaction
-- ends. The statements the apps send across shards are small (the
-- indexer's poll of its queue, Upkeep's figures, the counters'
-- compaction), and on a busy node every task waits 10 ms: each such
-- statement opened connections used once. Under the 200-org load a worker
-- took ~500 connections a round (log_connections), most of them closed
-- within 0.1 s, and starting and ending those backends (fork, TLS between
-- the nodes, InitPostgres, exit) took 8-19% of the box's CPU (perf); with
-- one connection a worker, 0.5-4.7% (docs/benchmarks.md, "Cluster"). Such
-- a statement's shards then run one after another on the connection the
-- session keeps. An operator's large report across orgs can ask for more
-- in its own session (SET citus.max_adaptive_executor_pool_size = 16;
-- docs/operators.md).
--
-- Citus passes ALTER DATABASE ... SET on to every node (as 00027's and
-- 00029's settings). A single node does not have the setting: nothing
-- happens there.
-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE format('ALTER DATABASE %I SET citus.max_adaptive_executor_pool_size = 1', current_database());
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE format('ALTER DATABASE %I RESET citus.max_adaptive_executor_pool_size', current_database());
    END IF;
END
$$;
-- +goose StatementEnd
