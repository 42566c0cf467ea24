-- Completions (completion/complete of the MCP server; packages/knowledge,
-- complete.go): a few values an agent's client offers while an id, a tag
-- or an agent is typed. Every statement is scoped by @org_id and returns
-- at most @max_values rows. An id prefix is a range of the primary key
-- (@low..@high, the prefix padded with 0 and f), so it is an index range
-- scan of the org; a title prefix is matched with ILIKE (the caller
-- escapes %, _ and \), newest first.

-- name: CompleteEntryIDs :many
-- Current entries first (what an agent should read), then superseded ones.
SELECT k.id
FROM knowledge k
WHERE k.org_id = @org_id
  AND ((k.id BETWEEN @low AND @high) OR k.title ILIKE @title_pattern)
ORDER BY (k.head_id IS NULL) DESC, k.created_at DESC, k.id DESC
LIMIT @max_values;

-- name: CompleteTaskIDs :many
SELECT t.id
FROM tasks t
WHERE t.org_id = @org_id
  AND ((t.id BETWEEN @low AND @high) OR t.title ILIKE @title_pattern)
ORDER BY t.created_at DESC, t.id DESC
LIMIT @max_values;

-- name: CompleteAgentIDs :many
SELECT a.id
FROM agents a
WHERE a.org_id = @org_id
  AND ((a.id BETWEEN @low AND @high) OR a.name ILIKE @title_pattern)
ORDER BY a.name
LIMIT @max_values;

-- name: CompleteTags :many
-- The org's tags in use (the statistics' counters, migration 00007: one
-- row a distinct tag, not a row an entry), most used first.
SELECT key::text AS tag
FROM (
    SELECT c.key, c.n FROM knowledge_counts c WHERE c.org_id = @org_id AND c.kind = 'tag' AND c.key LIKE @tag_pattern
    UNION ALL
    SELECT d.key, d.delta FROM knowledge_count_deltas d WHERE d.org_id = @org_id AND d.kind = 'tag' AND d.key LIKE @tag_pattern
) x
GROUP BY key
HAVING sum(n) > 0
ORDER BY sum(n) DESC, 1
LIMIT @max_values;
