-- What keeps a PostgreSQL node busy, sampled from inside it: pg_stat_activity
-- read every 10 ms, :samples times (default 400: about 5 s), by one session,
-- so that the sampling itself costs one backend and no process start per
-- sample (a psql per sample took 30-50 ms each and missed most of what it
-- looked for). Prints the backends that were not idle, on average, by state
-- and wait event, then the client backends on the CPU (active, no wait
-- event) by the first 50 characters of their statement.
--
--   psql "postgres://postgres@127.0.0.1:5441/knowledge" -v samples=400 -f scripts/pg-busy.sql
--
-- An average of 1.0 is one backend busy for the whole window. A statement's
-- share divided by the calls a second that ran in the window is its cost a
-- call in backend-seconds (docs/benchmarks.md, "Cluster"); on a node short of
-- CPU that includes the time it waited to be scheduled.
\if :{?samples}
\else
\set samples 400
\endif
\set QUIET on
CREATE TEMP TABLE pg_busy_samples (state text, wait text, query text);
SELECT set_config('pg_busy.samples', :'samples', false) \gset
DO $$
DECLARE
    n int := current_setting('pg_busy.samples')::int;
BEGIN
    FOR _ IN 1..n LOOP
        INSERT INTO pg_busy_samples
        SELECT coalesce(state, '-'), coalesce(wait_event_type || ':' || wait_event, '-'),
               left(regexp_replace(query, '\s+', ' ', 'g'), 50)
        FROM pg_stat_activity
        WHERE pid <> pg_backend_pid() AND state IS DISTINCT FROM 'idle'
          AND backend_type = 'client backend';
        PERFORM pg_sleep(0.01);
        PERFORM pg_stat_clear_snapshot();
    END LOOP;
END $$;
\set QUIET off
SELECT state, wait, round(count(*)::numeric / :samples, 3) AS busy
FROM pg_busy_samples GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 12;
SELECT query, round(count(*)::numeric / :samples, 3) AS on_cpu
FROM pg_busy_samples WHERE state = 'active' AND wait = '-'
GROUP BY 1 ORDER BY 2 DESC LIMIT 15;
