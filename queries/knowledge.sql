-- Entries, supersession and task links (packages/knowledge).
--
-- Columns of knowledge are always listed: search_tsv has no Go type and the embedding
-- is 3 KiB nobody here needs. Every statement filters by org_id first, so an
-- id of another org behaves exactly like a missing one.

-- name: GetEntry :one
-- The whole entry (the knowledge resource) and the entries it directly
-- replaced, from the history of direct edges.
SELECT k.id, k.title, k.body, k.tags, k.confidence, k.origin, k.source, k.kind, k.metadata,
       k.created_by_agent_id, k.expires_at, k.superseded_by, k.head_id, k.superseded_at,
       k.embedding_status, k.embedding_model, k.embedding_error, k.embedded_at,
       k.created_at, k.updated_at,
       ARRAY(SELECT s.old_id FROM knowledge_supersessions s
             WHERE s.org_id = @org_id AND s.new_id = k.id
             ORDER BY s.created_at, s.old_id)::uuid[] AS supersedes,
       c.state AS similar_state, c.checked_at AS similar_checked_at,
       -- What the duplicate check finished after the store found, best
       -- first, with the other entries' titles as they are now (queries/similar.sql).
       (SELECT jsonb_agg(jsonb_build_object('id', x.similar_id, 'title', o.title, 'score', x.score)
                         ORDER BY x.score DESC, x.similar_id)
        FROM knowledge_similar x JOIN knowledge o ON o.org_id = x.org_id AND o.id = x.similar_id
        WHERE x.org_id = @org_id AND x.entry_id = k.id) AS similar_found
FROM knowledge k
LEFT JOIN knowledge_similar_checks c ON c.org_id = k.org_id AND c.entry_id = k.id
WHERE k.org_id = @org_id AND k.id = @id;

-- name: EntryChain :many
-- The supersession history around an entry, from the recorded edges: every
-- edge that led to it (predecessors, transitively: an entry may replace
-- several) and every edge from it to the head (successors), each with who
-- made it and when. Ordered by time within each direction.
WITH RECURSIVE back AS (
    SELECT s.old_id, s.new_id, s.agent_id, s.created_at, 1 AS depth
    FROM knowledge_supersessions s
    WHERE s.org_id = @org_id AND s.new_id = @id
    UNION
    SELECT s.old_id, s.new_id, s.agent_id, s.created_at, b.depth + 1
    FROM knowledge_supersessions s JOIN back b ON s.new_id = b.old_id
    WHERE s.org_id = @org_id AND b.depth < 1000
),
fwd AS (
    SELECT s.old_id, s.new_id, s.agent_id, s.created_at, 1 AS depth
    FROM knowledge_supersessions s
    WHERE s.org_id = @org_id AND s.old_id = @id
    UNION
    SELECT s.old_id, s.new_id, s.agent_id, s.created_at, f.depth + 1
    FROM knowledge_supersessions s JOIN fwd f ON s.old_id = f.new_id
    WHERE s.org_id = @org_id AND f.depth < 1000
)
SELECT 'predecessor'::text AS direction, old_id, new_id, agent_id, created_at FROM back
UNION ALL
SELECT 'successor'::text, old_id, new_id, agent_id, created_at FROM fwd
ORDER BY 1, 5, 2;

-- name: GetEntryByClientToken :one
-- The durable idempotence guard: the entry a client token already made.
SELECT id, title, body, tags, confidence, expires_at, source, kind, metadata, embedding_status, created_at
FROM knowledge
WHERE org_id = @org_id AND created_by_agent_id = @agent_id AND client_token = @client_token;

-- name: InsertEntry :one
-- ON CONFLICT DO NOTHING on the client token: no row back means another call
-- with the same token committed first (or is committing: the insert waits
-- for it), and the caller answers that entry as a replay.
INSERT INTO knowledge (org_id, title, body, tags, confidence, origin, source, kind, metadata,
                       created_by_agent_id, expires_at, client_token, similar_keys)
