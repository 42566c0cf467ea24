-- Rate limit settings (packages/tenancy, ratelimits.go). See
-- db/migrations/00003_ratelimits.sql for what a row means.

-- name: SetRateLimit :one
-- (updated_at through excluded: on Citus the DO UPDATE SET of a
-- distributed table may call immutable functions only.)
INSERT INTO rate_limits (org_id, scope, agent_id, kind, per_minute, updated_at)
VALUES (@org_id, @scope, sqlc.narg(agent_id), @kind, sqlc.narg(per_minute), now())
ON CONFLICT ON CONSTRAINT rate_limits_key
DO UPDATE SET per_minute = excluded.per_minute, updated_at = excluded.updated_at
RETURNING *;

-- name: ClearRateLimit :execrows
DELETE FROM rate_limits
WHERE org_id = @org_id AND scope = @scope AND agent_id IS NOT DISTINCT FROM sqlc.narg(agent_id) AND kind = @kind;

-- name: NotifyRateLimitsChanged :exec
-- Tells the servers that cache the settings (the MCP server's rate
-- limiter, LISTEN knowledge_rate_limits_changed) that an org's changed, on
-- the commit of the change's transaction: the org's id.
SELECT pg_notify('knowledge_rate_limits_changed', @org_id::text);

-- name: ListRateLimits :many
SELECT * FROM rate_limits WHERE org_id = @org_id ORDER BY scope DESC, agent_id NULLS FIRST, kind;

-- name: RateLimitsFor :many
-- The rows that can apply to one agent's calls: the org's own, the org's
-- default for each agent, and the agent's override.
SELECT * FROM rate_limits
WHERE org_id = @org_id AND (agent_id IS NULL OR agent_id = @agent_id);
