-- The duplicate check finished after the store's answer
-- (packages/knowledge/entries/finish.go; migration 00040): its owner is
-- package entries, the only writer of knowledge_similar_checks and
-- knowledge_similar (get_knowledge reads them in GetEntry).

-- name: InsertSimilarCheck :exec
-- In the store's transaction: the check by meaning is owed to the worker.
INSERT INTO knowledge_similar_checks (org_id, entry_id, requested_at)
VALUES (@org_id, @entry_id, @requested_at);

-- name: ClaimSimilarCheck :execrows
-- Marks a pending check done, if no other transaction holds it (the sweep
-- and the handler finishing the same entry, an erasure deleting it): the
-- worker never waits for a row lock (docs/operators.md, "Lock order"). 0:
-- nothing to record (done already, gone, or busy: the sweep comes back).
WITH locked AS MATERIALIZED (
    SELECT c.entry_id FROM knowledge_similar_checks c
    WHERE c.org_id = @org_id AND c.entry_id = @entry_id AND c.state = 'pending'
    FOR UPDATE SKIP LOCKED
)
UPDATE knowledge_similar_checks c SET state = 'done', checked_at = @checked_at
FROM locked l
WHERE c.org_id = @org_id AND c.entry_id = l.entry_id;

-- name: InsertSimilar :execrows
-- What a claimed check found. Each listed entry is locked FOR KEY SHARE
-- (what the foreign key takes) without waiting: one another transaction
-- holds (a supersession, an erasure) is left out rather than waited for.
WITH v AS (
    -- The arrays read by subscript, the set-returning function in FROM:
    -- Citus cannot route one in a CTE's select list.
    SELECT (@similar_ids::uuid[])[i] AS id, (@scores::real[])[i] AS score
    FROM generate_subscripts(@similar_ids::uuid[], 1) AS i
), locked AS MATERIALIZED (
    SELECT k.id FROM knowledge k
    WHERE k.org_id = @org_id AND k.id = ANY(@similar_ids::uuid[])
    ORDER BY k.id
    FOR KEY SHARE OF k SKIP LOCKED
)
INSERT INTO knowledge_similar (org_id, entry_id, similar_id, score)
SELECT @org_id::uuid, @entry_id::uuid, v.id, v.score
FROM v JOIN locked l ON l.id = v.id
ON CONFLICT DO NOTHING;

-- name: PendingSimilarChecks :many
-- The worker's sweep: checks still pending, requested before @before, of
-- entries whose vector of @model is written (a check the handler could not
-- finish: a failure, a worker stopped between the two writes), oldest
-- first. Across orgs: the worker serves all.
SELECT c.org_id, c.entry_id, k.title, k.body, k.embedding
FROM knowledge_similar_checks c
JOIN knowledge k ON k.org_id = c.org_id AND k.id = c.entry_id
WHERE c.state = 'pending' AND c.requested_at < @before
  AND k.embedding_status = 'ready' AND k.embedding_model = @model::text
ORDER BY c.requested_at
LIMIT @max_rows;

-- name: PendingSimilarAmong :many
-- Which of an org's entries (a batch the worker has just embedded) owe a
-- check.
SELECT entry_id FROM knowledge_similar_checks
WHERE org_id = @org_id AND entry_id = ANY(@ids::uuid[]) AND state = 'pending';
