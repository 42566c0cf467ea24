-- The embeddings pipeline (packages/knowledge/outbox/outbox.go, for
-- packages/knowledge/jobs and apps/worker).
--
-- An entry's embedding_status = 'pending' is the outbox of the embeddings
-- queue; embedding_generation names the request a job was made for. Every
-- write below is conditional on (pending, generation), so a late or repeated
-- job can never overwrite newer data.

-- name: ListJobEntries :many
-- The entries of a batch of one org that still wait for exactly the job's
-- generation; gone, superseded-generation and already-done entries drop
-- out here. Each job's entry is one probe of the primary key (a LATERAL
-- under LIMIT 1, by equality on both of its columns), never the org's
-- pending entries filtered for the batch: so a planner without statistics
-- read the org's whole backlog for each batch, through the pending indexes
-- (whose predicate "embedding_status = 'pending'" proved; hence IS NOT
-- DISTINCT FROM, the same test on a NOT NULL column) or, with the orgs as
-- an array (= ANY, which Citus needed to prune), another index of the org
-- (TestEmbeddingBatchReadsOnlyItsEntries counts the rows each scan read).
-- One org a statement: the outbox groups a batch by org (a batch is one
-- org's already: jobs.GroupKey), and the org's equality is what a Citus
-- worker routes by.
SELECT k.org_id, k.id, k.title, k.body, k.embedding_generation, k.embedding_requested_at
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@generations::int[]) AS generation) j
CROSS JOIN LATERAL (
    SELECT k.org_id, k.id, k.title, k.body, k.embedding_generation, k.embedding_requested_at
    FROM knowledge k
    WHERE k.org_id = @org_id::uuid AND k.id = j.id
      AND k.embedding_generation = j.generation AND k.embedding_status IS NOT DISTINCT FROM 'pending'
    LIMIT 1
) k;

