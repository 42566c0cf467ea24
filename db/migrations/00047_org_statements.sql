-- knowledge_run_org's statements stored once and named by each call,
-- instead of carried by it (00033, 00043).
--
-- A call carried its statement's text, up to 20 KB with its comments, as
-- an argument, though the worker needs the text only to prepare the
-- statement, once per session and shard group: the coordinator deparsed
-- it into the query it delegates on every call (get_const_expr, escaping
-- it character by character: 14 % of the coordinator's samples in a run
-- of stores and searches) and the worker parsed it again. The caller
-- (packages/knowledge/internal/orgcall) now stores the text here on its
-- first use of the statement and sends NULL in its place. A reference
-- table: each worker reads its own copy. The name ends with the first 16
-- hex digits of the text's md5 (the CHECK), so a row can only ever hold
-- the text its name was made from.
--
-- knowledge_org_sql renamed the tables by trying each of the schema's
-- forty distributed tables against the text, a regular expression each
-- (13 ms for the lexical statement, on every preparation); it now tries
-- only the names the text holds, found in one pass.
-- +goose Up
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

CREATE TABLE knowledge_org_statements (
    name text PRIMARY KEY,
    sql  text NOT NULL,
    CONSTRAINT knowledge_org_statements_hash CHECK (right(name, 17) = '_' || left(md5(sql), 16))
);
-- On a cluster: a reference table (no org), 00027.
SELECT knowledge_distribute();

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_org_sql(p_org uuid, p_sql text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q text := p_sql;
    t record;
BEGIN
    FOR t IN
        SELECT p.logicalrelid::regclass AS rel, c.relname::text AS name, p.partmethod
        FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
        WHERE c.relnamespace = 'public'::regnamespace
          AND c.relname IN (SELECT w[1] FROM regexp_matches(p_sql, '([[:alnum:]_]+)', 'g') AS w)
        ORDER BY length(c.relname) DESC
    LOOP
        q := regexp_replace(q, '\m' || t.name || '\M',
            shard_name(t.rel, get_shard_id_for_distribution_column(t.rel, CASE WHEN t.partmethod = 'h' THEN p_org END)), 'g');
    END LOOP;
    RETURN q;
END
$$;
-- +goose StatementEnd

-- p_sql NULL: the text stored under p_name, read only when the session
-- prepares the statement for the org's shard group.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_run_org(p_org uuid, p_name text, p_sql text, p_settings text[], p_args text[])
RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
    stmt text;
    q text := p_sql;
    args text;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_settings), 0) / 2 LOOP
        PERFORM set_config(p_settings[2 * i - 1], p_settings[2 * i], true);
    END LOOP;
    PERFORM set_config('app.org_id', p_org::text, true);
    stmt := p_name || '_' || get_shard_id_for_distribution_column('knowledge', p_org);
    IF current_setting('knowledge_prepared.' || stmt, true) IS DISTINCT FROM 'on' THEN
        IF q IS NULL THEN
            SELECT s.sql INTO q FROM knowledge_org_statements s WHERE s.name = p_name;
            IF q IS NULL THEN
                RAISE EXCEPTION 'knowledge_run_org: no statement % in knowledge_org_statements', p_name
                    USING ERRCODE = 'undefined_object';
            END IF;
        END IF;
        PERFORM knowledge_org_prepare(p_org, stmt, q, '');
    END IF;
    SELECT string_agg(quote_nullable(a), ', ' ORDER BY n) INTO args FROM unnest(p_args) WITH ORDINALITY AS u (a, n);
    IF args IS NULL THEN
        RETURN QUERY EXECUTE format('EXECUTE %I', stmt);
    ELSE
        RETURN QUERY EXECUTE format('EXECUTE %I (%s)', stmt, args);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_run_org(p_org uuid, p_name text, p_sql text, p_settings text[], p_args text[])
RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
    stmt text;
    args text;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_settings), 0) / 2 LOOP
        PERFORM set_config(p_settings[2 * i - 1], p_settings[2 * i], true);
    END LOOP;
    PERFORM set_config('app.org_id', p_org::text, true);
    stmt := p_name || '_' || get_shard_id_for_distribution_column('knowledge', p_org);
    PERFORM knowledge_org_prepare(p_org, stmt, p_sql, '');
    SELECT string_agg(quote_nullable(a), ', ' ORDER BY n) INTO args FROM unnest(p_args) WITH ORDINALITY AS u (a, n);
    IF args IS NULL THEN
        RETURN QUERY EXECUTE format('EXECUTE %I', stmt);
    ELSE
        RETURN QUERY EXECUTE format('EXECUTE %I (%s)', stmt, args);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_org_sql(p_org uuid, p_sql text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q text := p_sql;
    t record;
BEGIN
    FOR t IN
        SELECT p.logicalrelid::regclass AS rel, c.relname::text AS name, p.partmethod
        FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
        WHERE c.relnamespace = 'public'::regnamespace
        ORDER BY length(c.relname) DESC
    LOOP
        IF q ~ ('\m' || t.name || '\M') THEN
            q := regexp_replace(q, '\m' || t.name || '\M',
                shard_name(t.rel, get_shard_id_for_distribution_column(t.rel, CASE WHEN t.partmethod = 'h' THEN p_org END)), 'g');
        END IF;
    END LOOP;
    RETURN q;
END
$$;
-- +goose StatementEnd

DROP TABLE knowledge_org_statements;