VALUES (@org_id, @title, @body, @tags::text[], @confidence, 'agent', sqlc.narg(source), @kind, @metadata,
        @agent_id, sqlc.narg(expires_at), sqlc.narg(client_token), @similar_keys::bigint[])
ON CONFLICT (org_id, created_by_agent_id, client_token) DO NOTHING
RETURNING id, embedding_status, embedding_generation, created_at;

-- name: InsertTaskLink :one
-- A duplicate link returns no row (idempotent); the caller reads it back.
INSERT INTO task_knowledge (org_id, task_id, knowledge_id, kind, created_by_agent_id)
VALUES (@org_id, @task_id, @knowledge_id, @kind, sqlc.narg(agent_id))
ON CONFLICT (org_id, task_id, knowledge_id, kind) DO NOTHING
RETURNING task_id, knowledge_id, kind, created_at;

-- name: GetTaskLink :one
SELECT task_id, knowledge_id, kind, created_at
FROM task_knowledge
WHERE org_id = @org_id AND task_id = @task_id AND knowledge_id = @knowledge_id AND kind = @kind;

-- name: ListEntryTaskLinks :many
SELECT task_id, knowledge_id, kind, created_at
FROM task_knowledge
WHERE org_id = @org_id AND knowledge_id = @knowledge_id
ORDER BY created_at, task_id, kind;

-- name: EntryExists :one
SELECT EXISTS (SELECT 1 FROM knowledge WHERE org_id = @org_id AND id = @id);

-- name: TaskExists :one
SELECT EXISTS (SELECT 1 FROM tasks WHERE org_id = @org_id AND id = @id);

-- name: ListTaskKnowledge :many
-- Entries linked to a task; kind NULL means every kind.
SELECT l.task_id, l.knowledge_id, l.kind, l.created_at AS linked_at,
       k.title, k.tags, k.confidence, k.embedding_status, k.head_id, k.created_at
FROM task_knowledge l
JOIN knowledge k ON k.org_id = l.org_id AND k.id = l.knowledge_id
WHERE l.org_id = @org_id AND l.task_id = @task_id
  AND (sqlc.narg(kind)::text IS NULL OR l.kind = sqlc.narg(kind)::text)
ORDER BY l.created_at, l.knowledge_id, l.kind;

-- name: LockOrgSupersessions :exec
-- Serialises the supersessions of one org (see entries/supersede.go for why).
SELECT pg_advisory_xact_lock(hashtext('knowledge.supersede'), hashtext(@org_id::text));

-- name: LockEntries :many
-- Row locks in a fixed order (by id) so two writers never deadlock on them.
SELECT id, created_by_agent_id, superseded_by, head_id
FROM knowledge
WHERE org_id = @org_id AND id = ANY(@ids::uuid[])
ORDER BY id
FOR UPDATE;

-- name: MarkSuperseded :execrows
-- Only a head can be superseded; the WHERE re-checks it. It is superseded
-- no earlier than it was made and than the entries it replaced were
-- superseded: now() is the transaction's start, which can precede the
-- supersession this one waited for on the org's lock, and a chain's
-- supersessions follow each other in time.
UPDATE knowledge k
SET superseded_by = @new_id, head_id = @head_id, updated_at = now(),
    superseded_at = greatest(now(), k.created_at,
                             (SELECT max(p.superseded_at) FROM knowledge p WHERE p.org_id = @org_id AND p.head_id = k.id))
WHERE k.org_id = @org_id AND k.id = @old_id AND k.head_id IS NULL;

-- name: MoveHeads :execrows
-- Every entry whose cached head was old_head now points at new_head.
UPDATE knowledge
SET head_id = @new_head, updated_at = now()
WHERE org_id = @org_id AND head_id = @old_head;

