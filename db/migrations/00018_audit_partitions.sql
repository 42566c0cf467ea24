-- The audit trail partitioned by day (UTC), so the retention drops whole
-- days instead of deleting rows, and no role the applications hold needs
-- DELETE on it (docs/operators.md, "Roles" and "Audit trail").
--
-- audit_events keeps its columns, keys and append-only trigger. Its days
-- are partitions named audit_events_pYYYYMMDD, made ahead of time by
-- audit_ensure_partitions (the worker's upkeep, the MCP server at start, and
-- the audit writer when a record falls on a day that has none) and dropped
-- by audit_drop_partitions_before (the retention). Both are SECURITY
-- DEFINER: they run as the schema's owner, the only role allowed to create
-- or drop tables, and are executable only by the roles db.EnsureRoles
-- grants them to (the application may make days, never drop them).
--
-- There is no default partition: a record whose day has no partition is
-- refused (SQLSTATE 23514) and the writer makes the day and retries, which
-- keeps every row in a partition the retention can drop whole.
-- +goose Up
ALTER TABLE audit_events RENAME TO audit_events_unpartitioned;
ALTER TABLE audit_events_unpartitioned RENAME CONSTRAINT audit_events_pkey TO audit_events_unpartitioned_pkey;
ALTER INDEX audit_events_agent_idx RENAME TO audit_events_unpartitioned_agent_idx;
ALTER INDEX audit_events_entry_idx RENAME TO audit_events_unpartitioned_entry_idx;
ALTER INDEX audit_events_at_idx RENAME TO audit_events_unpartitioned_at_idx;
ALTER SEQUENCE audit_events_id_seq RENAME TO audit_events_unpartitioned_id_seq;
DROP TRIGGER audit_events_append_only ON audit_events_unpartitioned;

CREATE SEQUENCE audit_events_id_seq AS bigint;
CREATE TABLE audit_events (
    org_id       uuid        NOT NULL,
    id           bigint      NOT NULL DEFAULT nextval('audit_events_id_seq'),
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
    PRIMARY KEY (org_id, at, id)
) PARTITION BY RANGE (at);
ALTER SEQUENCE audit_events_id_seq OWNED BY audit_events.id;
CREATE INDEX audit_events_agent_idx ON audit_events (org_id, agent_id, at);
CREATE INDEX audit_events_entry_idx ON audit_events USING gin (entry_ids);
CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

-- +goose StatementBegin
-- audit_ensure_partitions makes the day partitions (UTC days) from
-- from_at's to to_at's, both included, that do not exist yet, and returns
-- how many it made. At most 400 days per call, so a wild clock cannot make
-- thousands.
CREATE FUNCTION audit_ensure_partitions(from_at timestamptz, to_at timestamptz) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    from_day date := (from_at AT TIME ZONE 'UTC')::date;
    to_day   date := (to_at AT TIME ZONE 'UTC')::date;
    d        date;
    made     integer := 0;
BEGIN
    IF from_day IS NULL OR to_day IS NULL OR to_day < from_day OR to_day - from_day > 400 THEN
        RAISE EXCEPTION 'audit_ensure_partitions: from_at..to_at must span at most 400 days, in order (got % .. %)', from_at, to_at
            USING ERRCODE = '22023';
    END IF;
    -- Two writers making the same day must not race on the catalogue.
    PERFORM pg_advisory_xact_lock(hashtext('audit_events_partitions'));
    d := from_day;
    WHILE d <= to_day LOOP
        IF to_regclass(format('public.audit_events_p%s', to_char(d, 'YYYYMMDD'))) IS NULL THEN
            EXECUTE format('CREATE TABLE public.%I PARTITION OF public.audit_events FOR VALUES FROM (%L) TO (%L)',
                'audit_events_p' || to_char(d, 'YYYYMMDD'),
                d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
            made := made + 1;
        END IF;
        d := d + 1;
    END LOOP;
    RETURN made;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- audit_drop_partitions_before drops the day partitions that end at or
-- before cutoff (whole days only: a record is kept until its whole day is
-- past the retention) and returns how many records they held.
CREATE FUNCTION audit_drop_partitions_before(cutoff timestamptz) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    p       record;
    n       bigint;
    dropped bigint := 0;
BEGIN
    IF cutoff IS NULL OR cutoff > now() THEN
        RAISE EXCEPTION 'audit_drop_partitions_before: cutoff must be in the past (got %)', cutoff
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('audit_events_partitions'));
    FOR p IN
        SELECT c.relname
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'public.audit_events'::regclass
          AND c.relname ~ '^audit_events_p[0-9]{8}$'
          AND (to_date(substr(c.relname, 15), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' <= cutoff
        ORDER BY c.relname
    LOOP
        EXECUTE format('SELECT count(*) FROM public.%I', p.relname) INTO n;
        EXECUTE format('DROP TABLE public.%I', p.relname);
        dropped := dropped + n;
    END LOOP;
    RETURN dropped;
END
$$;
-- +goose StatementEnd
REVOKE EXECUTE ON FUNCTION audit_ensure_partitions(timestamptz, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION audit_drop_partitions_before(timestamptz) FROM PUBLIC;

-- The records that exist, moved with their ids, and a week ahead.
SELECT audit_ensure_partitions(least((SELECT min(at) FROM audit_events_unpartitioned), now()), now() + interval '7 days');
INSERT INTO audit_events (org_id, id, at, agent_id, token_id, kind, name, entry_ids, outcome, duration_us, query_length, query_hash)
SELECT org_id, id, at, agent_id, token_id, kind, name, entry_ids, outcome, duration_us, query_length, query_hash
FROM audit_events_unpartitioned;
SELECT setval('audit_events_id_seq', coalesce((SELECT max(id) FROM audit_events_unpartitioned), 0) + 1, false);
DROP TABLE audit_events_unpartitioned;

-- +goose Down
ALTER TABLE audit_events RENAME TO audit_events_partitioned;
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
    query_hash   bytea
);
INSERT INTO audit_events (org_id, id, at, agent_id, token_id, kind, name, entry_ids, outcome, duration_us, query_length, query_hash)
OVERRIDING SYSTEM VALUE
SELECT org_id, id, at, agent_id, token_id, kind, name, entry_ids, outcome, duration_us, query_length, query_hash
FROM audit_events_partitioned;
SELECT setval(pg_get_serial_sequence('audit_events', 'id'), coalesce((SELECT max(id) FROM audit_events), 0) + 1, false);
DROP TABLE audit_events_partitioned;
DROP FUNCTION audit_drop_partitions_before(timestamptz);
DROP FUNCTION audit_ensure_partitions(timestamptz, timestamptz);
ALTER TABLE audit_events ADD PRIMARY KEY (org_id, at, id);
CREATE INDEX audit_events_agent_idx ON audit_events (org_id, agent_id, at);
CREATE INDEX audit_events_entry_idx ON audit_events USING gin (entry_ids);
CREATE INDEX audit_events_at_idx ON audit_events (at);
CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
