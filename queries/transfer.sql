-- Export and import of an org's knowledge (packages/knowledge/transfer.go).
-- Every statement is scoped by @org_id; reads are keyset paged, so an
-- export holds one page in memory whatever the size of the org.

-- name: ExportEntries :many
-- Entries oldest first (knowledge_org_created_idx), without vectors.
SELECT id, title, body, tags, confidence, origin, source, kind, metadata, created_by_agent_id, expires_at,
       superseded_by, head_id, superseded_at, created_at, updated_at
FROM knowledge
WHERE org_id = @org_id AND (created_at, id) > (@after_at::timestamptz, @after_id::uuid)
ORDER BY created_at, id
LIMIT @max_rows;

-- name: ExportEntryVectors :many
-- The vectors of the given entries that have one (export --vectors).
SELECT id, embedding_model, embedded_at, embedding FROM knowledge
WHERE org_id = @org_id AND id = ANY(@ids::uuid[]) AND embedding_status = 'ready';

-- name: ExportSupersessions :many
SELECT old_id, new_id, agent_id, created_at FROM knowledge_supersessions
WHERE org_id = @org_id AND old_id > @after
ORDER BY old_id
LIMIT @max_rows;

-- name: ExportTaskLinks :many
SELECT task_id, knowledge_id, kind, created_by_agent_id, created_at FROM task_knowledge
WHERE org_id = @org_id AND (task_id, knowledge_id, kind) > (@after_task::uuid, @after_entry::uuid, @after_kind::text)
ORDER BY task_id, knowledge_id, kind
LIMIT @max_rows;

-- name: ExistingEntries :many
SELECT id FROM knowledge WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: ImportChains :execrows
-- The file's supersession columns, for entries that are heads here (an
-- entry superseded already keeps its chain: import never rewrites history
-- that is already in the org). ImportCheckChains verifies the result.
UPDATE knowledge k
SET superseded_by = c.superseded_by, head_id = c.head_id, superseded_at = c.superseded_at
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@superseded_by::uuid[]) AS superseded_by,
             unnest(@head_ids::uuid[]) AS head_id, unnest(@superseded_at::timestamptz[]) AS superseded_at) c
WHERE k.org_id = @org_id AND k.id = c.id AND k.superseded_by IS NULL;

-- name: ImportSupersessions :many
-- Returns what it wrote (an :execrows count would not do: on a Citus
-- cluster this INSERT ... SELECT from arrays goes through the coordinator,
-- which reports the rows it sent, those ON CONFLICT skipped included).
INSERT INTO knowledge_supersessions AS ins (org_id, old_id, new_id, agent_id, created_at)
SELECT @org_id, unnest(@old_ids::uuid[]), unnest(@new_ids::uuid[]), unnest(@agent_ids::uuid[]), unnest(@created_ats::timestamptz[])
ON CONFLICT DO NOTHING
RETURNING ins.old_id;

-- name: ImportTaskLinks :many
-- Returns what it wrote (ImportSupersessions).
INSERT INTO task_knowledge AS ins (org_id, task_id, knowledge_id, kind, created_by_agent_id, created_at)
SELECT @org_id, unnest(@task_ids::uuid[]), unnest(@knowledge_ids::uuid[]), unnest(@kinds::text[]),
       nullif(unnest(@agent_ids::uuid[]), '00000000-0000-0000-0000-000000000000'::uuid), unnest(@created_ats::timestamptz[])
ON CONFLICT DO NOTHING
RETURNING ins.knowledge_id;

-- name: ImportCheckChains :one
-- Chains after an import: every superseded entry's cached head must be its
-- successor's head (or the successor, when that is a head), and every head
-- named must be a head. Together these rule out loops (a loop has no head)
-- and stale caches; an import that breaks them is rolled back.
SELECT count(*)::bigint
FROM knowledge k
JOIN knowledge s ON s.org_id = k.org_id AND s.id = k.superseded_by
WHERE k.org_id = @org_id AND k.head_id IS DISTINCT FROM coalesce(s.head_id, s.id);

-- Documents (knowledge_documents, knowledge_sections; documents.go owns
-- their writes): a document's mark and its sections' rows travel with the
-- entries; their PART_OF relations are relations like any other.

-- name: ExportDocuments :many
-- Every document mark of the org, live or replaced, by id.
SELECT id, source, format, sections, chars, content_hash, entry_hash, live, created_at
FROM knowledge_documents
WHERE org_id = @org_id AND id > @after
ORDER BY id
LIMIT @max_rows;

-- name: ExportSections :many
-- Every section row of the org, current or ended (the history), by id.
SELECT id, document_id, position, heading_path, content_hash, ended_at, ended_how
FROM knowledge_sections
WHERE org_id = @org_id AND id > @after
ORDER BY id
LIMIT @max_rows;

-- name: ImportLiveSourceClash :one
-- A live document of the org, under an id other than the file's, with the
-- source of one of the file's live documents: the org may hold one live
-- document per source (knowledge_documents_live_source_key).
SELECT id, source::text AS source
FROM knowledge_documents
WHERE org_id = @org_id AND live AND source = ANY(@sources::text[]) AND NOT (id = ANY(@ids::uuid[]))
ORDER BY source
LIMIT 1;

-- name: ImportDocuments :many
-- Returns what it wrote (ImportSupersessions).
INSERT INTO knowledge_documents AS ins (org_id, id, source, format, sections, chars, content_hash, entry_hash, live, created_at)
SELECT @org_id, v.id, nullif(v.source, ''), v.format, v.sections, v.chars, v.content_hash, v.entry_hash, v.live, v.created_at
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@sources::text[]) AS source, unnest(@formats::text[]) AS format,
             unnest(@sections::int[]) AS sections, unnest(@chars::bigint[]) AS chars,
             unnest(@content_hashes::bytea[]) AS content_hash, unnest(@entry_hashes::bytea[]) AS entry_hash,
             unnest(@lives::bool[]) AS live, unnest(@created_ats::timestamptz[]) AS created_at) v
ON CONFLICT (org_id, id) DO NOTHING
RETURNING ins.id;

-- name: ImportSections :many
-- A heading path travels as its parts joined by U+001F, which no part
-- holds (docsplit makes control characters spaces; the import checks).
-- Returns what it wrote (ImportSupersessions).
INSERT INTO knowledge_sections AS ins (org_id, id, document_id, position, heading_path, content_hash, ended_at, ended_how)
SELECT @org_id, v.id, v.document_id, v.position, string_to_array(v.path, E'\x1f'), v.content_hash,
       nullif(v.ended_at, '')::timestamptz, nullif(v.ended_how, '')
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@document_ids::uuid[]) AS document_id, unnest(@positions::int[]) AS position,
             unnest(@paths::text[]) AS path, unnest(@content_hashes::bytea[]) AS content_hash,
             unnest(@ended_ats::text[]) AS ended_at, unnest(@ended_hows::text[]) AS ended_how) v
ON CONFLICT (org_id, id) DO NOTHING
RETURNING ins.id;
