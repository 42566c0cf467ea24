-- Forget (packages/knowledge/forget.go): the owner of knowledge_tombstones.
-- Every statement is scoped by @org_id. The entry itself is locked and
-- erased by purge's statements (queries/purge.sql).

-- name: InsertTombstone :one
INSERT INTO knowledge_tombstones (org_id, id, created_by_agent_id, created_at, forgotten_by_agent_id, reason, client_token, relations)
VALUES (@org_id, @id, sqlc.narg(created_by_agent_id)::uuid, @created_at, @forgotten_by_agent_id, @reason, sqlc.narg(client_token)::uuid, @relations)
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

-- name: TombstoneByClientToken :one
-- The forgotten entry a client token of an agent made (a retry of that
-- store is refused, not stored again).
SELECT id FROM knowledge_tombstones
WHERE org_id = @org_id AND created_by_agent_id = @agent_id AND client_token = @client_token;

-- name: ExistingAmong :many
-- The ids among @ids that are entries of the org now: a replayed store
-- answer names no erased entry (packages/knowledge/entries/idempotence.go).
SELECT id FROM knowledge
WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);
