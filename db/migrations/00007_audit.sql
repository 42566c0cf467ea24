-- Issue 13: the audit trail of MCP calls, and org statistics that do not
-- read the org's rows.
--
-- 1. audit_events (packages/tenancy/audit.go; written by the MCP server,
--    read by `ctl audit`, pruned by the worker). One row per tool call or
--    resource read: who (org, agent, token), what (tool or resource kind,
--    the entry ids it touched), how it ended (outcome code, duration). Never
--    a secret, a title, a body or a query: a query is kept as its length
--    and a keyed hash (HMAC-SHA-256 with audit_keys' key, first 16 bytes),
--    so repeated queries can be correlated without being readable, and the
--    hash cannot be reversed by hashing guesses without the key.
--    Append-only: an UPDATE is refused by a trigger; rows leave only by the
--    retention (DELETE of rows older than AUDIT_RETENTION, in batches).
--    No foreign keys: a record outlives what it names (a purged entry, a
--    revoked token), and a check per inserted row would slow the writer.
-- +goose Up
CREATE TABLE audit_events (
    org_id       uuid        NOT NULL,
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    at           timestamptz NOT NULL,
    agent_id     uuid,
    token_id     uuid,
    kind         text        NOT NULL CONSTRAINT audit_events_kind_check CHECK (kind IN ('tool', 'resource')),
    name         text        NOT NULL CONSTRAINT audit_events_name_check CHECK (char_length(name) BETWEEN 1 AND 64),
    entry_ids    uuid[]      NOT NULL DEFAULT '{}',
    outcome      text        NOT NULL CONSTRAINT audit_events_outcome_check CHECK (char_length(outcome) BETWEEN 1 AND 64),
    duration_us  bigint      NOT NULL CONSTRAINT audit_events_duration_check CHECK (duration_us >= 0),
    query_length integer,
    query_hash   bytea,
    -- org_id leads, as in every key; time next: ctl audit reads an org's
    -- newest records first.
    PRIMARY KEY (org_id, at, id)
);
-- ctl audit --agent: the agent's records in time order.
CREATE INDEX audit_events_agent_idx ON audit_events (org_id, agent_id, at);
-- ctl audit --entry: who touched an entry (GIN over every org, filtered by
-- org as every other global index is; fastupdate keeps inserts cheap).
CREATE INDEX audit_events_entry_idx ON audit_events USING gin (entry_ids);
-- Retention: the oldest rows of every org, in batches.
CREATE INDEX audit_events_at_idx ON audit_events (at);

-- +goose StatementBegin
CREATE FUNCTION audit_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: records are never updated';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

-- The key of the query hash: the same for every MCP replica and across
-- restarts, hence in the database (as knowledge_secrets' cursor key),
-- made here from the server's random generator (244 random bits).
CREATE TABLE audit_keys (
    name  text  PRIMARY KEY,
    value bytea NOT NULL CHECK (octet_length(value) >= 16)
);
INSERT INTO audit_keys (name, value)
VALUES ('query_hash', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- 2. Org statistics (packages/knowledge/stats.go) at any size. Counting an
--    org's rows took 1.9 s at 100k entries. Instead every write to
--    knowledge records what it changed in the counts, in its own
--    transaction: a statement-level trigger (one per statement, however
--    many rows: a COPY of an import, a purge batch, the worker's batch of
--    embeddings) appends the net changes to knowledge_count_deltas, and the
--    worker's upkeep folds them into knowledge_counts. A reader sums both
--    in one snapshot, so the counts are exact and transactional, and cost
--    the number of distinct keys (states, statuses, models, authors, tags),
--    not the number of entries. Appending rather than updating one counter
--    row keeps concurrent writers of an org from waiting on each other
--    (and from deadlocking on two counters taken in different orders).
--    Keys: kind 'state' (head | superseded), 'status' (pending | ready |
--    failed), 'model' (ready entries by model), 'agent' (author id, '' for
--    none), 'tag' (each tag of the entry), 'expiry' (heads with an expiry,
--    by its hour).
CREATE TABLE knowledge_counts (
    org_id uuid   NOT NULL,
    kind   text   NOT NULL,
    key    text   NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (org_id, kind, key)
);
-- The deltas are a queue (like knowledge_index_queue): keyed by id, the
-- order the fold takes them in; readers reach an org's through the index.
CREATE TABLE knowledge_count_deltas (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id uuid   NOT NULL,
    kind   text   NOT NULL,
    key    text   NOT NULL,
    delta  bigint NOT NULL
);
CREATE INDEX knowledge_count_deltas_org_idx ON knowledge_count_deltas (org_id);
-- The fold deletes the counters that reached zero: their keys are tags
-- (content), which must not outlive the entries (purge, forget).
CREATE INDEX knowledge_counts_zero_idx ON knowledge_counts (org_id) WHERE n = 0;

CREATE FUNCTION knowledge_count_keys(is_head boolean, status text, model text, agent uuid, tags text[], expires timestamptz)
RETURNS TABLE (kind text, key text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'state', CASE WHEN is_head THEN 'head' ELSE 'superseded' END
    UNION ALL SELECT 'status', status
    UNION ALL SELECT 'model', coalesce(model, '') WHERE status = 'ready'
    UNION ALL SELECT 'agent', coalesce(agent::text, '')
    UNION ALL SELECT 'tag', t FROM unnest(tags) AS t
    -- Heads with an expiry, by the hour it falls in (hours since the
    -- epoch): "expired" is the hours past plus the current hour's heads
    -- already past their expiry (read through knowledge_expiry_idx).
    UNION ALL SELECT 'expiry', floor(extract(epoch FROM expires) / 3600)::bigint::text WHERE is_head AND expires IS NOT NULL
$$;

-- +goose StatementBegin
CREATE FUNCTION knowledge_count_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT r.org_id, c.kind, c.key, count(*)
        FROM new_rows r,
             knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at) c
        GROUP BY 1, 2, 3
        ORDER BY 1, 2, 3;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT r.org_id, c.kind, c.key, -count(*)
        FROM old_rows r,
             knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at) c
        GROUP BY 1, 2, 3
        ORDER BY 1, 2, 3;
    ELSE
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT org_id, kind, key, sum(d)
        FROM (
            SELECT r.org_id, c.kind, c.key, 1 AS d
            FROM new_rows r,
                 knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at) c
            UNION ALL
            SELECT r.org_id, c.kind, c.key, -1
            FROM old_rows r,
                 knowledge_count_keys(r.head_id IS NULL, r.embedding_status, r.embedding_model, r.created_by_agent_id, r.tags, r.expires_at) c
        ) x
        GROUP BY 1, 2, 3
        HAVING sum(d) <> 0
        ORDER BY 1, 2, 3;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER knowledge_count_inserts AFTER INSERT ON knowledge
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_count_changes();
CREATE TRIGGER knowledge_count_updates AFTER UPDATE ON knowledge
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_count_changes();
CREATE TRIGGER knowledge_count_deletes AFTER DELETE ON knowledge
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_count_changes();

-- The entries that exist already.
INSERT INTO knowledge_counts (org_id, kind, key, n)
SELECT k.org_id, c.kind, c.key, count(*)
FROM knowledge k,
     knowledge_count_keys(k.head_id IS NULL, k.embedding_status, k.embedding_model, k.created_by_agent_id, k.tags, k.expires_at) c
GROUP BY 1, 2, 3;

-- What counters cannot hold because it changes with the clock alone: the
-- heads of the current hour already past their expiry (counted through
-- this partial index, which holds only heads with an expiry), and the
-- oldest pending entry of an org (the existing pending index does not lead
-- with the org).
CREATE INDEX knowledge_expiry_idx ON knowledge (org_id, expires_at) WHERE head_id IS NULL AND expires_at IS NOT NULL;
CREATE INDEX knowledge_org_pending_idx ON knowledge (org_id, embedding_requested_at) WHERE embedding_status = 'pending';

-- +goose Down
DROP INDEX knowledge_org_pending_idx;
DROP INDEX knowledge_expiry_idx;
DROP TRIGGER knowledge_count_deletes ON knowledge;
DROP TRIGGER knowledge_count_updates ON knowledge;
DROP TRIGGER knowledge_count_inserts ON knowledge;
DROP FUNCTION knowledge_count_changes();
DROP FUNCTION knowledge_count_keys(boolean, text, text, uuid, text[], timestamptz);
DROP TABLE knowledge_count_deltas;
DROP TABLE knowledge_counts;
DROP TABLE audit_keys;
DROP TRIGGER audit_events_append_only ON audit_events;
DROP FUNCTION audit_events_append_only();
DROP TABLE audit_events;
