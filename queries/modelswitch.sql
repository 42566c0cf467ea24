-- A model switch (packages/knowledge/maintenance/modelswitch.go; docs/embeddings.md,
-- "Model switch"): the next model's vectors are rows of knowledge_chunks
-- (chunk 0 is an entry's first), written by the backfill; an org is served
-- from the next model once it has cut over (knowledge_org_spaces).

-- name: OrgServedBy :one
-- Whether the org has cut over to that model and width.
SELECT EXISTS (SELECT 1 FROM knowledge_org_spaces
               WHERE org_id = @org_id AND model = @model::text AND dims = @dims::int);

-- name: BackfillEntries :many
-- The next entries, in key order after (@after_org, @after_id), that have a
-- vector of the current model and none of the next model yet.
SELECT k.org_id, k.id, k.title, k.body, k.embedding_generation
FROM knowledge k
WHERE (k.org_id, k.id) > (@after_org::uuid, @after_id::uuid)
  AND k.embedding IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM knowledge_chunks c
                  WHERE c.org_id = k.org_id AND c.entry_id = k.id
                    AND c.embedding_model = @model::text AND c.chunk = 0)
ORDER BY k.org_id, k.id
LIMIT @max::int;

-- name: InsertNextChunk :execrows
-- One of an entry's next-model vectors, written only while the entry still
-- has its vector at the generation read (a re-embed or a forget since then
-- cleared it: nothing is written). The entry's row is share-locked, so a
-- forget that clears it waits for this write and its trigger then deletes
-- what was written.
INSERT INTO knowledge_chunks (org_id, entry_id, chunk, start_char, end_char, embedding_model, embedding)
SELECT k.org_id, k.id, @chunk, @start_char, @end_char, @embedding_model, @embedding
FROM knowledge k
WHERE k.org_id = @org_id AND k.id = @entry_id AND k.embedding_generation = @generation AND k.embedding IS NOT NULL
FOR SHARE
ON CONFLICT DO NOTHING;

-- name: OrgsToCutOver :many
-- Orgs not served by the next model yet none of whose entries waits for a
-- vector or lacks one of the next model: covered, ready to cut over. The
-- orgs left out are uncorrelated subqueries: on a Citus cluster orgs is a
-- reference table, which Citus cannot anti-join to a distributed table
-- row by row, but it runs each subquery once across the shards.
SELECT o.id FROM orgs o
WHERE o.id NOT IN (SELECT s.org_id FROM knowledge_org_spaces s)
  AND o.id NOT IN (
      SELECT k.org_id FROM knowledge k
      WHERE k.embedding_status = 'pending'
         OR (k.embedding IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM knowledge_chunks c
                             WHERE c.org_id = k.org_id AND c.entry_id = k.id
                               AND c.embedding_model = @model::text AND c.chunk = 0)))
ORDER BY o.id;

-- name: CutOverOrg :execrows
INSERT INTO knowledge_org_spaces (org_id, model, dims) VALUES (@org_id, @model, @dims)
ON CONFLICT (org_id) DO NOTHING;

-- name: SwitchCoverage :many
-- Per org: entries with a vector of the current model, of those how many
-- have the next model's, and whether the org has cut over.
SELECT k.org_id,
       count(*) FILTER (WHERE k.embedding IS NOT NULL)::bigint AS with_vector,
       count(*) FILTER (WHERE k.embedding IS NOT NULL AND EXISTS (
           SELECT 1 FROM knowledge_chunks c WHERE c.org_id = k.org_id AND c.entry_id = k.id
             AND c.embedding_model = @model::text AND c.chunk = 0))::bigint AS covered,
       EXISTS (SELECT 1 FROM knowledge_org_spaces s WHERE s.org_id = k.org_id)::bool AS switched
FROM knowledge k
GROUP BY k.org_id
ORDER BY k.org_id;

-- name: FinishSwitchBatch :one
-- Up to @max entries of the org whose own vector is still of another model
-- take the next model's first-chunk vector as their own; their chunks of
-- other models, and that chunk 0, are deleted. The entry's row keeps a
-- vector throughout (the trigger that clears chunks fires only on a
-- cleared vector).
WITH moved AS (
    UPDATE knowledge k
    SET embedding = c.embedding, embedding_model = c.embedding_model, embedded_at = now()
    FROM knowledge_chunks c
    WHERE k.org_id = @org_id AND k.embedding IS NOT NULL AND k.embedding_model <> @model::text
      AND c.org_id = k.org_id AND c.entry_id = k.id AND c.embedding_model = @model::text AND c.chunk = 0
      AND k.id IN (SELECT k2.id FROM knowledge k2
                   WHERE k2.org_id = @org_id AND k2.embedding IS NOT NULL AND k2.embedding_model <> @model::text
                     AND EXISTS (SELECT 1 FROM knowledge_chunks c2
                                 WHERE c2.org_id = k2.org_id AND c2.entry_id = k2.id
                                   AND c2.embedding_model = @model::text AND c2.chunk = 0)
                   ORDER BY k2.id LIMIT @max::int)
    RETURNING k.org_id, k.id
), dropped AS (
    DELETE FROM knowledge_chunks c
    USING moved m
    WHERE c.org_id = m.org_id AND c.entry_id = m.id AND (c.embedding_model <> @model::text OR c.chunk = 0)
)
SELECT count(*)::bigint AS moved FROM moved;

-- name: SwitchedOrgs :many
SELECT org_id FROM knowledge_org_spaces WHERE model = @model::text AND dims = @dims::int ORDER BY org_id;

-- name: ForgetOrgSpaces :execrows
-- After a finished switch: the next model is the configured one.
DELETE FROM knowledge_org_spaces WHERE model = @model::text AND dims = @dims::int;
