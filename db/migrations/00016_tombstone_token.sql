-- Issue 24: a forgotten entry never comes back through a retry. The
-- tombstone keeps the client token of the store that made the entry (a
-- random id the agent chose, not content), so a retry of that store after
-- the forget, once the idempotence record in Redis is gone, is refused
-- instead of storing the forgotten text again (packages/knowledge/store.go,
-- replayFromDB).
-- +goose Up
ALTER TABLE knowledge_tombstones ADD COLUMN client_token uuid;
CREATE UNIQUE INDEX knowledge_tombstones_token_idx
    ON knowledge_tombstones (org_id, created_by_agent_id, client_token)
    WHERE client_token IS NOT NULL;

-- +goose Down
DROP INDEX knowledge_tombstones_token_idx;
ALTER TABLE knowledge_tombstones DROP COLUMN client_token;
