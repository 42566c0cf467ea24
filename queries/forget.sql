-- Forget (packages/knowledge/forget.go): the owner of knowledge_tombstones.
-- Every statement is scoped by @org_id. The entry itself is locked and
-- erased by purge's statements (queries/purge.sql).

-- name: InsertTombstone :one
INSERT INTO knowledge_tombstones (org_id, id, created_by_agent_id, created_at, forgotten_by_agent_id, reason)
VALUES (@org_id, @id, sqlc.narg(created_by_agent_id)::uuid, @created_at, @forgotten_by_agent_id, @reason)
RETURNING *;

-- name: GetTombstone :one
SELECT *
FROM knowledge_tombstones
WHERE org_id = @org_id AND id = @id;

-- name: ForgottenAmong :many
-- The ids among @ids that were forgotten in the org (import refuses to
-- bring them back).
SELECT id FROM knowledge_tombstones
WHERE org_id = @org_id AND id = ANY(@ids::uuid[])
ORDER BY id;
