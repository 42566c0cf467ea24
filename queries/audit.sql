-- The audit trail of MCP calls (packages/tenancy/audit.go): written in
-- batches by the MCP server, read by ctl audit (always for one org),
-- kept for the retention by dropping whole days (audit_drop_partitions_before).

-- name: AuditKey :one
SELECT value FROM audit_keys WHERE name = 'query_hash';

-- name: InsertAuditEvent :exec
-- One record; the writer sends a batch of them in one round trip (COPY is
-- not allowed into a table with row-level security).
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

-- name: DropAuditDaysBefore :one
-- The retention: drops the day partitions that end at or before @cutoff
-- (migration 00018) and returns how many records they held.
SELECT audit_drop_partitions_before(@cutoff::timestamptz)::bigint AS dropped;

-- name: EnsureAuditDays :one
-- Makes the day partitions (UTC) from @from_at's to @to_at's that are missing.
SELECT audit_ensure_partitions(@from_at::timestamptz, @to_at::timestamptz)::int AS made;