-- name: InsertSupersession :exec
-- The edge of a supersession MarkSuperseded wrote, at the time it wrote
-- (never before now(): greatest rather than coalesce, which a Citus
-- coordinator refuses around now()).
INSERT INTO knowledge_supersessions (org_id, old_id, new_id, agent_id, created_at)
SELECT k.org_id, @old_id, @new_id, @agent_id, greatest(k.superseded_at, now())
FROM knowledge k
WHERE k.org_id = @org_id AND k.id = @old_id;

-- name: ListCursorKey :one
-- The key list cursors are signed with (migration 00005).
SELECT value FROM knowledge_secrets WHERE name = 'list_cursor';

-- name: ListConfig :exec
-- Transaction-local planner settings of the ListEntries that follows in the
-- same pipeline (browse.go): without statistics (a never-analyzed table, an
-- org grown since the last ANALYZE) the planner read and sorted the whole
-- org for every page (163 ms p50 at 100k entries); with no sort and no
-- bitmap or sequential scan allowed, the only plans left walk an index in
-- the page's order backwards from the position and stop at the page's end:
-- knowledge_org_created_idx, or with a kind or an exact source filter
-- knowledge_org_kind_idx or knowledge_org_source_idx, which hold only the
-- entries that pass it.
-- With match_set (a document's sections, or a metadata or source prefix
-- filter that few entries pass, browse.go), the page is read from those
-- entries (ListEntriesByIds), by the primary key, and sorted. Plans are
-- custom (the filters not given fold away, the given ones become index
-- conditions), made for each page.
SELECT set_config('enable_sort', CASE WHEN @match_set::bool THEN 'on' ELSE 'off' END, true),
       set_config('enable_bitmapscan', CASE WHEN @match_set::bool THEN 'on' ELSE 'off' END, true),
       set_config('enable_seqscan', 'off', true),
       set_config('plan_cache_mode', 'force_custom_plan', true);

-- name: ListEntries :many
-- One page of list_knowledge: the org's entries newest first, strictly
-- before the position (before_at, before_id), filtered (the entry fields'
-- filters are NULL when not given; ListConfig says how they are read). With as_of, what
-- the org knew then: the position starts at as_of (so nothing created
-- later), and superseded and expired mean "by as_of". The position is a
-- row comparison on the columns of knowledge_org_created_idx after org_id,
-- so the page is an index range scan backwards from it, as fast at any
-- depth as on the first page; the tags test is written so that no bitmap
-- of the tags index can be ANDed in (the plan must not depend on
-- statistics). Only the start of the body is read: a listing shows the
-- snippet of an entry's beginning.
SELECT k.id, k.title, left(k.body, @snippet_chars::int)::text AS body_start, k.tags, k.confidence,
       k.source, k.kind, k.metadata,
       k.created_by_agent_id, k.created_at, k.expires_at, k.head_id, k.embedding_status
FROM knowledge k
WHERE k.org_id = @org_id
  AND (k.created_at, k.id) < (@before_at::timestamptz, @before_id::uuid)
  AND k.created_at > @created_after::timestamptz
  AND (cardinality(@tags::text[]) = 0 OR k.tags @> @tags::text[])
  AND (NOT @by_author::bool OR k.created_by_agent_id = @author_id::uuid)
  AND (NOT @by_task::bool OR EXISTS (SELECT 1 FROM task_knowledge t
                                     WHERE t.org_id = k.org_id AND t.task_id = @task_id::uuid AND t.knowledge_id = k.id))
  AND (@include_superseded::bool OR k.head_id IS NULL OR k.superseded_at > sqlc.narg(as_of)::timestamptz)
  AND (@include_expired::bool OR k.expires_at IS NULL OR k.expires_at > coalesce(sqlc.narg(as_of)::timestamptz, now()))
  AND (sqlc.narg(kind)::text IS NULL OR k.kind = sqlc.narg(kind)::text)
  AND (sqlc.narg(source)::text IS NULL OR k.source = sqlc.narg(source)::text)
  AND (sqlc.narg(source_prefix)::text IS NULL
       OR (k.source >= sqlc.narg(source_prefix)::text AND k.source < sqlc.narg(source_end)::text
           AND starts_with(k.source, sqlc.narg(source_prefix)::text)))
  AND (sqlc.narg(metadata)::jsonb IS NULL OR k.metadata @> sqlc.narg(metadata)::jsonb)
