-- Forget (packages/knowledge/forget.go): the owner of knowledge_tombstones.
-- Every statement is scoped by @org_id.

-- name: ForgetLockEntry :one
-- The entry to forget, locked, with what the author check and the
-- tombstone need. Taken after the org's supersession lock and the index
-- statistics row, in purge's order.
SELECT id, created_by_agent_id, created_at, client_token
FROM knowledge
WHERE org_id = @org_id AND id = @id
FOR UPDATE;

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
