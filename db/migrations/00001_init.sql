-- The knowledge module's schema.
--
-- Tenancy is structural: org_id leads every primary, unique and foreign key of
-- every tenant table, so a row can never reference a row of another org, every
-- btree index is per org, and the schema can be sharded by org later. The only
-- exceptions are indexes whose access methods cannot lead with a scalar column
-- (HNSW, GIN); queries still filter those by org.

-- +goose Up
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- +goose StatementBegin
DO $$
BEGIN
    IF string_to_array((SELECT extversion FROM pg_extension WHERE extname = 'vector'), '.')::int[] < '{0,8,0}' THEN
        RAISE EXCEPTION 'pgvector >= 0.8.0 is required (iterative index scans), found %',
            (SELECT extversion FROM pg_extension WHERE extname = 'vector');
    END IF;
END
$$;
-- +goose StatementEnd

CREATE TABLE orgs (
    id         uuid        NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    org_id     uuid        NOT NULL REFERENCES orgs (id),
    id         uuid        NOT NULL DEFAULT gen_random_uuid(),
    name       text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, id),
    UNIQUE (org_id, name)
);

-- Bearer tokens. Only a SHA-256 of the secret part is kept. The token's text
-- names its org and id, so verification is a primary-key look-up followed by a
-- constant-time hash comparison (no global unique index on the hash needed).
CREATE TABLE agent_tokens (
    org_id       uuid        NOT NULL,
    id           uuid        NOT NULL DEFAULT gen_random_uuid(),
    agent_id     uuid        NOT NULL,
    secret_hash  bytea       NOT NULL CHECK (octet_length(secret_hash) = 32),
    scopes       text[]      NOT NULL CHECK (cardinality(scopes) >= 1
                                 AND scopes <@ ARRAY['knowledge:read', 'knowledge:write']::text[]),
    expires_at   timestamptz,
    revoked_at   timestamptz,
    last_used_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id)
);
-- Operators revoke by token id alone (ids are random UUIDs).
CREATE INDEX agent_tokens_id_idx ON agent_tokens (id);

-- Per-org quota limits and usage. A NULL limit means unlimited. Usage is
-- counted by a conditional upsert in the same transaction as the insert it
-- pays for, so it never exceeds the limit and never drifts.
CREATE TABLE org_quotas (
    org_id      uuid        NOT NULL REFERENCES orgs (id),
    resource    text        NOT NULL CHECK (resource IN ('knowledge_stored')),
    limit_value bigint      CHECK (limit_value >= 0),
    used        bigint      NOT NULL DEFAULT 0 CHECK (used >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, resource)
);

-- The orchestrator owns tasks; this is the minimal copy task links need.
CREATE TABLE tasks (
    org_id     uuid        NOT NULL REFERENCES orgs (id),
    id         uuid        NOT NULL DEFAULT gen_random_uuid(),
    title      text        NOT NULL CHECK (char_length(title) BETWEEN 1 AND 500),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, id)
);

