-- Rate limits of MCP calls (issue 10), set by operators with
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

-- +goose Down
DROP TABLE rate_limits;
