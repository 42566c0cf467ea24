-- Vector spaces: a vector's model and width (packages/knowledge/vectorspace.go,
-- db/migrations/00008_embedding_width.sql).

-- name: EmbeddingSpaces :many
-- Every (model, width) with stored vectors and how many orgs hold some: a
-- loose index scan, one probe per distinct (org, model, width).
SELECT s.model::text AS model, s.dims::int AS dims, s.orgs::bigint AS orgs
FROM knowledge_embedding_spaces() AS s (model, dims, orgs)
ORDER BY 1, 2;

-- name: IndexState :one
-- Whether an index of that name exists (on knowledge or knowledge_chunks),
-- and whether it is valid (a failed concurrent build leaves an invalid one).
SELECT count(*) > 0 AS present, coalesce(bool_and(i.indisvalid), false)::bool AS valid
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
WHERE c.relname = @name::text AND c.relnamespace = current_schema()::regnamespace;

-- name: CountSpaceEntries :one
-- Entries holding a vector of the space: the elements of the space's HNSW
-- index, counted before it is built to size the build's memory
-- (vectorspace.go, buildMemory). A scan of the table, seconds at 1M rows,
-- against a build of minutes that scans it too.
SELECT count(*) FROM knowledge
WHERE embedding_model = @model::text AND vector_dims(embedding) = @dims::int;

-- name: CountSpaceChunks :one
-- CountSpaceEntries for the chunks of long entries.
SELECT count(*) FROM knowledge_chunks
WHERE embedding_model = @model::text AND vector_dims(embedding) = @dims::int;

-- name: MaintenanceWorkMem :one
-- The server's maintenance_work_mem in bytes (for this role and database):
-- an index build never gets less than the deployment gives every build.
SELECT (setting::bigint * 1024)::bigint FROM pg_catalog.pg_settings WHERE name = 'maintenance_work_mem';

-- name: IndexesNamed :many
-- The indexes of knowledge whose names start with @prefix, and whether each
-- is valid (a failed concurrent build leaves an invalid one): the per-org
-- HNSW indexes Upkeep built (orgIndexesPrefix), or one org's, of every
-- space (orgIndexPrefix, for `ctl search status`).
SELECT c.relname::text AS name, i.indisvalid AS valid
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'knowledge'::regclass AND left(c.relname, length(@prefix::text)) = @prefix::text
ORDER BY 1;
