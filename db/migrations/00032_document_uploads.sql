-- Documents uploaded in parts (packages/knowledge/uploads.go; docs/knowledge.md,
-- "Uploads in parts").
--
-- An agent starts an upload (the document's title, source, tags, kind,
-- metadata, format and its total size), appends its parts in order, and
-- finishes it: the parts are read back in order and stored as one document.
-- The parts are staged here, not in a server's memory or Redis, so an upload
-- goes on across an MCP server's restart or on another replica, and the
-- staged bytes are bounded per org like any other row.
--
-- An upload belongs to the agent that started it (every statement filters
-- by org and agent). It expires UploadTTL after its last append (or its
-- start); the worker deletes expired uploads with their parts. A finished
-- upload keeps its row (not its parts) until then, with the answer of its
-- finish, so that a second finish answers the same document.
-- +goose Up
CREATE TABLE knowledge_document_uploads (
    -- No key to orgs of its own: the agent's key below holds the org, and on
    -- Citus a key to a reference table would make this a local table that
    -- could then not refer to agents (a distributed table).
    org_id         uuid        NOT NULL,
    id             uuid        NOT NULL DEFAULT gen_random_uuid(),
    agent_id       uuid        NOT NULL,
    title          text        NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
    source         text        CHECK (char_length(source) BETWEEN 1 AND 1000),
    tags           text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(tags) <= 16),
    kind           text        CHECK (kind IN ('semantic', 'episodic', 'procedural', 'reference')),
    metadata       jsonb,
    format         text        NOT NULL DEFAULT 'markdown' CHECK (format IN ('markdown', 'text', 'html')),
    total_bytes    bigint      NOT NULL CHECK (total_bytes BETWEEN 1 AND 10485760),
    received_bytes bigint      NOT NULL DEFAULT 0,
    next_index     integer     NOT NULL DEFAULT 0 CHECK (next_index >= 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    -- Set by the finish that stored the document: its id and its answer
    -- (replayed to a second finish). The parts are deleted then.
    document_id    uuid,
    result         jsonb,
    finished_at    timestamptz,
    PRIMARY KEY (org_id, id),
    CONSTRAINT knowledge_document_uploads_agent_fkey FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id),
    CONSTRAINT knowledge_document_uploads_received CHECK (received_bytes BETWEEN 0 AND total_bytes),
    CONSTRAINT knowledge_document_uploads_finished CHECK ((finished_at IS NULL) = (result IS NULL))
);
-- The worker's expiry pass, across orgs, oldest first.
CREATE INDEX knowledge_document_uploads_expires_idx ON knowledge_document_uploads (expires_at);

CREATE TABLE knowledge_document_upload_parts (
    org_id    uuid    NOT NULL,
    upload_id uuid    NOT NULL,
    index     integer NOT NULL CHECK (index >= 0),
    content   text    NOT NULL,
    -- bytes of content (UTF-8) and its SHA-256: a repeated append of the
    -- same index is compared without reading the stored part back.
    bytes     integer NOT NULL CHECK (bytes >= 1),
    digest    bytea   NOT NULL,
    PRIMARY KEY (org_id, upload_id, index),
    CONSTRAINT knowledge_document_upload_parts_upload_fkey FOREIGN KEY (org_id, upload_id)
        REFERENCES knowledge_document_uploads (org_id, id) ON DELETE CASCADE
);

ALTER TABLE knowledge_document_uploads ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_document_uploads_org ON knowledge_document_uploads USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_document_upload_parts ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_document_upload_parts_org ON knowledge_document_upload_parts USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());

-- On a cluster: distributed by org, co-located with knowledge (nothing to
-- do on a single node).
SELECT knowledge_distribute();

-- +goose Down
DROP TABLE knowledge_document_upload_parts;
DROP TABLE knowledge_document_uploads;
