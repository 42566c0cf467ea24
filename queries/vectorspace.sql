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
-- Heads holding a vector of the space: the elements of the space's HNSW
-- index (which holds heads only, 00049), counted before it is built to size
-- the build's memory (vectorspace.go, buildMemory). A scan of the table,
-- seconds at 1M rows, against a build of minutes that scans it too.
SELECT count(*) FROM knowledge
WHERE embedding_model = @model::text AND vector_dims(embedding) = @dims::int AND head_id IS NULL;

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

-- name: OrgShard :many
-- The shard of an org on a Citus cluster, its worker, and whether it holds
-- that org alone (migration 00036); no row on a single node.
SELECT s.shard_id::bigint AS shard_id, s.shard::text AS shard, s.node::text AS node, s.port::int AS port,
       s.isolated::bool AS isolated
FROM knowledge_org_shard(@org_id::uuid) AS s (shard_id, shard, node, port, isolated);

-- name: ShardIndexes :many
-- The indexes of one shard of knowledge as its worker has them, and
-- whether each is valid, and its definition (migration 00036).
SELECT s.name::text AS name, s.valid::bool AS valid, s.definition::text AS definition
FROM knowledge_shard_indexes(@shard_id::bigint) AS s (name, valid, definition);

-- name: OrgKnown :one
SELECT EXISTS (SELECT 1 FROM orgs WHERE id = @org_id::uuid);
