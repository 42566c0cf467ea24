-- Purge (packages/knowledge/purge.go): erasing entries for good, org by
-- org. Every statement is scoped by @org_id.

-- name: PurgeSelectByAgent :many
-- A batch of the entries an agent created, for a purge by agent (keyset
-- paged by id, so a dry run pages too).
SELECT id FROM knowledge
WHERE org_id = @org_id AND created_by_agent_id = @agent_id AND id > @after
ORDER BY id
LIMIT @max_rows;

-- name: PurgeSelectAll :many
-- A batch of the org's entries, for a purge of the whole org.
SELECT id FROM knowledge
WHERE org_id = @org_id AND id > @after
ORDER BY id
LIMIT @max_rows;

-- name: PurgeLockEntries :many
-- The entries to erase, locked (in id order, like supersede), with what the
-- chains, the idempotence keys and forget's tombstone need.
SELECT id, created_by_agent_id, client_token, superseded_by, head_id, created_at
FROM knowledge
WHERE org_id = @org_id AND id = ANY(@ids::uuid[])
ORDER BY id
FOR UPDATE;

-- name: PurgeChainMembers :many
-- Every entry of the chains whose heads are given: heads and the entries
-- that name them as head (knowledge_head_idx).
SELECT id, superseded_by
FROM knowledge
WHERE org_id = @org_id AND (id = ANY(@heads::uuid[]) OR head_id = ANY(@heads::uuid[]));

