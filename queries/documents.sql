-- Documents (packages/knowledge/documents/documents.go): the owner of
-- knowledge_documents, knowledge_sections and knowledge_document_tokens.
-- Every statement is scoped by @org_id; every look-up is an equality on an
-- org-led key (never a scan of the org, whatever the statistics say).

-- name: LockDocumentSource :exec
-- Serialises the stores of one source in one org: the second of two
-- concurrent replacements reads what the first committed.
SELECT pg_advisory_xact_lock(hashtext('knowledge.document'), hashtext(@org_id::text || ':' || @source::text));

-- name: GetDocumentToken :one
-- The document a clientToken of an agent made, and the hash of its
-- arguments; or, forgotten_at set, that the document was forgotten (both
-- NULL then).
SELECT document_id, args_hash, forgotten_at
FROM knowledge_document_tokens
WHERE org_id = @org_id AND agent_id = @agent_id AND client_token = @client_token;

-- name: InsertDocumentToken :execrows
-- 0 rows: another call with the token committed first (the insert waited
-- for it); the caller rolls back and answers that call's document.
INSERT INTO knowledge_document_tokens (org_id, agent_id, client_token, document_id, args_hash)
VALUES (@org_id, @agent_id, @client_token, @document_id, @args_hash)
ON CONFLICT (org_id, agent_id, client_token) DO NOTHING;

-- name: LockedAt :one
-- The clock once a store holds its locks (InsertDocumentEntries).
SELECT clock_timestamp()::timestamptz AS at;

-- name: LiveDocumentBySource :one
-- The live document of a source. Read, not locked: CurrentSections locks
-- its entry with the rest, in one pass. Nothing erases it or moves its
-- chain meanwhile: every writer that does holds the org's supersession
-- lock, which the store took before.
SELECT d.id, d.content_hash, d.entry_hash, k.head_id
FROM knowledge_documents d
JOIN knowledge k ON k.org_id = d.org_id AND k.id = d.id
WHERE d.org_id = @org_id AND d.source = @source::text AND d.live;

-- name: CurrentSections :many
-- A live document's sections as they stand, in order. Every entry a
-- replacement writes is locked first, in one statement, in id order
-- (docs/operators.md, "Lock order"): the document's entry, its current
-- sections' entries, and the earlier versions of both, whose heads a
-- replacement moves (MoveSectionHeads). A link locks its two ends in id
-- order without the org's supersession lock; taken in two passes, or the
-- earlier versions only when their heads move, these deadlocked with it.
-- The ids are gathered first (the earlier versions by the head index),
-- then each entry is one probe of the primary key (a LATERAL under LIMIT
-- 1), in id order, locking its row as the loop reaches it: written as
-- `k.id IN (a union)`, a plan on tables never analyzed ran the union for
-- every entry of the org (45,000 buffers a replacement at 300 entries),
-- and as `k.id = ANY (ARRAY(...))` it read the org's entries through
-- another index and kept those (TestDocumentStoresReadOnlyTheirEntries
-- counts the rows a scan read).
WITH cur AS MATERIALIZED (
    SELECT s.id FROM knowledge_sections s
    WHERE s.org_id = @org_id AND s.document_id = @document_id AND s.ended_at IS NULL
), ids AS MATERIALIZED (
    SELECT DISTINCT x.id
    FROM (SELECT @document_id::uuid AS id
          UNION ALL SELECT cur.id FROM cur
          UNION ALL SELECT e.id FROM knowledge e
                    WHERE e.org_id = @org_id
                      AND e.head_id = ANY (ARRAY(SELECT @document_id::uuid UNION ALL SELECT cur.id FROM cur))) x
), locked AS MATERIALIZED (
    SELECT k.id, k.head_id, k.embedding_status, k.embedding_generation, k.chars
    FROM (SELECT ids.id FROM ids ORDER BY ids.id) i
    CROSS JOIN LATERAL (
        SELECT k.id, k.head_id, k.embedding_status, k.embedding_generation, char_length(k.body)::int AS chars
        FROM knowledge k
        WHERE k.org_id = @org_id AND k.id = i.id
        LIMIT 1
        FOR UPDATE OF k
    ) k
)
SELECT s.id, s.position, s.heading_path, s.content_hash,
       l.head_id, l.embedding_status, l.embedding_generation, l.chars
FROM knowledge_sections s
JOIN locked l ON l.id = s.id
WHERE s.org_id = @org_id AND s.document_id = @document_id AND s.ended_at IS NULL
ORDER BY s.position;

