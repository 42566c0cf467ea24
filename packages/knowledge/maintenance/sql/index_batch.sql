-- Run by packages/knowledge through pgx with named arguments, not through
-- sqlc: sqlc v1.31's analyzer cannot follow columns through this shape
-- (CTE columns used inside LATERAL subqueries and UNIONs: 'column "idf" does
-- not exist'; CTEs read by data-modifying CTEs: 'table alias "terms" does
-- not exist'), and the shape is what pins the plans. Its arguments are
-- named; search.go and indexer.go pass every one of them.
--
-- Moves up to @max queued entries of the org into the index: postings for
-- every (field, passage, term), one document-frequency upsert per distinct term of
-- the batch, the org's counters, and the queue rows deleted, in one
-- statement. Runs after LockSearchStats in the same transaction.
WITH st AS (
    SELECT s.config, s.docs, s.len_b, s.len_t FROM knowledge_search_stats s WHERE s.org_id = @org_id
),
batch AS (
    SELECT q.entry_id FROM knowledge_index_queue q
    WHERE q.org_id = @org_id
    ORDER BY q.queued_at
    LIMIT @max::int
    FOR UPDATE SKIP LOCKED
),
-- msig: the entry's metadata signature, on each of its postings
-- (db/migrations/00051_postings_metadata_sig.sql).
terms AS MATERIALIZED (
    SELECT b.entry_id, a.field, a.passage, a.term, a.tf, a.len, k.msig
    FROM batch b
    CROSS JOIN LATERAL (SELECT k.title, k.body, knowledge_metadata_sig(k.metadata) AS msig FROM knowledge k
                        WHERE k.org_id = @org_id AND k.id = b.entry_id LIMIT 1) k
    CROSS JOIN st
    CROSS JOIN LATERAL knowledge_passage_terms(st.config, k.title, k.body) AS a (field, passage, term, tf, len)
),
-- An entry's body length is the mean of its passages' (one passage: its
-- length), so the org's average is that of a passage-sized unit
-- (db/migrations/00015_passages.sql).
lens AS (
    SELECT entry_id, round(avg(len_b))::bigint AS len_b, coalesce(max(len_t), 0) AS len_t
    FROM (SELECT entry_id, passage, max(len) FILTER (WHERE field = 'b') AS len_b, max(len) FILTER (WHERE field = 't') AS len_t
          FROM terms GROUP BY entry_id, passage) p
    GROUP BY entry_id
),
tot AS (
    SELECT count(*) AS n, coalesce(sum(len_b), 0) AS len_b, coalesce(sum(len_t), 0) AS len_t FROM lens
),
avgs AS (
    SELECT (st.len_b + tot.len_b)::float8 / greatest(st.docs + tot.n, 1) AS avg_b,
           greatest((st.len_t + tot.len_t)::float8 / greatest(st.docs + tot.n, 1), 1) AS avg_t
    FROM st, tot
),
ins AS (
    INSERT INTO knowledge_postings (org_id, field, term, impact, entry_id, passage, tf, len, msig)
    SELECT @org_id, terms.field, terms.term,
           (terms.tf * (@k1::float8 + 1) / (terms.tf + @k1::float8 * (1 - @b::float8 + @b::float8 * terms.len
               / CASE terms.field WHEN 'b' THEN avgs.avg_b ELSE avgs.avg_t END)))::real,
           terms.entry_id, terms.passage, terms.tf, terms.len, terms.msig
    FROM terms, avgs
    -- A term's postings of one batch on few heap pages: until a vacuum sets
    -- the visibility map, each posting read visits its heap page.
    ORDER BY terms.field, terms.term
),
dfs AS (
    INSERT INTO knowledge_term_stats (org_id, field, term, df)
    SELECT @org_id, field, term, count(DISTINCT entry_id) FROM terms GROUP BY field, term ORDER BY field, term
    ON CONFLICT (org_id, field, term) DO UPDATE SET df = knowledge_term_stats.df + EXCLUDED.df
),
deq AS (
    DELETE FROM knowledge_index_queue q USING batch b
    WHERE q.org_id = @org_id AND q.entry_id = b.entry_id
),
upd AS (
    UPDATE knowledge_search_stats s
    SET docs = s.docs + tot.n, len_b = s.len_b + tot.len_b, len_t = s.len_t + tot.len_t, updated_at = now()
    FROM tot WHERE s.org_id = @org_id
)
SELECT count(*)::int FROM batch;
