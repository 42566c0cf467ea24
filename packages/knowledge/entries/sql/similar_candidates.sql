-- Run by packages/knowledge/similar.go through pgx with named arguments
-- (the shape, like search_candidates.sql, is beyond sqlc's analyzer).
--
-- Candidates for "looks like the same knowledge" at store time: the org's
-- head entries that share the most of the new text's rarest indexed terms,
-- and those that share the most of its locality-sensitive keys (written
-- with the entry, so an entry stored a moment ago and not indexed yet is
-- found by them). The caller compares each
-- candidate's words with the new text and keeps the close ones; this
-- statement only has to be cheap and to miss no near-duplicate.
--
-- Why the rarest terms: two entries saying the same thing share their
-- specific words, and a specific word (low document frequency in the org)
-- has a short postings list, so reading @rare_terms of them costs a few
-- index range scans of a handful of rows each, whatever the org's size,
-- and common words (which every entry on the topic holds) never make a
-- candidate. Terms the org has never indexed (df 0) cannot be shared by an
-- indexed entry and are skipped; the terms read are bounded by
-- @postings_budget postings in all and each term's read by @max_postings. The new text is analysed as the indexer analyses
-- entries (knowledge_terms, field 'b': title and body), its first
-- @analysed_chars characters only, so a 32,000-character body costs no
-- more than a short one.
--
-- Plans are pinned by shape, as in search_candidates.sql: every term
-- statistic and every entry is a primary-key probe (LATERAL ... LIMIT),
-- every postings read an index range scan under a LIMIT.
WITH st AS MATERIALIZED (
    SELECT coalesce(s.config, @default_config::regconfig) AS config
    FROM (SELECT 1) one
    LEFT JOIN knowledge_search_stats s ON s.org_id = @org_id
),
terms AS MATERIALIZED (
    SELECT DISTINCT a.term
    FROM st CROSS JOIN LATERAL knowledge_terms(st.config, @title::text, left(@body::text, @analysed_chars::int)) AS a (field, term, tf, len)
    WHERE a.field = 'b'
),
-- The rarest terms, while their postings fit @postings_budget (the first
-- two always): a text of specific words is compared on many of them, a
-- text of common words on its two least common.
rare AS MATERIALIZED (
    SELECT r.term, r.df
    FROM (
        SELECT t.term, ts.df,
               row_number() OVER (ORDER BY ts.df, t.term) AS n,
               sum(ts.df) OVER (ORDER BY ts.df, t.term ROWS UNBOUNDED PRECEDING) AS cum
        FROM terms t
        CROSS JOIN LATERAL (
            SELECT x.df FROM knowledge_term_stats x
            WHERE x.org_id = @org_id AND x.field = 'b' AND x.term = t.term
            LIMIT 1
        ) ts
    ) r
    WHERE r.n <= @rare_terms::int AND (r.n <= 2 OR r.cum <= @postings_budget::int)
),
shared AS (
    SELECT p.entry_id, count(*) AS n, sum(1.0::float8 / r.df) AS weight
    FROM rare r
    CROSS JOIN LATERAL (
        -- An entry of several passages holds the term in as many postings.
        SELECT DISTINCT y.entry_id FROM (
            SELECT x.entry_id FROM knowledge_postings x
            WHERE x.org_id = @org_id AND x.field = 'b' AND x.term = r.term
            LIMIT @max_postings::int
        ) y
    ) p
    GROUP BY p.entry_id
),
indexed AS (
    SELECT s.entry_id AS id
    FROM shared s
    WHERE s.n >= least(@min_shared::int, (SELECT count(*) FROM rare))
    ORDER BY s.n DESC, s.weight DESC, s.entry_id
    LIMIT @candidates::int
),
-- Entries sharing a locality-sensitive key (similar.go, similarKeys):
-- near-duplicates made only of words common in the org, which the rare
-- terms cannot single out. The keys are salted with the org, so the GIN
-- look-up finds the org's entries only; at most @max_key_hits of them are
-- ranked by how many keys they share. The look-up is a function
-- (migration 00020): under row-level security the GIN index could not be
-- used here.
key_hits AS MATERIALIZED (
    SELECT h.id, h.similar_keys
    FROM knowledge_similar_key_hits(@org_id, @keys::bigint[], @max_key_hits::int) h
),
keyed AS (
    SELECT h.id FROM key_hits h
    ORDER BY (SELECT count(*) FROM unnest(h.similar_keys) x WHERE x = ANY(@keys::bigint[])) DESC, h.id
    LIMIT @candidates::int
)
SELECT k.id, k.title, k.body
FROM (SELECT id FROM indexed UNION SELECT id FROM keyed) c
CROSS JOIN LATERAL (
    SELECT k.id, k.title, k.body FROM knowledge k
    WHERE k.org_id = @org_id AND k.id = c.id
      AND k.head_id IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
    LIMIT 1
) k;
