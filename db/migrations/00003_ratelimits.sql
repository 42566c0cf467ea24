-- Issue 10: rate limit settings, and names for the constraints the error
-- mapping depends on (at the end).
--
-- Rate limits of MCP calls, set by operators with
-- `ctl ratelimit`. A row overrides the MCP server's default (the
-- MCP_RATE_* settings) for one org:
--
--   scope 'org',   agent_id NULL: all agents of the org together;
--   scope 'agent', agent_id NULL: each agent of the org, unless overridden;
--   scope 'agent', agent_id set:  that one agent.
--
-- kind separates reads (search, get, resources) from writes (store,
-- supersede), so a batch writer cannot use up its org's search budget.
-- per_minute NULL means unlimited. The counters themselves live in Redis
-- (GCRA); only the settings are durable.

-- +goose Up
CREATE TABLE rate_limits (
    org_id     uuid        NOT NULL REFERENCES orgs (id),
    scope      text        NOT NULL CONSTRAINT rate_limits_scope_check CHECK (scope IN ('org', 'agent')),
    agent_id   uuid,
    kind       text        NOT NULL CONSTRAINT rate_limits_kind_check CHECK (kind IN ('read', 'write')),
    per_minute integer     CONSTRAINT rate_limits_per_minute_check CHECK (per_minute BETWEEN 1 AND 1000000),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rate_limits_org_scope_has_no_agent CHECK (scope = 'agent' OR agent_id IS NULL),
    -- MATCH SIMPLE: rows without an agent are not checked against agents.
    CONSTRAINT rate_limits_agent_fkey FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id),
    -- org_id leads, as in every key of the schema; NULLS NOT DISTINCT makes
    -- the org-wide rows unique too.
    CONSTRAINT rate_limits_key UNIQUE NULLS NOT DISTINCT (org_id, scope, agent_id, kind)
);

-- The constraints the domain's error mapping keys on get names of their own
-- (packages/knowledge/errmap.go), instead of PostgreSQL's generated
-- defaults, so a refactor of a column list cannot silently change a name and
-- turn "no such task" into an opaque failure; errmap_test.go pins each name
-- to the schema.
ALTER TABLE task_knowledge RENAME CONSTRAINT task_knowledge_org_id_task_id_fkey TO task_knowledge_task_fkey;
ALTER TABLE task_knowledge RENAME CONSTRAINT task_knowledge_org_id_knowledge_id_fkey TO task_knowledge_entry_fkey;
ALTER TABLE task_knowledge RENAME CONSTRAINT task_knowledge_org_id_created_by_agent_id_fkey TO task_knowledge_author_fkey;
ALTER TABLE knowledge RENAME CONSTRAINT knowledge_org_id_created_by_agent_id_fkey TO knowledge_author_fkey;
ALTER TABLE knowledge RENAME CONSTRAINT knowledge_org_id_fkey TO knowledge_org_fkey;
ALTER TABLE knowledge_supersessions RENAME CONSTRAINT knowledge_supersessions_org_id_agent_id_fkey TO knowledge_supersessions_agent_fkey;
ALTER TABLE org_quotas RENAME CONSTRAINT org_quotas_org_id_fkey TO org_quotas_org_fkey;

-- +goose Down
ALTER TABLE org_quotas RENAME CONSTRAINT org_quotas_org_fkey TO org_quotas_org_id_fkey;
ALTER TABLE knowledge_supersessions RENAME CONSTRAINT knowledge_supersessions_agent_fkey TO knowledge_supersessions_org_id_agent_id_fkey;
ALTER TABLE knowledge RENAME CONSTRAINT knowledge_org_fkey TO knowledge_org_id_fkey;
ALTER TABLE knowledge RENAME CONSTRAINT knowledge_author_fkey TO knowledge_org_id_created_by_agent_id_fkey;
ALTER TABLE task_knowledge RENAME CONSTRAINT task_knowledge_author_fkey TO task_knowledge_org_id_created_by_agent_id_fkey;
ALTER TABLE task_knowledge RENAME CONSTRAINT task_knowledge_entry_fkey TO task_knowledge_org_id_knowledge_id_fkey;
ALTER TABLE task_knowledge RENAME CONSTRAINT task_knowledge_task_fkey TO task_knowledge_org_id_task_id_fkey;
DROP TABLE rate_limits;
