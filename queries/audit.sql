-- The audit trail of MCP calls (packages/tenancy/audit.go): written in
-- batches by the MCP server, read by ctl audit (always for one org),
-- pruned by the worker (the retention, across orgs: it is the product's
-- own housekeeping, like VACUUM).

-- name: AuditKey :one
SELECT value FROM audit_keys WHERE name = 'query_hash';

-- name: InsertAuditEvents :copyfrom
INSERT INTO audit_events (org_id, at, agent_id, token_id, kind, name, entry_ids, outcome, duration_us, query_length, query_hash)
VALUES (@org_id, @at, @agent_id, @token_id, @kind, @name, @entry_ids, @outcome, @duration_us, @query_length, @query_hash);

-- name: ListAuditEvents :many
-- Newest first. Every filter is optional except the org: NULL means any.
SELECT org_id, id, at, agent_id, token_id, kind, name, entry_ids, outcome, duration_us, query_length, query_hash
FROM audit_events
WHERE org_id = @org_id
  AND (sqlc.narg(agent_id)::uuid IS NULL OR agent_id = sqlc.narg(agent_id)::uuid)
  AND (sqlc.narg(name)::text IS NULL OR name = sqlc.narg(name)::text)
  AND (sqlc.narg(since)::timestamptz IS NULL OR at >= sqlc.narg(since)::timestamptz)
  AND (sqlc.narg(until)::timestamptz IS NULL OR at < sqlc.narg(until)::timestamptz)
ORDER BY at DESC, id DESC
LIMIT @max_rows;

-- name: ListAuditEventsForEntry :many
-- The same with an entry: the records that touched it, found through the
-- GIN index (a separate statement: an optional filter written as
-- "$1 IS NULL OR ..." cannot use an index).
SELECT org_id, id, at, agent_id, token_id, kind, name, entry_ids, outcome, duration_us, query_length, query_hash
FROM audit_events
WHERE org_id = @org_id
  AND (sqlc.narg(agent_id)::uuid IS NULL OR agent_id = sqlc.narg(agent_id)::uuid)
  AND entry_ids @> ARRAY[@entry_id::uuid]
  AND (sqlc.narg(name)::text IS NULL OR name = sqlc.narg(name)::text)
  AND (sqlc.narg(since)::timestamptz IS NULL OR at >= sqlc.narg(since)::timestamptz)
  AND (sqlc.narg(until)::timestamptz IS NULL OR at < sqlc.narg(until)::timestamptz)
ORDER BY at DESC, id DESC
LIMIT @max_rows;

-- name: PruneAuditEvents :execrows
-- One batch of the retention: at most @max_rows of the oldest records
-- older than @before, whatever their org.
DELETE FROM audit_events
WHERE (org_id, at, id) IN (
    SELECT a.org_id, a.at, a.id FROM audit_events a
    WHERE a.at < @before
    ORDER BY a.at
    LIMIT @max_rows
);
