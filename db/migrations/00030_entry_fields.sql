-- Provenance, kind and metadata on every entry (docs/knowledge.md,
-- "Entry fields: source, kind, metadata").
--
-- The old column source ('agent' | 'operator' | 'import': who made the
-- entry) becomes origin, so that "source" means one thing: where the
-- knowledge came from (a URL, a path, a ticket id), given by the agent.
--
--   source    NULL or 1..1000 characters; collated "C" so that its index
--             serves an exact match and a prefix (a byte range: the
--             caller's prefix up to the prefix followed by the highest
--             code point), whatever the database's collation.
--   kind      'semantic' (the default), 'episodic', 'procedural',
--             'reference'.
--   metadata  a flat JSON object (the domain checks keys, value types and
--             size; the CHECK here keeps the shape and bounds the size).
--
-- Indexes, so that a filter never reads the org (plans checked with
-- EXPLAIN on never-analyzed tables, docs/knowledge.md):
--   (org_id, kind, created_at, id)          list_knowledge by kind, newest first
--   (org_id, source, created_at, id)        list by source (exact: in order;
--                                           prefix: a range), get by source
--   gin (metadata jsonb_path_ops)           metadata equality (@>)
-- A search reads its candidates by the lists' own indexes and checks each
-- candidate's fields by its primary key, as it does tags.
-- +goose Up
ALTER TABLE knowledge RENAME COLUMN source TO origin;
ALTER TABLE knowledge RENAME CONSTRAINT knowledge_source_check TO knowledge_origin_check;

ALTER TABLE knowledge
    ADD COLUMN source text COLLATE "C"
        CONSTRAINT knowledge_source_check CHECK (char_length(source) BETWEEN 1 AND 1000),
    ADD COLUMN kind text NOT NULL DEFAULT 'semantic'
        CONSTRAINT knowledge_kind_check CHECK (kind IN ('semantic', 'episodic', 'procedural', 'reference')),
    ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'
        CONSTRAINT knowledge_metadata_check CHECK (jsonb_typeof(metadata) = 'object' AND pg_column_size(metadata) <= 16384);

CREATE INDEX knowledge_org_kind_idx ON knowledge (org_id, kind, created_at, id);
CREATE INDEX knowledge_org_source_idx ON knowledge (org_id, source, created_at, id) WHERE source IS NOT NULL;
CREATE INDEX knowledge_metadata_idx ON knowledge USING gin (metadata jsonb_path_ops);

-- On a cluster: nothing new to distribute (columns of a distributed
-- table); kept so every migration ends the same way.
SELECT knowledge_distribute();

-- +goose Down
DROP INDEX knowledge_metadata_idx;
DROP INDEX knowledge_org_source_idx;
DROP INDEX knowledge_org_kind_idx;
ALTER TABLE knowledge DROP COLUMN metadata, DROP COLUMN kind, DROP COLUMN source;
ALTER TABLE knowledge RENAME CONSTRAINT knowledge_origin_check TO knowledge_source_check;
ALTER TABLE knowledge RENAME COLUMN origin TO source;