ORDER BY k.created_at DESC, k.id DESC
LIMIT @max_rows::int;

-- name: ListEntriesByIds :many
-- ListEntries' page read from given entries instead of a walk (ListConfig
-- with match_set; browse.go, listMatches): a document's sections, or the
-- few entries a metadata or source prefix filter matches. The same
-- position and filters, tested on each entry, then sorted. Each id is one
-- probe of the primary key: the subquery is not pulled up (OFFSET 0), so
-- no plan can read the org instead (an org's id alone, without
-- statistics, looks like a few rows: the planner read all 5,000 entries of
-- an org through one of its indexes for a document's 50 sections).
SELECT k.id, k.title, left(k.body, @snippet_chars::int)::text AS body_start, k.tags, k.confidence,
       k.source, k.kind, k.metadata,
       k.created_by_agent_id, k.created_at, k.expires_at, k.head_id, k.embedding_status
FROM unnest(@ids::uuid[]) AS i (id)
CROSS JOIN LATERAL (SELECT e.id, e.title, e.body, e.tags, e.confidence, e.source, e.kind, e.metadata,
                           e.created_by_agent_id, e.created_at, e.expires_at, e.head_id, e.embedding_status, e.superseded_at
                    FROM knowledge e WHERE e.org_id = @org_id AND e.id = i.id OFFSET 0) k
WHERE (k.created_at, k.id) < (@before_at::timestamptz, @before_id::uuid)
  AND k.created_at > @created_after::timestamptz
  AND (cardinality(@tags::text[]) = 0 OR k.tags @> @tags::text[])
  AND (NOT @by_author::bool OR k.created_by_agent_id = @author_id::uuid)
  AND (NOT @by_task::bool OR EXISTS (SELECT 1 FROM task_knowledge t
                                     WHERE t.org_id = @org_id AND t.task_id = @task_id::uuid AND t.knowledge_id = k.id))
  AND (@include_superseded::bool OR k.head_id IS NULL OR k.superseded_at > sqlc.narg(as_of)::timestamptz)
  AND (@include_expired::bool OR k.expires_at IS NULL OR k.expires_at > coalesce(sqlc.narg(as_of)::timestamptz, now()))
  AND (sqlc.narg(kind)::text IS NULL OR k.kind = sqlc.narg(kind)::text)
  AND (sqlc.narg(source)::text IS NULL OR k.source = sqlc.narg(source)::text)
  AND (sqlc.narg(source_prefix)::text IS NULL OR starts_with(k.source, sqlc.narg(source_prefix)::text))
  AND (sqlc.narg(metadata)::jsonb IS NULL OR k.metadata @> sqlc.narg(metadata)::jsonb)
ORDER BY k.created_at DESC, k.id DESC
LIMIT @max_rows::int;

-- name: SimilarConfig :exec
-- Sent in the same batch (one implicit transaction) as the duplicate check
-- (packages/knowledge/entries/similar.go): its shape pins its plan, so the plan is
-- built once per connection instead of once per store (about 2.7 ms of
-- planning for a 1 ms statement), no sequential scan (the keys' GIN
-- index is the only way to the entries sharing a key, whatever the
-- statistics say), and no JIT.
-- (Not generic on a Citus coordinator: see SearchConfig.)
SELECT set_config('plan_cache_mode', CASE WHEN current_setting('citus.version', true) IS NULL THEN 'force_generic_plan' ELSE current_setting('plan_cache_mode') END, true),
       set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true);

