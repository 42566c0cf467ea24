-- Row-level security on every tenant table, as defence in depth behind
-- the org filter every statement already has (docs/operators.md, "Roles").
--
-- A row is visible to, and may be written by, a role subject to RLS only
-- when its org_id is the transaction's app.org_id, which the one place
-- that sends a caller's statements sets with SET LOCAL semantics
-- (set_config(..., true): db.Scoped, from the org in the context). Without
-- the setting a statement sees no tenant row at all: a query that forgot
-- its org filter returns nothing instead of every org.
--
-- Who is subject: knowledge_app (the MCP server). Exempt: the schema's
-- owner (migrations, the worker's upkeep, which PostgreSQL 15 lets only a
-- table's owner do) and knowledge_operator (BYPASSRLS: ctl's commands
-- cross orgs on purpose). The roles and their grants are made by
-- db.EnsureRoles, not here, because their names are configurable.
--
-- app_org_id is a plain SQL function (inlined: the policy becomes
-- "org_id = <stable expression>", an index condition on every org-led
-- key). An unset or reset setting is NULL, which matches no row.
-- +goose Up
CREATE FUNCTION app_org_id() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT nullif(current_setting('app.org_id', true), '')::uuid
$$;

-- The start-up check of the embedding spaces (knowledge.CheckEmbeddingSpace)
-- reads which models and widths exist in every org: metadata the MCP server
-- must see whatever its org, not content. It runs as its owner.
ALTER FUNCTION knowledge_embedding_spaces() SECURITY DEFINER SET search_path = public, pg_temp;

ALTER TABLE agent_tokens ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_tokens_org ON agent_tokens USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE agents ENABLE ROW LEVEL SECURITY;
CREATE POLICY agents_org ON agents USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE audit_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_events_org ON audit_events USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_org ON knowledge USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_chunks ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_chunks_org ON knowledge_chunks USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_count_deltas ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_count_deltas_org ON knowledge_count_deltas USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_counts ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_counts_org ON knowledge_counts USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_index_queue ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_index_queue_org ON knowledge_index_queue USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_org_spaces ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_org_spaces_org ON knowledge_org_spaces USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_postings ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_postings_org ON knowledge_postings USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_search_stats ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_search_stats_org ON knowledge_search_stats USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_supersessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_supersessions_org ON knowledge_supersessions USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_term_stats ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_term_stats_org ON knowledge_term_stats USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_tombstones ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_tombstones_org ON knowledge_tombstones USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE org_quotas ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_quotas_org ON org_quotas USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE rate_limits ENABLE ROW LEVEL SECURITY;
CREATE POLICY rate_limits_org ON rate_limits USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE task_knowledge ENABLE ROW LEVEL SECURITY;
CREATE POLICY task_knowledge_org ON task_knowledge USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE tasks ENABLE ROW LEVEL SECURITY;
CREATE POLICY tasks_org ON tasks USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());

-- +goose Down
DROP POLICY agent_tokens_org ON agent_tokens;
ALTER TABLE agent_tokens DISABLE ROW LEVEL SECURITY;
DROP POLICY agents_org ON agents;
ALTER TABLE agents DISABLE ROW LEVEL SECURITY;
DROP POLICY audit_events_org ON audit_events;
ALTER TABLE audit_events DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_org ON knowledge;
ALTER TABLE knowledge DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_chunks_org ON knowledge_chunks;
ALTER TABLE knowledge_chunks DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_count_deltas_org ON knowledge_count_deltas;
ALTER TABLE knowledge_count_deltas DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_counts_org ON knowledge_counts;
ALTER TABLE knowledge_counts DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_index_queue_org ON knowledge_index_queue;
ALTER TABLE knowledge_index_queue DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_org_spaces_org ON knowledge_org_spaces;
ALTER TABLE knowledge_org_spaces DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_postings_org ON knowledge_postings;
ALTER TABLE knowledge_postings DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_search_stats_org ON knowledge_search_stats;
ALTER TABLE knowledge_search_stats DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_supersessions_org ON knowledge_supersessions;
ALTER TABLE knowledge_supersessions DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_term_stats_org ON knowledge_term_stats;
ALTER TABLE knowledge_term_stats DISABLE ROW LEVEL SECURITY;
DROP POLICY knowledge_tombstones_org ON knowledge_tombstones;
ALTER TABLE knowledge_tombstones DISABLE ROW LEVEL SECURITY;
DROP POLICY org_quotas_org ON org_quotas;
ALTER TABLE org_quotas DISABLE ROW LEVEL SECURITY;
DROP POLICY rate_limits_org ON rate_limits;
ALTER TABLE rate_limits DISABLE ROW LEVEL SECURITY;
DROP POLICY task_knowledge_org ON task_knowledge;
ALTER TABLE task_knowledge DISABLE ROW LEVEL SECURITY;
DROP POLICY tasks_org ON tasks;
ALTER TABLE tasks DISABLE ROW LEVEL SECURITY;
ALTER FUNCTION knowledge_embedding_spaces() SECURITY INVOKER RESET search_path;
DROP FUNCTION app_org_id();
