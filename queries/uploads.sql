-- Documents uploaded in parts (packages/knowledge/documents/uploads.go). Every
-- statement an agent's call sends is scoped by @org_id and @agent_id: an
-- upload of another agent or org is one that does not exist. Look-ups are
-- primary-key ranges, so plans do not depend on statistics.

-- name: LockOrgUploads :exec
-- Serialises the starts of one org, so two starts cannot both pass the
-- org's staging limit.
SELECT pg_advisory_xact_lock(hashtext('knowledge.uploads'), hashtext(@org_id::text));

-- name: OrgStaging :one
-- What the org's open uploads (not finished, not expired) hold against the
-- staging limit: their declared sizes (a start reserves its totalBytes)
-- and their number. The org's uploads are one range of the primary key.
SELECT count(*)::bigint AS uploads, coalesce(sum(total_bytes), 0)::bigint AS reserved_bytes
FROM knowledge_document_uploads
WHERE org_id = @org_id AND finished_at IS NULL AND expires_at > @now::timestamptz;

-- name: InsertUpload :one
INSERT INTO knowledge_document_uploads (org_id, agent_id, title, source, tags, kind, metadata, format, total_bytes, created_at, expires_at)
VALUES (@org_id, @agent_id, @title, sqlc.narg(source)::text, @tags::text[], sqlc.narg(kind)::text, sqlc.narg(metadata)::jsonb,
        @format, @total_bytes, @now::timestamptz, @expires_at::timestamptz)
RETURNING id, created_at, expires_at;

-- name: LockUpload :one
-- The caller's own upload, not expired, locked: appends and finishes of
-- one upload take turns.
SELECT id, title, source, tags, kind, metadata, format, total_bytes, received_bytes, next_index,
       created_at, expires_at, document_id, result, finished_at
FROM knowledge_document_uploads
WHERE org_id = @org_id AND id = @id AND agent_id = @agent_id AND expires_at > @now::timestamptz
FOR UPDATE;

-- name: GetUpload :one
-- The caller's own upload, not expired, unlocked (a finish reads it before
-- it stores the document on other connections).
SELECT id, title, source, tags, kind, metadata, format, total_bytes, received_bytes, next_index,
       created_at, expires_at, document_id, result, finished_at
FROM knowledge_document_uploads
WHERE org_id = @org_id AND id = @id AND agent_id = @agent_id AND expires_at > @now::timestamptz;

-- name: UploadPartDigest :one
-- A part already received (a repeated append), for comparison.
SELECT bytes, digest FROM knowledge_document_upload_parts
WHERE org_id = @org_id AND upload_id = @upload_id AND index = @index;

-- name: InsertUploadPart :exec
INSERT INTO knowledge_document_upload_parts (org_id, upload_id, index, content, bytes, digest)
VALUES (@org_id, @upload_id, @index, @content, @bytes, @digest);

-- name: AdvanceUpload :one
-- After a part: its bytes counted, the next index expected, and the
-- expiry pushed UploadTTL past this append.
UPDATE knowledge_document_uploads
SET received_bytes = received_bytes + @bytes, next_index = next_index + 1, expires_at = @expires_at::timestamptz
WHERE org_id = @org_id AND id = @id
RETURNING received_bytes, next_index, expires_at;

-- name: FinishUpload :execrows
-- The finish that stored the document: its answer is kept for a second
-- finish, the parts go (they counted against the staging limit), and the
-- row stays until it expires. No row: another finish was first.
UPDATE knowledge_document_uploads
SET document_id = @document_id, result = @result::jsonb, finished_at = @now::timestamptz, expires_at = @expires_at::timestamptz
WHERE org_id = @org_id AND id = @id AND finished_at IS NULL;

-- name: DeleteUploadParts :execrows
DELETE FROM knowledge_document_upload_parts WHERE org_id = @org_id AND upload_id = @upload_id;

-- name: DocumentExists :one
-- Whether the document a finished upload made still exists (a forget or
-- a purge may have erased it since).
SELECT EXISTS (SELECT 1 FROM knowledge WHERE org_id = @org_id AND id = @id);

-- name: ExpiredUploads :many
-- The worker's expiry pass (across orgs, as the schema owner): a batch of
-- uploads past their expiry, oldest first.
SELECT org_id, id FROM knowledge_document_uploads
WHERE expires_at <= @now::timestamptz
ORDER BY expires_at
LIMIT @max_rows;

-- name: DeleteUploads :execrows
-- Uploads (their parts go with them: ON DELETE CASCADE) of one org.
DELETE FROM knowledge_document_uploads WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: PurgeUploadsByAgent :execrows
DELETE FROM knowledge_document_uploads WHERE org_id = @org_id AND agent_id = @agent_id;

-- name: PurgeUploadsAll :execrows
DELETE FROM knowledge_document_uploads WHERE org_id = @org_id;

-- name: CountUploads :one
-- A purge's dry run, and Stats: the uploads of the org (or of one agent,
-- when @agent_id is given), finished or not, those not finished, and the
-- bytes the parts of those hold.
SELECT count(*)::bigint AS uploads,
       count(*) FILTER (WHERE u.finished_at IS NULL)::bigint AS open_uploads,
       coalesce(sum(u.received_bytes) FILTER (WHERE u.finished_at IS NULL), 0)::bigint AS staged_bytes
FROM knowledge_document_uploads u
WHERE u.org_id = @org_id AND (sqlc.narg(agent_id)::uuid IS NULL OR u.agent_id = sqlc.narg(agent_id)::uuid);

-- name: LockUploadDocument :one
-- The document a finish stored, share-locked while the finish records its
-- answer: a forget or purge of it (which locks it FOR UPDATE) either
-- committed before (no row: the answer is not kept) or waits, and then
-- deletes the answer with the document (DeleteUploadReceipts).
SELECT id FROM knowledge WHERE org_id = @org_id AND id = @id FOR KEY SHARE;

-- name: DeleteUploadReceipts :execrows
-- Erasure of entries (forget, purge): a finished upload keeps the answer of
-- its finish (the document's title, its sections' heading paths) for a
-- second finish; it goes with the document it names.
DELETE FROM knowledge_document_uploads WHERE org_id = @org_id AND document_id = ANY(@ids::uuid[]);