-- name: SimilarKeysMissing :many
-- A batch of entries without duplicate-check keys (stored before the
-- column existed, or imported), for Upkeep to fill in.
SELECT org_id, id, title, body FROM knowledge
WHERE similar_keys IS NULL
ORDER BY org_id, id
LIMIT @max_rows;

-- name: SetSimilarKeys :execrows
-- Upkeep's write: the rows locked first in (org, id) order, skipping those
-- another transaction holds (a purge erasing them, a supersession), so
-- upkeep never waits for a row lock (docs/operators.md, "Lock order");
-- the rows skipped keep NULL keys and come back at the next pass. The
-- org_id = ANY filters change nothing on a single node; on a Citus cluster,
-- where Upkeep sends one org's rows at a time, they prune the statement to
-- the org's shard (a FOR UPDATE may not span shards).
WITH v AS (
    -- The arrays read by subscript, the set-returning function in FROM:
    -- Citus cannot route one in a CTE's select list.
    SELECT (@org_ids::uuid[])[i] AS org_id, (@ids::uuid[])[i] AS id, ((@keys::text[])[i])::bigint[] AS keys
    FROM generate_subscripts(@ids::uuid[], 1) AS i
), locked AS MATERIALIZED (
    SELECT k.org_id, k.id FROM knowledge k JOIN v ON k.org_id = v.org_id AND k.id = v.id
    WHERE k.similar_keys IS NULL AND k.org_id = ANY(@org_ids::uuid[])
    ORDER BY k.org_id, k.id
    FOR UPDATE OF k SKIP LOCKED
)
UPDATE knowledge k SET similar_keys = v.keys
FROM v JOIN locked l ON l.org_id = v.org_id AND l.id = v.id
WHERE k.org_id = v.org_id AND k.id = v.id AND k.org_id = ANY(@org_ids::uuid[]);

-- name: EntryBySource :one
-- get_knowledge by source: the live document of this source (its
-- document entry a head, not expired) if there is one, else the newest
-- live entry (a head, not expired) with exactly this source
-- (knowledge_documents_live_source_key, then knowledge_org_source_idx
-- backwards): a document's sections carry its source too.
SELECT x.id::uuid AS id FROM (
    (SELECT d.id, 0 AS pref FROM knowledge_documents d
     JOIN knowledge k ON k.org_id = d.org_id AND k.id = d.id
     WHERE d.org_id = @org_id AND d.source = @source::text AND d.live
       AND k.head_id IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
     LIMIT 1)
    UNION ALL
    (SELECT k.id, 1 FROM knowledge k
     WHERE k.org_id = @org_id AND k.source = @source::text
       AND k.head_id IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
     ORDER BY k.created_at DESC, k.id DESC
     LIMIT 1)
) x
ORDER BY x.pref
LIMIT 1;

-- name: MetadataMatches :many
-- The org's entries whose metadata holds these keys and values, at most
-- max (the function: migration 00030).
SELECT m.id::uuid AS id FROM knowledge_metadata_matches(@org_id, @metadata::jsonb, @max::int) m;

-- name: SourcePrefixMatches :many
-- The org's entries whose source starts with prefix (a range of
-- knowledge_org_source_idx up to prefix_end), at most max.
SELECT k.id FROM knowledge k
WHERE k.org_id = @org_id AND k.source >= @prefix::text AND k.source < @prefix_end::text
  AND starts_with(k.source, @prefix::text)
LIMIT @max::int;

-- name: SourceMatches :many
-- The org's entries whose source is exactly source
-- (knowledge_org_source_idx), at most max.
SELECT k.id FROM knowledge k
WHERE k.org_id = @org_id AND k.source = @source::text
LIMIT @max::int;

-- name: KindMatches :many
-- The org's entries of a kind (knowledge_org_kind_idx), at most max.
SELECT k.id FROM knowledge k
WHERE k.org_id = @org_id AND k.kind = @kind::text
LIMIT @max::int;
