-- Org statistics (packages/knowledge/stats.go, ctl stats). Every statement
-- is scoped by @org_id. Exact counts: each reads the org's rows once.

-- name: StatsEntries :one
-- Entries by state and embeddings by status, in one pass over the org.
-- States: head (current, not expired), superseded, expired (a head whose
-- expiry has passed; superseded entries count as superseded).
SELECT count(*)::bigint AS total,
       count(*) FILTER (WHERE head_id IS NULL AND (expires_at IS NULL OR expires_at > now()))::bigint AS heads,
       count(*) FILTER (WHERE head_id IS NOT NULL)::bigint AS superseded,
       count(*) FILTER (WHERE head_id IS NULL AND expires_at <= now())::bigint AS expired,
       count(*) FILTER (WHERE embedding_status = 'pending')::bigint AS pending,
       count(*) FILTER (WHERE embedding_status = 'ready')::bigint AS ready,
       count(*) FILTER (WHERE embedding_status = 'failed')::bigint AS failed,
       coalesce(extract(epoch FROM now() - min(embedding_requested_at) FILTER (WHERE embedding_status = 'pending')), 0)::float8 AS oldest_pending_seconds
FROM knowledge
WHERE org_id = @org_id;

-- name: StatsModels :many
SELECT coalesce(embedding_model, '')::text AS model, count(*)::bigint AS entries
FROM knowledge
WHERE org_id = @org_id AND embedding_status = 'ready'
GROUP BY embedding_model
ORDER BY 2 DESC, 1;

-- name: StatsTopTags :many
SELECT t.tag::text AS tag, count(*)::bigint AS entries
FROM knowledge k, unnest(k.tags) AS t (tag)
WHERE k.org_id = @org_id
GROUP BY t.tag
ORDER BY 2 DESC, 1
LIMIT @max_tags;

-- name: StatsPerAgent :many
SELECT k.created_by_agent_id AS agent_id, count(*)::bigint AS entries
FROM knowledge k
WHERE k.org_id = @org_id
GROUP BY k.created_by_agent_id
ORDER BY 2 DESC;