CREATE TABLE knowledge (
    org_id              uuid        NOT NULL REFERENCES orgs (id),
    id                  uuid        NOT NULL DEFAULT gen_random_uuid(),
    title               text        NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
    body                text        NOT NULL CHECK (char_length(body) BETWEEN 1 AND 32000),
    tags                text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(tags) <= 16),
    confidence          smallint    NOT NULL DEFAULT 80 CHECK (confidence BETWEEN 0 AND 100),
    source              text        NOT NULL DEFAULT 'agent' CHECK (source IN ('agent', 'operator', 'import')),
    created_by_agent_id uuid,
    expires_at          timestamptz,
    -- Idempotence key of store_knowledge: the durable guard behind the Redis key.
    client_token        uuid,

    -- Supersession. superseded_by is the direct successor; head_id caches the
    -- current head of the chain (NULL while this entry is itself a head), so
    -- search filters and answers with one look and no chain walk.
    superseded_by       uuid,
    head_id             uuid,
    superseded_at       timestamptz,

    -- Embedding, made out of band. status 'pending' is the outbox of the
    -- embeddings queue; generation grows on every re-embed request so a late
    -- job of an older generation can never overwrite newer data.
    embedding              vector(768),
    embedding_status       text        NOT NULL DEFAULT 'pending'
                               CHECK (embedding_status IN ('pending', 'ready', 'failed')),
    embedding_model        text,
    embedding_error        text,
    embedding_generation   integer     NOT NULL DEFAULT 1,
    embedding_requested_at timestamptz NOT NULL DEFAULT now(),
    embedded_at            timestamptz,

    search_tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', title), 'A') || setweight(to_tsvector('simple', body), 'B')
    ) STORED,

    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),

    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, created_by_agent_id) REFERENCES agents (org_id, id),
    FOREIGN KEY (org_id, superseded_by) REFERENCES knowledge (org_id, id),
    FOREIGN KEY (org_id, head_id) REFERENCES knowledge (org_id, id),
    -- NULL client tokens are distinct, so entries without a token never clash.
    UNIQUE (org_id, created_by_agent_id, client_token),
    CHECK ((superseded_by IS NULL) = (head_id IS NULL)),
    CHECK ((superseded_by IS NULL) = (superseded_at IS NULL)),
    CHECK (superseded_by IS DISTINCT FROM id),
    CHECK (head_id IS DISTINCT FROM id),
    CHECK ((embedding_status = 'ready') = (embedding IS NOT NULL)),
    CHECK (embedding_status <> 'ready' OR (embedding_model IS NOT NULL AND embedded_at IS NOT NULL))
);

CREATE INDEX knowledge_embedding_hnsw_idx ON knowledge USING hnsw (embedding vector_cosine_ops);
CREATE INDEX knowledge_search_tsv_idx ON knowledge USING gin (search_tsv);
CREATE INDEX knowledge_title_trgm_idx ON knowledge USING gin (title gin_trgm_ops);
CREATE INDEX knowledge_tags_idx ON knowledge USING gin (tags);
-- Every entry of a chain, by its cached head: supersede moves them in one UPDATE.
CREATE INDEX knowledge_head_idx ON knowledge (org_id, head_id) WHERE head_id IS NOT NULL;
-- The embeddings outbox: what the reconciler scans for.
CREATE INDEX knowledge_pending_idx ON knowledge (embedding_requested_at) WHERE embedding_status = 'pending';
-- Newest first by org, id breaking ties: also the order in which search's
-- lexical lists take their bounded pool of matches (queries/search.sql).
CREATE INDEX knowledge_org_created_idx ON knowledge (org_id, created_at, id);

-- History of direct supersession edges. An entry can only be superseded while
-- it is a head, so each old entry appears at most once.
CREATE TABLE knowledge_supersessions (
    org_id     uuid        NOT NULL,
    old_id     uuid        NOT NULL,
    new_id     uuid        NOT NULL,
    agent_id   uuid        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, old_id),
    FOREIGN KEY (org_id, old_id) REFERENCES knowledge (org_id, id),
    FOREIGN KEY (org_id, new_id) REFERENCES knowledge (org_id, id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id),
    CHECK (old_id <> new_id)
);
CREATE INDEX knowledge_supersessions_new_idx ON knowledge_supersessions (org_id, new_id);

CREATE TABLE task_knowledge (
    org_id       uuid        NOT NULL,
    task_id      uuid        NOT NULL,
    knowledge_id uuid        NOT NULL,
    kind         text        NOT NULL CHECK (kind IN ('references', 'produced')),
    created_by_agent_id uuid,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, task_id, knowledge_id, kind),
    FOREIGN KEY (org_id, task_id) REFERENCES tasks (org_id, id),
    FOREIGN KEY (org_id, knowledge_id) REFERENCES knowledge (org_id, id),
    FOREIGN KEY (org_id, created_by_agent_id) REFERENCES agents (org_id, id)
);
CREATE INDEX task_knowledge_knowledge_idx ON task_knowledge (org_id, knowledge_id);

-- +goose Down
DROP TABLE task_knowledge;
DROP TABLE knowledge_supersessions;
DROP TABLE knowledge;
DROP TABLE tasks;
DROP TABLE org_quotas;
DROP TABLE agent_tokens;
DROP TABLE agents;
DROP TABLE orgs;