-- name: InsertDocumentEntries :many
-- A document's new entries in one statement: its own entry and its new or
-- changed sections, with the ids the caller chose, the same tags, kind,
-- source and metadata, by the storing agent. Their embedding status is
-- pending (the outbox). The rows are the arrays' joined to the agent's row
-- (the org's row of a co-located table): on a Citus cluster an INSERT ...
-- SELECT is routed whole to the org's worker only when it reads such a
-- table; from the arrays alone the coordinator would pull the rows and
-- send them on in a second step. (The target's alias qualifies RETURNING:
-- Citus 13.2 sends a routed INSERT ... SELECT's unqualified RETURNING to
-- the shard naming the distributed table, which the worker refuses.)
-- They are made no earlier than @not_before, the clock read once the
-- store holds its source's lock and the org's supersession lock
-- (LockedAt; NULL without a source): now() is the transaction's start,
-- which can precede what committed while it waited for them (another
-- store of the source ending sections, a supersession ending one, an
-- erasure of the live document leaving an older one's ended sections), and
-- a heading's versions follow each other in time.
INSERT INTO knowledge AS ins (org_id, id, title, body, tags, created_by_agent_id, source, kind, metadata, similar_keys, created_at)
SELECT a.org_id, v.id, v.title, v.body, @tags::text[], a.id,
       sqlc.narg(source)::text, @kind::text, @metadata::jsonb, v.keys::bigint[],
       greatest(now(), sqlc.narg(not_before)::timestamptz)
FROM agents a
CROSS JOIN (SELECT unnest(@ids::uuid[]) AS id, unnest(@titles::text[]) AS title, unnest(@bodies::text[]) AS body,
             unnest(@keys::text[]) AS keys) v
WHERE a.org_id = @org_id AND a.id = @agent_id
RETURNING ins.id, ins.embedding_generation, ins.created_at;

-- name: InsertDocument :exec
INSERT INTO knowledge_documents (org_id, id, source, format, sections, chars, content_hash, entry_hash)
VALUES (@org_id, @id, sqlc.narg(source)::text, @format, @sections, @chars, @content_hash, @entry_hash);

-- name: UpdateDocument :exec
-- A replacement that kept the document's entry (only sections changed).
UPDATE knowledge_documents
SET format = @format, sections = @sections, chars = @chars, content_hash = @content_hash
WHERE org_id = @org_id AND id = @id;

-- name: EndDocument :exec
-- A replaced document is no longer its source's live version.
UPDATE knowledge_documents SET live = false
WHERE org_id = @org_id AND id = @id;

-- name: PutSections :exec
-- A document's sections at their positions: new rows for new sections,
-- and the kept ones moved (to another position, or to the document's new
-- entry). Joined to the sections' entries, written before: routed whole
-- on a Citus cluster (InsertDocumentEntries).
-- Each entry is one probe of the primary key (a LATERAL under LIMIT 1),
-- never the org's entries joined to the ids, nor, with the ids as an
-- array (= ANY), the org's entries read through another index and kept
-- (on tables never analyzed the planner chose each:
-- TestDocumentStoresReadOnlyTheirEntries counts the rows a scan read).
INSERT INTO knowledge_sections (org_id, id, document_id, position, heading_path, content_hash)
SELECT k.org_id, v.id, @document_id, v.position, string_to_array(v.path, E'\x1f'), v.hash
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@positions::int[]) AS position, unnest(@paths::text[]) AS path,
             unnest(@hashes::bytea[]) AS hash) v
CROSS JOIN LATERAL (SELECT k.org_id FROM knowledge k WHERE k.org_id = @org_id AND k.id = v.id LIMIT 1) k
ON CONFLICT (org_id, id) DO UPDATE SET document_id = excluded.document_id, position = excluded.position;

