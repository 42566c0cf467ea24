-- forget_knowledge (packages/knowledge/forget.go): an agent erases an entry
-- (a wrong fact, a leaked secret, personal data). The entry's row goes the
-- way purge takes it (content, vector, postings, task links, chains
-- relinked); what stays is this tombstone, which holds no content: who
-- wrote the entry, who forgot it, when and why. Only the entry's author and
-- the agent that forgot it ever see it (get_knowledge answers "forgotten");
-- to everyone else the id is one that does not exist.
-- +goose Up
CREATE TABLE knowledge_tombstones (
    org_id              uuid        NOT NULL REFERENCES orgs (id),
    id                  uuid        NOT NULL,
    -- The erased entry's author (NULL: an operator's or an import's entry)
    -- and creation time, kept so its author can still be told what it was.
    created_by_agent_id uuid,
    created_at          timestamptz NOT NULL,
    forgotten_by_agent_id uuid      NOT NULL,
    forgotten_at        timestamptz NOT NULL DEFAULT now(),
    reason              text        NOT NULL CHECK (char_length(reason) BETWEEN 1 AND 500),
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, created_by_agent_id) REFERENCES agents (org_id, id),
    FOREIGN KEY (org_id, forgotten_by_agent_id) REFERENCES agents (org_id, id)
);

-- Two scopes join the catalogue: knowledge:delete forgets the holder's own
-- entries, knowledge:delete_others anyone's in the org.
ALTER TABLE agent_tokens DROP CONSTRAINT agent_tokens_scopes_check;
ALTER TABLE agent_tokens ADD CONSTRAINT agent_tokens_scopes_check CHECK (
    cardinality(scopes) >= 1
    AND scopes <@ ARRAY['knowledge:read', 'knowledge:write', 'knowledge:delete', 'knowledge:delete_others']::text[]);

-- +goose Down
ALTER TABLE agent_tokens DROP CONSTRAINT agent_tokens_scopes_check;
ALTER TABLE agent_tokens ADD CONSTRAINT agent_tokens_scopes_check CHECK (
    cardinality(scopes) >= 1 AND scopes <@ ARRAY['knowledge:read', 'knowledge:write']::text[]);
DROP TABLE knowledge_tombstones;
