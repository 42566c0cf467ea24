-- Sections follow their document (issue 39; docs/knowledge.md "Documents",
-- packages/knowledge: supersede, the chain repair of forget and purge).
--
-- A section is current while its row is (ended_at NULL) and never again
-- once its row ended: a section superseded by a call of its own leaves its
-- document as a changed one does, and a section (or a replaced document
-- entry) whose successor is erased is a head again but expired, not
-- current knowledge. Before this rule an erasure's chain repair made such
-- entries current again for good, and a superseded section stayed in its
-- document's list. This migration ends and expires what the old rule left.
-- +goose Up
-- On a cluster, the updates below run on the shards in parallel, and Citus
-- then refuses knowledge_distribute()'s function commands in the same
-- transaction; one connection per worker lets both through (00030; a
-- placeholder setting on a single node, where it does nothing).
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
-- Current sections superseded by a call of their own: their PART_OF
-- closes and their rows end at the supersession. (No now() inside a CASE
-- or coalesce anywhere here: a Citus coordinator refuses it in an UPDATE.)
UPDATE knowledge_relations r
SET valid_to = greatest(k.superseded_at, r.valid_from)
FROM knowledge_sections s
JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.id
WHERE r.org_id = s.org_id AND r.from_id = s.id AND r.to_id = s.document_id
  AND r.type = 'PART_OF' AND r.valid_to IS NULL
  AND s.ended_at IS NULL AND k.head_id IS NOT NULL AND k.superseded_at IS NOT NULL;
UPDATE knowledge_sections s
SET ended_at = k.superseded_at, ended_how = 'changed'
FROM knowledge k
WHERE k.org_id = s.org_id AND k.id = s.id
  AND s.ended_at IS NULL AND k.head_id IS NOT NULL AND k.superseded_at IS NOT NULL;

-- Revived sections: heads again whose rows ended expire at their end.
UPDATE knowledge k
SET expires_at = s.ended_at, updated_at = now()
FROM knowledge_sections s
WHERE s.org_id = k.org_id AND s.id = k.id AND s.ended_at IS NOT NULL
  AND k.head_id IS NULL AND (k.expires_at IS NULL OR k.expires_at > s.ended_at);

-- Revived document entries (no longer their source's live version, heads
-- again): expire now; when they stopped being current was not kept.
UPDATE knowledge k
SET expires_at = now(), updated_at = now()
FROM knowledge_documents d
WHERE d.org_id = k.org_id AND d.id = k.id AND NOT d.live
  AND k.head_id IS NULL AND (k.expires_at IS NULL OR k.expires_at > now());

-- On a cluster: nothing new to distribute; kept so every migration ends
-- the same way.
SELECT knowledge_distribute();

-- +goose Down
-- What the Up ended and expired was wrong before it; nothing to undo.
SELECT 1;
