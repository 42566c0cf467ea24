-- A store_document retried with its clientToken after the document was
-- forgotten is refused, not stored again (issue 27; packages/knowledge
-- documentwrite.go, docs/knowledge.md "Documents"), as a store_knowledge
-- retry is (00016). forget_knowledge of a document keeps its tokens' rows
-- without the document's id or the hash of the arguments (nothing that
-- could test a guess of the forgotten text), marked forgotten_at; a purge
-- deletes the rows of the documents it erases, as before.
-- +goose Up
-- On a cluster, the table's DDL below runs on its shards in parallel, and
-- Citus then refuses knowledge_distribute()'s function commands in the same
-- transaction; one connection per worker lets both through (00030; a
-- placeholder setting on a single node, where it does nothing).
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
ALTER TABLE knowledge_document_tokens ALTER COLUMN document_id DROP NOT NULL;
ALTER TABLE knowledge_document_tokens ALTER COLUMN args_hash DROP NOT NULL;
ALTER TABLE knowledge_document_tokens ADD COLUMN forgotten_at timestamptz;
ALTER TABLE knowledge_document_tokens ADD CONSTRAINT knowledge_document_tokens_forgotten
    CHECK ((forgotten_at IS NULL) = (document_id IS NOT NULL AND args_hash IS NOT NULL));

-- On a cluster: nothing new to distribute (a column of a distributed
-- table); kept so every migration ends the same way.
SELECT knowledge_distribute();

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
DELETE FROM knowledge_document_tokens WHERE forgotten_at IS NOT NULL;
ALTER TABLE knowledge_document_tokens DROP CONSTRAINT knowledge_document_tokens_forgotten;
ALTER TABLE knowledge_document_tokens DROP COLUMN forgotten_at;
ALTER TABLE knowledge_document_tokens ALTER COLUMN args_hash SET NOT NULL;
ALTER TABLE knowledge_document_tokens ALTER COLUMN document_id SET NOT NULL;
