-- Orgs, agents, tokens and quotas (packages/tenancy).

-- name: CreateOrg :one
INSERT INTO orgs (name) VALUES (@name) RETURNING *;

-- name: ListOrgs :many
SELECT * FROM orgs ORDER BY created_at, id;

-- name: GetOrg :one
SELECT * FROM orgs WHERE id = @id;

-- name: CreateAgent :one
INSERT INTO agents (org_id, name) VALUES (@org_id, @name) RETURNING *;

-- name: ListAgents :many
SELECT * FROM agents WHERE org_id = @org_id ORDER BY created_at, id;

-- name: GetAgent :one
SELECT * FROM agents WHERE org_id = @org_id AND id = @id;

-- name: CreateToken :one
INSERT INTO agent_tokens (org_id, id, agent_id, secret_hash, scopes, expires_at)
VALUES (@org_id, @id, @agent_id, @secret_hash, @scopes, sqlc.narg(expires_at))
RETURNING *;

-- name: GetToken :one
SELECT * FROM agent_tokens WHERE org_id = @org_id AND id = @id;

-- name: ListTokens :many
SELECT * FROM agent_tokens WHERE org_id = @org_id ORDER BY created_at, id;

-- name: RevokeToken :one
-- Revoking twice keeps the first revocation time (least ignores the NULL
-- of a token not revoked yet; Citus refuses now() inside a coalesce of an
-- UPDATE of a distributed table).
UPDATE agent_tokens SET revoked_at = least(revoked_at, now())
WHERE id = @id AND (sqlc.narg(org_id)::uuid IS NULL OR org_id = sqlc.narg(org_id))
RETURNING *;

-- name: NotifyTokensRevoked :exec
-- Tells the servers that cache token checks (the MCP server, LISTEN
-- knowledge_tokens_revoked) which tokens a revocation ended, on the commit
-- of the revocation's transaction: "org:token", or "org:*" for every token
-- of an org (tenancy.ParseRevocation).
SELECT pg_notify('knowledge_tokens_revoked', @payload::text);

-- name: TouchToken :exec
-- last_used_at is advisory; it is written at most once a minute per token.
UPDATE agent_tokens SET last_used_at = now()
WHERE org_id = @org_id AND id = @id
  AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');

-- name: SetQuota :one
INSERT INTO org_quotas (org_id, resource, limit_value, updated_at)
VALUES (@org_id, @resource, sqlc.narg(limit_value), now())
ON CONFLICT (org_id, resource) DO UPDATE SET limit_value = excluded.limit_value, updated_at = excluded.updated_at
RETURNING *;

-- name: ListQuotas :many
SELECT * FROM org_quotas WHERE org_id = @org_id ORDER BY resource;

-- name: ConsumeQuota :one
-- Takes one unit if the limit allows it, in the caller's transaction. The
-- upsert locks the row, and its WHERE is re-checked on the newest version, so
-- concurrent callers can never push used past limit_value. No row returned
-- means the quota is exhausted. An org without a row is unlimited.
-- (updated_at through excluded: Citus allows only immutable functions in
-- the DO UPDATE SET of a distributed table.)
INSERT INTO org_quotas AS q (org_id, resource, used, updated_at)
VALUES (@org_id, @resource, 1, now())
ON CONFLICT (org_id, resource) DO UPDATE SET used = q.used + 1, updated_at = excluded.updated_at
WHERE q.limit_value IS NULL OR q.used < q.limit_value
RETURNING used, limit_value;

-- name: CreateTask :one
INSERT INTO tasks (org_id, title) VALUES (@org_id, @title) RETURNING *;

-- name: ReleaseQuota :exec
-- Gives back what erased resources used (a purge of entries).
UPDATE org_quotas SET used = greatest(used - @n::bigint, 0), updated_at = now()
WHERE org_id = @org_id AND resource = @resource;

-- name: RevokeOrgTokens :execrows
-- Every token of an org, at once (a purge of the org). Revoking twice keeps
-- the first revocation time.
UPDATE agent_tokens SET revoked_at = now()
WHERE org_id = @org_id AND revoked_at IS NULL;

-- name: ConsumeQuotaN :one
-- Takes n units at once (an import): all or none, never past the limit
-- unless @force (an import's IgnoreQuota, which still counts them).
INSERT INTO org_quotas AS q (org_id, resource, used, updated_at)
VALUES (@org_id, @resource, @n::bigint, now())
ON CONFLICT (org_id, resource) DO UPDATE SET used = q.used + @n::bigint, updated_at = excluded.updated_at
WHERE @force::boolean OR q.limit_value IS NULL OR q.used + @n::bigint <= q.limit_value
RETURNING used, limit_value;

-- name: ListTasksPage :many
-- An org's tasks that knowledge is linked to, keyset paged by id (export).
SELECT t.* FROM tasks t
WHERE t.org_id = @org_id AND t.id > @after
  AND EXISTS (SELECT 1 FROM task_knowledge l WHERE l.org_id = t.org_id AND l.task_id = t.id)
ORDER BY t.id
LIMIT @max_rows;

-- name: ImportAgent :execrows
-- An agent of an export, under its own id; present already (by id) or a
-- name taken by another agent: nothing inserted.
INSERT INTO agents (org_id, id, name, created_at) VALUES (@org_id, @id, @name, @created_at)
ON CONFLICT DO NOTHING;

-- name: ImportTask :execrows
INSERT INTO tasks (org_id, id, title, created_at) VALUES (@org_id, @id, @title, @created_at)
ON CONFLICT DO NOTHING;

-- name: AgentExists :one
SELECT EXISTS (SELECT 1 FROM agents WHERE org_id = @org_id AND id = @id);

-- name: GetAgentByName :one
-- An agent by its name (unique in the org): the agent an OAuth access
-- token's subject names (apps/mcp/internal/oauth).
SELECT * FROM agents WHERE org_id = @org_id AND name = @name;

-- name: CreateAgentIfAbsent :one
-- Creates the agent unless one of that name exists (no row then: a
-- concurrent first sight made it; read it with GetAgentByName).
INSERT INTO agents (org_id, name) VALUES (@org_id, @name)
ON CONFLICT (org_id, name) DO NOTHING
RETURNING *;