-- name: PurgeRelink :exec
-- A surviving entry of a chain after the entries between it and its head
-- (or the head) were erased: its next surviving successor and head, or
-- both NULL when nothing after it survives (it is a head again). A section
-- whose document replaced it (its row ended: changed, retired) and a
-- document that is no longer its source's live version do not come back
-- as current knowledge: they are heads again, expired when they stopped
-- being current (the section's end, else the supersession), as a retired
-- section is. Sections follow their document (docs/knowledge.md).
UPDATE knowledge k
SET superseded_by = sqlc.narg(superseded_by)::uuid, head_id = sqlc.narg(head_id)::uuid,
    superseded_at = CASE WHEN sqlc.narg(superseded_by)::uuid IS NULL THEN NULL ELSE k.superseded_at END,
    expires_at = CASE
        WHEN sqlc.narg(superseded_by)::uuid IS NULL
         AND (EXISTS (SELECT 1 FROM knowledge_sections s WHERE s.org_id = @org_id AND s.id = @id AND s.ended_at IS NOT NULL)
              OR EXISTS (SELECT 1 FROM knowledge_documents d WHERE d.org_id = @org_id AND d.id = @id AND NOT d.live))
        THEN least(k.expires_at,
                   (SELECT s.ended_at FROM knowledge_sections s WHERE s.org_id = @org_id AND s.id = @id),
                   k.superseded_at)
        ELSE k.expires_at END,
    updated_at = now()
WHERE k.org_id = @org_id AND k.id = @id;

-- name: PurgeRelinkEdge :exec
-- The recorded direct edge of a surviving entry now names its new
-- successor (who superseded, and when, are kept).
UPDATE knowledge_supersessions SET new_id = @new_id
WHERE org_id = @org_id AND old_id = @old_id;

-- name: PurgeDeleteEdges :execrows
-- Recorded edges that touch an erased entry (those of survivors that were
-- relinked already name a survivor), and the edges of entries that became
-- heads again.
DELETE FROM knowledge_supersessions
WHERE org_id = @org_id
  AND (old_id = ANY(@ids::uuid[]) OR new_id = ANY(@ids::uuid[]) OR old_id = ANY(@heads_again::uuid[]));

-- name: PurgeDeleteTaskLinks :execrows
DELETE FROM task_knowledge WHERE org_id = @org_id AND knowledge_id = ANY(@ids::uuid[]);

-- name: PurgeUnindex :one
-- Takes the erased entries out of the org's BM25 index and statistics, so
-- document frequencies, the entry count and the lengths stay equal to what
-- the index holds. Runs after LockSearchStats (the indexer's lock) in the
-- same transaction, so no indexer moves these entries meanwhile. An entry
-- still in knowledge_index_queue has no postings and no share of the
-- statistics; an indexed one was analysed with the org's configuration
-- (a configuration change drops the index and queues every entry again),
-- and knowledge_passage_terms is immutable, so its terms are computed
-- again exactly as the indexer did. knowledge_postings has no index by entry: the
-- terms lead to the postings through the primary key (org, field, term).
WITH st AS (
    SELECT s.config FROM knowledge_search_stats s WHERE s.org_id = @org_id
),
-- The erased entries by the primary key, one look-up each, and those still
-- queued as one array: as a join, on tables never analyzed, the planner
-- read the org's entries, and its queue once for each of them.
gone AS (
    SELECT k.id, k.title, k.body
    FROM (SELECT DISTINCT unnest(@ids::uuid[]) AS id) x
    CROSS JOIN LATERAL (SELECT k.id, k.title, k.body FROM knowledge k
                        WHERE k.org_id = @org_id AND k.id = x.id LIMIT 1) k
    WHERE k.id <> ALL (ARRAY(SELECT q.entry_id FROM knowledge_index_queue q
                             WHERE q.org_id = @org_id AND q.entry_id = ANY(@ids::uuid[])))
),
terms AS MATERIALIZED (
    SELECT g.id AS entry_id, a.field, a.passage, a.term, a.len
    FROM gone g
    CROSS JOIN st
    CROSS JOIN LATERAL knowledge_passage_terms(st.config, g.title, g.body) AS a (field, passage, term, tf, len)
),
-- One range of the primary key per distinct term of the batch, keeping the
-- batch's entries: per (entry, term) pair, a common term's range was read
-- once for every entry holding it (500 entries of a 20,000-entry org: 13.5 s;
-- per distinct term: see docs/operators.md).
del AS (
    DELETE FROM knowledge_postings p
    USING (SELECT DISTINCT t.field, t.term FROM terms t) d
    WHERE p.org_id = @org_id AND p.field = d.field AND p.term = d.term AND p.entry_id = ANY(@ids::uuid[])
    RETURNING 1
),
dfs AS (
    SELECT t.field, t.term, count(DISTINCT t.entry_id)::integer AS n FROM terms t GROUP BY t.field, t.term
),
dec AS (
    UPDATE knowledge_term_stats s SET df = s.df - d.n
    FROM dfs d
    WHERE s.org_id = @org_id AND s.field = d.field AND s.term = d.term AND s.df > d.n
    RETURNING 1
),
gone_terms AS (
    DELETE FROM knowledge_term_stats s
    USING dfs d
    WHERE s.org_id = @org_id AND s.field = d.field AND s.term = d.term AND s.df <= d.n
    RETURNING 1
),
lens AS (
    SELECT p.entry_id, round(avg(p.len_b))::bigint AS len_b, coalesce(max(p.len_t), 0) AS len_t
    FROM (SELECT t.entry_id, t.passage, max(t.len) FILTER (WHERE t.field = 'b') AS len_b,
                 max(t.len) FILTER (WHERE t.field = 't') AS len_t
          FROM terms t GROUP BY t.entry_id, t.passage) p
    GROUP BY p.entry_id
),
tot AS (
    SELECT count(*) AS n, coalesce(sum(l.len_b), 0) AS len_b, coalesce(sum(l.len_t), 0) AS len_t FROM lens l
),
upd AS (
    UPDATE knowledge_search_stats s
    SET docs = s.docs - tot.n, len_b = s.len_b - tot.len_b, len_t = s.len_t - tot.len_t, updated_at = now()
    FROM tot WHERE s.org_id = @org_id
    RETURNING 1
)
SELECT (SELECT count(*) FROM del)::bigint AS postings,
       (SELECT n FROM tot)::bigint AS docs,
       ((SELECT count(*) FROM dec) + (SELECT count(*) FROM gone_terms))::bigint AS terms;

-- name: PurgeCountPostings :one
-- What PurgeUnindex would remove (dry run): the postings of the indexed
-- entries among @ids.
SELECT count(*)::bigint
FROM knowledge k
CROSS JOIN (SELECT s.config FROM knowledge_search_stats s WHERE s.org_id = @org_id) st
CROSS JOIN LATERAL knowledge_passage_terms(st.config, k.title, k.body) AS a (field, passage, term, tf, len)
WHERE k.org_id = @org_id AND k.id = ANY(@ids::uuid[])
  AND NOT EXISTS (SELECT 1 FROM knowledge_index_queue q WHERE q.org_id = @org_id AND q.entry_id = k.id);

-- name: PurgeDeleteQueued :execrows
DELETE FROM knowledge_index_queue WHERE org_id = @org_id AND entry_id = ANY(@ids::uuid[]);

-- name: PurgeDeleteEntries :execrows
DELETE FROM knowledge WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: PurgeCountLinks :one
-- Dry run: task links and recorded edges the erased entries take along.
SELECT (SELECT count(*) FROM task_knowledge l WHERE l.org_id = @org_id AND l.knowledge_id = ANY(@ids::uuid[]))::bigint AS links,
       (SELECT count(*) FROM knowledge_supersessions e
        WHERE e.org_id = @org_id AND (e.old_id = ANY(@ids::uuid[]) OR e.new_id = ANY(@ids::uuid[])))::bigint AS edges;

-- name: PurgeOrgIndex :exec
-- A purge of a whole org: its index statistics go with it (the org's
-- postings and term statistics are deleted by DeleteOrgPostings and
-- DeleteOrgTermStats); a new entry makes the row again.
DELETE FROM knowledge_search_stats WHERE org_id = @org_id;

-- name: PurgeDeleteOrgQueue :execrows
DELETE FROM knowledge_index_queue WHERE org_id = @org_id;
