-- knowledge_index_ready: is there a valid index of that name? The vector
-- list's statement (packages/knowledge/sql/search_vector.sql) chooses its
-- plan by whether the org's own or the space's HNSW index exists. It read
-- pg_class and pg_index itself; on a Citus cluster those are local tables,
-- which Citus cannot join into a statement routed to the org's worker (the
-- statement ran as 5 subplans). As a function call it is sent with the
-- statement and answered by the worker, whose catalogue holds the same
-- index names (the distributed table's indexes on its shell table). On a
-- single node the SQL function is inlined: the same plan as before.
-- +goose Up
CREATE FUNCTION knowledge_index_ready(p_name text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                   JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid AND i.indisvalid
                   WHERE c.relname = p_name)
$$;
-- On a cluster: made on every node (knowledge_distribute propagates new
-- functions; nothing to do on a single node).
SELECT knowledge_distribute();

-- +goose Down
DROP FUNCTION knowledge_index_ready(text);
