-- Org statistics (packages/knowledge/maintenance/stats.go, ctl stats, knowledge://stats).
-- Every statement is scoped by @org_id. The counts come from
-- knowledge_counts plus the deltas not folded into it yet (migration
-- 00007): exact, and their cost is the number of distinct keys, not of
-- entries. What changes with the clock alone (expired heads, the oldest
-- pending entry) is read through partial indexes of the org.

-- name: StatsConfig :exec
-- Transaction-local planner settings of the statements that follow in
-- Stats' transaction: the plans must not depend on statistics (a
-- never-analyzed table, an org grown since the last ANALYZE), so no
-- sequential scan: every statement reads its org's slice of an index; and
-- no bitmap scan, which reads the whole slice before a LIMIT can stop it
-- (the index queue's count read all 300,000 entries of a freshly loaded
-- org to keep 10,001: 17 ms).
SELECT set_config('enable_seqscan', 'off', true),
       set_config('enable_bitmapscan', 'off', true);

-- name: StatsCounts :many
-- Every key but tags and expiry hours (entries by state, status, model,
-- author and kind; relations by type; live documents and sections),
-- summed over the folded counts and the pending deltas.
SELECT kind::text AS kind, key::text AS key, sum(n)::bigint AS n
FROM (
    SELECT c.kind, c.key, c.n FROM knowledge_counts c WHERE c.org_id = @org_id AND c.kind NOT IN ('tag', 'expiry')
    UNION ALL
    SELECT d.kind, d.key, d.delta FROM knowledge_count_deltas d WHERE d.org_id = @org_id AND d.kind NOT IN ('tag', 'expiry')
) x
GROUP BY kind, key
HAVING sum(n) <> 0;

-- name: StatsTopTags :many
SELECT key::text AS tag, sum(n)::bigint AS entries
FROM (
    SELECT c.key, c.n FROM knowledge_counts c WHERE c.org_id = @org_id AND c.kind = 'tag'
    UNION ALL
    SELECT d.key, d.delta FROM knowledge_count_deltas d WHERE d.org_id = @org_id AND d.kind = 'tag'
) x
GROUP BY key
HAVING sum(n) <> 0
ORDER BY 2 DESC, 1
LIMIT @max_tags;

-- name: StatsClock :one
-- What changes with the clock alone, in one statement (one round trip of
-- Stats' transaction): the heads past their expiry, by kind, as a JSON
-- object ({"<kind>": n}): those of the hours before the current one from
-- the counters (key '<hour>/<kind>'), and those of the current hour whose
-- expiry has passed through knowledge_expiry_idx (so the read is bounded
-- by the heads expiring within one hour, not by every expired head). The
-- age of the oldest pending entry (knowledge_org_pending_idx); forgotten
-- entries (their tombstones, by primary key).
SELECT (SELECT coalesce(jsonb_object_agg(y.kind, y.n), '{}') FROM (
            SELECT x.kind, sum(x.n)::bigint AS n
            FROM (
                SELECT split_part(c.key, '/', 2) AS kind, c.n FROM knowledge_counts c
                WHERE c.org_id = @org_id AND c.kind = 'expiry'
                  AND split_part(c.key, '/', 1)::bigint < floor(extract(epoch FROM now()) / 3600)::bigint
                UNION ALL
                SELECT split_part(d.key, '/', 2), d.delta FROM knowledge_count_deltas d
                WHERE d.org_id = @org_id AND d.kind = 'expiry'
                  AND split_part(d.key, '/', 1)::bigint < floor(extract(epoch FROM now()) / 3600)::bigint
                UNION ALL
                SELECT k.kind, 1 FROM knowledge k
                WHERE k.org_id = @org_id AND k.head_id IS NULL AND k.expires_at IS NOT NULL
                  AND k.expires_at >= to_timestamp(floor(extract(epoch FROM now()) / 3600) * 3600) AND k.expires_at <= now()
            ) x
            GROUP BY x.kind
            HAVING sum(x.n) <> 0) y)::jsonb AS expired_by_kind,
       coalesce(extract(epoch FROM now() - (SELECT min(k.embedding_requested_at) FROM knowledge k
        WHERE k.org_id = @org_id AND k.embedding_status = 'pending')), 0)::float8 AS oldest_pending_seconds,
       (SELECT count(*) FROM knowledge_tombstones t WHERE t.org_id = @org_id)::bigint AS forgotten;

-- name: CompactCounts :one
-- Folds at most @max_rows of the oldest deltas (any org: the worker's
-- upkeep) into knowledge_counts, in one statement, so a reader sees them
-- either as deltas or as counts, never both or neither, and says how many
-- it folded (fewer than @max_rows: none was left as it ran). Two
-- compactions at once cannot count a delta twice: the second waits on the
-- first's row locks and then finds those deltas deleted.
WITH moved AS (
    DELETE FROM knowledge_count_deltas
    WHERE id IN (SELECT d.id FROM knowledge_count_deltas d ORDER BY d.id LIMIT @max_rows)
    RETURNING org_id, kind, key, delta
), folded AS (
    INSERT INTO knowledge_counts (org_id, kind, key, n)
    SELECT org_id, kind, key, sum(delta)::bigint
    FROM moved
    GROUP BY org_id, kind, key
    ORDER BY org_id, kind, key
    ON CONFLICT (org_id, kind, key) DO UPDATE SET n = knowledge_counts.n + excluded.n
    RETURNING 1
)
SELECT count(*)::bigint AS folded FROM moved;

-- name: StatsIndex :one
-- The lexical index's state, as SearchIndexStatus, but the queue counted
-- up to @max_rows only: right after a bulk load (an import) the
-- queue holds every new entry until the indexer has taken them, and
-- counting them all would make stats as slow as the load is large.
SELECT coalesce((SELECT s.config::text FROM knowledge_search_stats s WHERE s.org_id = @org_id), '')::text AS config,
       coalesce((SELECT s.docs FROM knowledge_search_stats s WHERE s.org_id = @org_id), 0)::bigint AS indexed,
       (SELECT count(*) FROM (SELECT 1 FROM knowledge_index_queue q WHERE q.org_id = @org_id LIMIT @max_rows) x)::bigint AS queued;

-- name: DeleteZeroCounts :execrows
-- Counters that fell to zero go (knowledge_counts_zero_idx): a key is a
-- tag, i.e. content, and must not outlive the last entry carrying it (a
-- purge, forget_knowledge).
DELETE FROM knowledge_counts WHERE n = 0;