-- name: MarkEmbeddingReady :one
-- No row: the entry is gone or moved on to another generation; nothing written.
-- The entry's chunks of the model left from before go in the same
-- statement (a re-embed cleared its vector, which already deleted them:
-- knowledge_drop_chunks; this is the net), one round trip less for each
-- entry embedded; its new chunks are written after it.
-- The status and the model are tested with IS NOT DISTINCT FROM (the same
-- test: neither column is NULL here), so that only the primary keys serve
-- the statement: with "embedding_status = 'pending'", which proves the
-- pending indexes' predicate, a planner without statistics read the entry
-- through the org's pending entries (knowledge_org_pending_idx), each write
-- reading the whole backlog (3.5 ms a write with 30,000 pending, against
-- 0.1: docs/benchmarks.md, "Embeddings pipeline"), and with
-- "c.embedding_model =" the chunks through the org's chunks of the model
-- (knowledge_chunks_space_idx) instead of the entry's
-- (TestEmbeddingBatchReadsOnlyItsEntries counts the rows each scan read,
-- its filter's included).
WITH ready AS (
    UPDATE knowledge k
    SET embedding = @embedding, embedding_status = 'ready', embedding_model = @model,
        embedding_error = NULL, embedded_at = now()
    WHERE k.org_id = @org_id AND k.id = @id
      AND k.embedding_generation = @generation AND k.embedding_status IS NOT DISTINCT FROM 'pending'
    RETURNING k.embedding_requested_at, k.embedded_at
), cleared AS (
    DELETE FROM knowledge_chunks c
    WHERE c.org_id = @org_id AND c.entry_id = @id AND c.embedding_model IS NOT DISTINCT FROM @model
      AND EXISTS (SELECT 1 FROM ready)
)
SELECT embedding_requested_at, embedded_at FROM ready;

-- name: MarkEmbeddingFailed :execrows
UPDATE knowledge
SET embedding_status = 'failed', embedding_error = @error
WHERE org_id = @org_id AND id = @id
  AND embedding_generation = @generation AND embedding_status = 'pending';

-- name: ListStalePending :many
-- What the reconciler re-enqueues: entries pending since before @before, the
-- oldest first (knowledge_pending_idx). Across orgs: the worker serves all.
SELECT org_id, id, embedding_generation
FROM knowledge
WHERE embedding_status = 'pending' AND embedding_requested_at < @before
ORDER BY embedding_requested_at
LIMIT @max_rows;

-- name: PendingBacklog :one
-- The backlog gauge: how many entries wait and since when.
SELECT count(*)::bigint AS pending,
       coalesce(extract(epoch FROM now() - min(embedding_requested_at)), 0)::float8 AS oldest_seconds
FROM knowledge
WHERE embedding_status = 'pending';

-- name: RequestReembed :many
-- Asks for new vectors: a new generation, pending again (the vector is
-- cleared: the schema ties 'ready' to having one, and a vector of the old
-- model is not comparable with queries of the new one anyway). Without
-- @all_entries only failed entries and ready entries of another model or,
-- when @dims is not 0, of another width (their space, vectorspace.go).
UPDATE knowledge
SET embedding_generation = embedding_generation + 1, embedding_status = 'pending',
    embedding = NULL, embedding_model = NULL, embedding_error = NULL, embedded_at = NULL,
    embedding_requested_at = now()
WHERE org_id = @org_id
  AND (@all_entries::boolean
       OR embedding_status = 'failed'
       OR (embedding_status = 'ready' AND embedding_model IS DISTINCT FROM @model::text)
       OR (embedding_status = 'ready' AND @dims::int > 0 AND vector_dims(embedding) <> @dims::int))
RETURNING org_id, id, embedding_generation;

-- name: ListCurrentJobs :many
-- Which of the given jobs still name their entry's current generation, in
-- any status: a job whose entry is gone or was re-requested since (a new
-- generation) has nothing left to say. PruneArchived deletes archived tasks
-- none of whose jobs is current.
SELECT k.org_id, k.id, k.embedding_generation
FROM knowledge k
JOIN (SELECT unnest(@org_ids::uuid[]) AS org_id, unnest(@ids::uuid[]) AS id,
             unnest(@generations::int[]) AS generation) j
  ON k.org_id = j.org_id AND k.id = j.id AND k.embedding_generation = j.generation;

-- name: VectorWriteConfig :exec
-- Sent in one batch with LockPendingForEmbedding, the first statement of a
-- vector write's transaction (packages/knowledge/outbox): the statements
-- of the transaction (the lock, ListJobEntries, MarkEmbeddingReady,
-- InsertChunk) each probe primary keys, a shape that pins their plans, so
-- each connection plans them once. Left to plan_cache_mode auto,
-- PostgreSQL kept custom plans of the lock: 0.24 ms of planning a batch
-- for 0.04 of running it (pg_stat_statements, the 200-org load).
-- (Not generic on a Citus node: see SearchConfig.)
SELECT set_config('plan_cache_mode', CASE WHEN current_setting('citus.version', true) IS NULL THEN 'force_generic_plan' ELSE current_setting('plan_cache_mode') END, true);

-- name: LockPendingForEmbedding :many
-- The worker's first statement before writing vectors: the batch's entries
-- (of one org) still pending at the job's generation, locked in id order,
-- skipping rows another transaction holds (a purge or forget erasing them,
-- a supersession, upkeep). The worker never waits for a row lock, so it is
-- never part of a deadlock; the rows it skipped it tries again after a
-- short back-off (packages/knowledge/outbox/outbox.go, WriteVectors).
-- A probe of the primary key each, as ListJobEntries (why there): the
-- jobs ordered first, each probe locking its row as the loop reaches it.
SELECT k.org_id, k.id
FROM (SELECT x.id, x.generation
      FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@generations::int[]) AS generation) x
      ORDER BY x.id) j
CROSS JOIN LATERAL (
    SELECT k.org_id, k.id
    FROM knowledge k
    WHERE k.org_id = @org_id::uuid AND k.id = j.id
      AND k.embedding_generation = j.generation AND k.embedding_status IS NOT DISTINCT FROM 'pending'
    LIMIT 1
    FOR UPDATE OF k SKIP LOCKED
) k;
