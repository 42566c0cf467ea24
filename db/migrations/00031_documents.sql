-- Documents (issue 27; packages/knowledge/documents.go, docs/knowledge.md
-- "Documents").
--
-- A document is an entry (its title, a generated table of contents as its
-- body) plus one entry per section, each PART_OF the document (a relation,
-- knowledge_relations). These tables say what the relations alone cannot:
--
--   knowledge_documents  marks an entry as a document: its source, how it
--                        was split, a hash of everything it was stored from
--                        (a store of the same arguments changes nothing)
--                        and of the document entry alone (kept when only
--                        sections changed),
--                        and whether it is its source's live version (the
--                        partial unique key: at most one live document per
--                        source and org, so two concurrent replacements can
--                        never both insert one).
--   knowledge_sections   a section entry's document, its position, its
--                        heading path and its content hash (what replacement
--                        compares: an unchanged section keeps its entry, id
--                        and vectors). ended_at is set when a replacement
--                        changed (superseded) or removed (retired) it; the
--                        row stays for the history (asOf reads).
--   knowledge_document_tokens
--                        the clientToken of store_document: which document
--                        a token made, and the hash of the arguments, so a
--                        retry is answered, not stored again.
--
-- Rows go with their entries: forget and purge delete them
-- (queries/purge.sql, PurgeDeleteDocuments).
-- +goose Up
CREATE TABLE knowledge_documents (
    org_id       uuid        NOT NULL,
    id           uuid        NOT NULL,
    source       text        CONSTRAINT knowledge_documents_source_check CHECK (char_length(source) BETWEEN 1 AND 1000),
    format       text        NOT NULL CONSTRAINT knowledge_documents_format_check CHECK (format IN ('markdown', 'text', 'html')),
    sections     integer     NOT NULL CHECK (sections >= 0),
    chars        bigint      NOT NULL CHECK (chars >= 0),
    content_hash bytea       NOT NULL CHECK (octet_length(content_hash) = 32),
    entry_hash   bytea       NOT NULL CHECK (octet_length(entry_hash) = 32),
    live         boolean     NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, id),
    CONSTRAINT knowledge_documents_entry_fkey FOREIGN KEY (org_id, id) REFERENCES knowledge (org_id, id)
);
-- The live document of a source: replacement's look-up and its guard.
CREATE UNIQUE INDEX knowledge_documents_live_source_key ON knowledge_documents (org_id, source)
    WHERE live AND source IS NOT NULL;

CREATE TABLE knowledge_sections (
    org_id       uuid        NOT NULL,
    id           uuid        NOT NULL,
    document_id  uuid        NOT NULL,
    position     integer     NOT NULL CHECK (position >= 0),
    heading_path text[]      NOT NULL DEFAULT '{}',
    content_hash bytea       NOT NULL CHECK (octet_length(content_hash) = 32),
    ended_at     timestamptz,
    ended_how    text        CONSTRAINT knowledge_sections_ended_how_check CHECK (ended_how IN ('changed', 'retired')),
    PRIMARY KEY (org_id, id),
    CONSTRAINT knowledge_sections_entry_fkey FOREIGN KEY (org_id, id) REFERENCES knowledge (org_id, id),
    CONSTRAINT knowledge_sections_document_fkey FOREIGN KEY (org_id, document_id) REFERENCES knowledge_documents (org_id, id),
    CONSTRAINT knowledge_sections_ended CHECK ((ended_at IS NULL) = (ended_how IS NULL))
);
-- A document's sections in order (get_knowledge, replacement) and the
-- documentId filter of list_knowledge and search_knowledge: an equality on
-- (org_id, document_id), whatever the statistics say.
CREATE INDEX knowledge_sections_document_idx ON knowledge_sections (org_id, document_id, position);

CREATE TABLE knowledge_document_tokens (
    org_id       uuid        NOT NULL,
    agent_id     uuid        NOT NULL,
    client_token uuid        NOT NULL,
    document_id  uuid        NOT NULL,
    args_hash    bytea       NOT NULL CHECK (octet_length(args_hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, agent_id, client_token),
    CONSTRAINT knowledge_document_tokens_agent_fkey FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id),
    CONSTRAINT knowledge_document_tokens_document_fkey FOREIGN KEY (org_id, document_id) REFERENCES knowledge_documents (org_id, id)
);
CREATE INDEX knowledge_document_tokens_document_idx ON knowledge_document_tokens (org_id, document_id);

ALTER TABLE knowledge_documents ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_documents_org ON knowledge_documents USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_sections ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_sections_org ON knowledge_sections USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_document_tokens ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_document_tokens_org ON knowledge_document_tokens USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());

-- On a cluster: distributed by org_id, co-located with knowledge (00027).
SELECT knowledge_distribute();

-- +goose Down
DROP TABLE knowledge_document_tokens;
DROP TABLE knowledge_sections;
DROP TABLE knowledge_documents;