-- name: EndSections :exec
-- Sections a replacement changed or retired: their rows stay, for the
-- history. A section ends no earlier than its entry was made (now() can
-- precede the replacement this one waited for on the source's lock).
UPDATE knowledge_sections s SET ended_at = greatest(now(), k.created_at), ended_how = @how::text
FROM knowledge k
WHERE s.org_id = @org_id AND s.id = ANY(@ids::uuid[]) AND s.ended_at IS NULL
  AND k.org_id = s.org_id AND k.id = s.id;

-- name: SupersedeSections :exec
-- Each changed section (a head, locked) superseded by its new version, no
-- earlier than it was made and than its earlier versions were superseded
-- (MarkSuperseded).
-- The ids again as a condition: read by the primary key (PutSections).
UPDATE knowledge k
SET superseded_by = v.new_id, head_id = v.new_id, updated_at = now(),
    superseded_at = greatest(now(), k.created_at,
                             (SELECT max(p.superseded_at) FROM knowledge p WHERE p.org_id = @org_id AND p.head_id = k.id))
FROM (SELECT unnest(@old_ids::uuid[]) AS old_id, unnest(@new_ids::uuid[]) AS new_id) v
WHERE k.org_id = @org_id AND k.id = v.old_id AND k.id = ANY(@old_ids::uuid[]) AND k.head_id IS NULL;

-- name: MoveSectionHeads :exec
-- The earlier versions of the changed sections point at their new heads.
-- The ids again as a condition: read by the head index (PutSections).
UPDATE knowledge k
SET head_id = v.new_id, updated_at = now()
FROM (SELECT unnest(@old_ids::uuid[]) AS old_id, unnest(@new_ids::uuid[]) AS new_id) v
WHERE k.org_id = @org_id AND k.head_id = v.old_id AND k.head_id = ANY(@old_ids::uuid[]);

-- name: InsertSectionSupersessions :exec
-- Joined to the old sections' entries: routed whole on a Citus cluster
-- (InsertDocumentEntries; from the arrays alone the coordinator would COPY
-- the rows into the shard, which row-level security refuses).
-- Each edge at the time SupersedeSections wrote.
-- A probe of the primary key each (PutSections).
INSERT INTO knowledge_supersessions (org_id, old_id, new_id, agent_id, created_at)
SELECT k.org_id, v.old_id, v.new_id, @agent_id, greatest(k.superseded_at, now())
FROM (SELECT unnest(@old_ids::uuid[]) AS old_id, unnest(@new_ids::uuid[]) AS new_id) v
CROSS JOIN LATERAL (SELECT k.org_id, k.superseded_at FROM knowledge k WHERE k.org_id = @org_id AND k.id = v.old_id LIMIT 1) k;

-- name: LiveDocumentOf :one
-- Whether an entry is a live document's own entry, and its source: such an
-- entry is not superseded by a call (Supersede refuses it; a document is
-- replaced by its source or forgotten). No row: not a live document.
SELECT source FROM knowledge_documents
WHERE org_id = @org_id AND id = @id AND live;

-- name: EndSupersededSection :exec
-- A current section superseded by a call of its own (supersede_knowledge,
-- correct_knowledge), not by its document's replacement: it leaves the
-- document as a changed section does, at its supersession, and its PART_OF
-- is closed; the heading has no current section until the next
-- replacement. Sections follow their document (docs/knowledge.md).
WITH ended AS (
    UPDATE knowledge_sections s
    SET ended_at = k.superseded_at, ended_how = 'changed'
    FROM knowledge k
    WHERE s.org_id = @org_id AND s.id = @id AND s.ended_at IS NULL
      AND k.org_id = s.org_id AND k.id = s.id AND k.superseded_at IS NOT NULL
    RETURNING s.id, s.document_id, s.ended_at
)
UPDATE knowledge_relations r
SET valid_to = greatest(e.ended_at, r.valid_from), closed_by_agent_id = sqlc.narg(agent_id)::uuid
FROM ended e
WHERE r.org_id = @org_id AND r.from_id = e.id AND r.to_id = e.document_id AND r.type = 'PART_OF' AND r.valid_to IS NULL;

-- name: RetireSections :exec
-- Removed sections expire now: no longer current (search and list leave
-- them out), still readable with asOf before now, and by id; no earlier
-- than they were made (EndSections).
UPDATE knowledge
SET expires_at = greatest(now(), created_at), updated_at = now()
WHERE org_id = @org_id AND id = ANY(@ids::uuid[]) AND (expires_at IS NULL OR expires_at > greatest(now(), created_at));

-- name: GetDocument :one
-- The mark of a document entry (get_knowledge).
SELECT source, format, sections, chars, live
FROM knowledge_documents
WHERE org_id = @org_id AND id = @id;

-- name: DocumentSections :many
-- A document's current sections in order, as get_knowledge lists them.
SELECT s.id, s.heading_path, k.title, char_length(k.body)::int AS chars, k.embedding_status
FROM knowledge_sections s
JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.id
WHERE s.org_id = @org_id AND s.document_id = @document_id AND s.ended_at IS NULL
ORDER BY s.position;

-- name: SectionsDocuments :many
-- The documents of the sections among @ids (a search's hits, a read).
SELECT s.id, s.document_id, s.heading_path, s.position, s.ended_how, k.title, d.source
FROM knowledge_sections s
JOIN knowledge_documents d ON d.org_id = s.org_id AND d.id = s.document_id
JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.document_id
WHERE s.org_id = @org_id AND s.id = ANY(@ids::uuid[]);

-- name: DocumentSectionIDs :many
-- Every section entry of the documents among @ids (ended ones too): a
-- forget of a document forgets them with it.
SELECT id FROM knowledge_sections
WHERE org_id = @org_id AND document_id = ANY(@ids::uuid[]);

-- Erasure (forget, purge) of entries: their document marks, section rows
-- and the tokens that named them, in this order (the foreign keys). A
-- section row of a document erased without it goes too: the section is a
-- plain entry from then on.

-- name: ForgetDocumentTokens :execrows
-- forget_knowledge of documents among @ids: their tokens stay, marked
-- forgotten, without the document's id or the arguments' hash (nothing
-- that could test a guess of the forgotten text): a retry of the store is
-- refused, not stored again. (A purge deletes them: DeleteDocumentTokens.)
UPDATE knowledge_document_tokens
SET document_id = NULL, args_hash = NULL, forgotten_at = now()
WHERE org_id = @org_id AND document_id = ANY(@ids::uuid[]);

-- name: DeleteDocumentTokens :execrows
DELETE FROM knowledge_document_tokens
WHERE org_id = @org_id AND document_id = ANY(@ids::uuid[]);

-- name: DeleteSectionRows :execrows
DELETE FROM knowledge_sections
WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);

-- name: DeleteDocumentsSectionRows :execrows
DELETE FROM knowledge_sections
WHERE org_id = @org_id AND document_id = ANY(@ids::uuid[]);

-- name: DeleteDocumentMarks :execrows
DELETE FROM knowledge_documents
WHERE org_id = @org_id AND id = ANY(@ids::uuid[]);
