-- Chinese, Japanese and Korean text searchable by words (issue 23, item 5).
--
-- PostgreSQL's text search parser treats an unbroken CJK run as one word
-- ("使用数据库查看连接" is one token), so the full-text and title lists found a
-- CJK entry only by its exact whole run. knowledge_terms now cuts every CJK
-- run into overlapping character bigrams (使用 用数 数据 据库 ...; a run of one
-- character stays one term), in every org whatever its text search
-- configuration; the Latin parts of the same text keep the org's
-- configuration (stop words, stemming) and whole identifiers, as before. A
-- query goes through the same function, so "数据库" asks for 数据 and 据库 and
-- BM25 ranks the entries holding them. Why bigrams in SQL rather than a
-- segmenter: docs/knowledge.md, "CJK text".
--
-- Texts without a CJK character take exactly the path they took before
-- (one regular expression test first), so their terms are unchanged: the
-- postings of such entries stay valid, and purge, which computes an
-- indexed entry's terms again to remove them, still finds them. Indexed
-- entries that do hold CJK were analysed the old way; this migration takes
-- them out of the index with the old analysis (exactly as purge does) and
-- queues them again, so the worker indexes them the new way. Requeueing
-- alone would be wrong: the indexer adds an entry's postings and
-- statistics without removing any it already has (indexer.go), so the
-- entry would count twice.

-- +goose Up

-- The indexer, purge and `ctl search language` lock an org's statistics
-- row first; holding the table in EXCLUSIVE mode waits for any batch in
-- flight and keeps the next ones out until the new function is committed,
-- so no entry can be indexed with the old analysis after the scan below.
-- Searches (plain reads) are not blocked.
LOCK TABLE knowledge_search_stats IN EXCLUSIVE MODE;

-- The indexed entries holding CJK characters (the same test as
-- knowledge_terms' below). Queued entries have no postings yet.
CREATE TEMP TABLE knowledge_cjk_reindex ON COMMIT DROP AS
SELECT k.org_id, k.id AS entry_id, k.created_at, s.config
FROM knowledge k
JOIN knowledge_search_stats s ON s.org_id = k.org_id
WHERE (k.title ~ '[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]'
       OR k.body ~ '[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]')
  AND NOT EXISTS (SELECT 1 FROM knowledge_index_queue q WHERE q.org_id = k.org_id AND q.entry_id = k.id);

-- Their terms as the indexer wrote them: knowledge_terms is still the old
-- function here.
CREATE TEMP TABLE knowledge_cjk_terms ON COMMIT DROP AS
SELECT r.org_id, r.entry_id, a.field, a.term, a.len
FROM knowledge_cjk_reindex r
JOIN knowledge k ON k.org_id = r.org_id AND k.id = r.entry_id
CROSS JOIN LATERAL knowledge_terms(r.config, k.title, k.body) AS a (field, term, tf, len);

-- Their postings: one primary-key range per distinct term (as purge does).
DELETE FROM knowledge_postings p
USING (SELECT DISTINCT t.org_id, t.field, t.term FROM knowledge_cjk_terms t) d
WHERE p.org_id = d.org_id AND p.field = d.field AND p.term = d.term
  AND (p.org_id, p.entry_id) IN (SELECT r.org_id, r.entry_id FROM knowledge_cjk_reindex r);

-- Their share of the document frequencies: terms only they hold go, the
-- others are decremented (deleted first, so a decremented row is not
-- deleted again).
DELETE FROM knowledge_term_stats s
USING (SELECT t.org_id, t.field, t.term, count(*)::integer AS n FROM knowledge_cjk_terms t GROUP BY 1, 2, 3) d
WHERE s.org_id = d.org_id AND s.field = d.field AND s.term = d.term AND s.df <= d.n;

UPDATE knowledge_term_stats s SET df = s.df - d.n
FROM (SELECT t.org_id, t.field, t.term, count(*)::integer AS n FROM knowledge_cjk_terms t GROUP BY 1, 2, 3) d
WHERE s.org_id = d.org_id AND s.field = d.field AND s.term = d.term;

-- Their share of the entry count and lengths.
UPDATE knowledge_search_stats s
SET docs = s.docs - x.n, len_b = s.len_b - x.len_b, len_t = s.len_t - x.len_t, updated_at = now()
FROM (
    SELECT e.org_id, count(*) AS n, coalesce(sum(e.len_b), 0) AS len_b, coalesce(sum(e.len_t), 0) AS len_t
    FROM (SELECT t.org_id, t.entry_id, max(t.len) FILTER (WHERE t.field = 'b') AS len_b,
                 coalesce(max(t.len) FILTER (WHERE t.field = 't'), 0) AS len_t
          FROM knowledge_cjk_terms t GROUP BY t.org_id, t.entry_id) e
    GROUP BY e.org_id
) x
WHERE s.org_id = x.org_id;

-- Queued again, at their creation time: the search's tail (the newest
-- queued entries of an org) keeps the entries stored since.
INSERT INTO knowledge_index_queue (org_id, entry_id, queued_at)
SELECT r.org_id, r.entry_id, r.created_at FROM knowledge_cjk_reindex r
ON CONFLICT DO NOTHING;

-- knowledge_cjk_bigrams: the terms of the CJK runs of t (Han, Hiragana,
-- Katakana with its prolonged sound mark, Hangul syllables and jamo, the
-- iteration marks 々〆〻 and 〇): every pair of adjacent characters of a
-- run, or the character itself for a run of one, with its count. t is
-- NFKC-normalised by the caller (half-width katakana are full-width by
-- then). Runs are cut by anything else, CJK punctuation (。、「」・，) included.
-- Scripts are not split inside a run: Japanese "東京に行く" yields 東京 京に
-- に行 行く, as Lucene's CJKBigramFilter does; a split would leave lone kana.
-- The characters go into an array first: substr on a multibyte text walks
-- from its start, which made a long run quadratic. STRICT: a NULL text (no
-- CJK) returns at once, and a strict function is not inlined into
-- knowledge_terms, whose plan stays small for the non-CJK path (inlined,
-- its aggregate was rescanned for every text: NFCorpus's analysis took
-- 11% more CPU instead of 2%).
-- +goose StatementBegin
CREATE FUNCTION knowledge_cjk_bigrams(t text)
RETURNS TABLE (term text, tf integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
-- A text's bigrams are few: the planner's default for a set-returning
-- function, 1,000 rows, made every statement analysing a text look far
-- dearer than it is (past jit_above_cost; see migration 00015).
ROWS 10
AS $$
    SELECT g, count(*)::integer
    FROM (
        SELECT CASE WHEN cardinality(c.ch) = 1 THEN c.ch[1] ELSE c.ch[i] || c.ch[i + 1] END AS g
        FROM regexp_matches(t, '[\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u303b\u3040-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003ffff]+', 'g') AS m (run)
        CROSS JOIN LATERAL (SELECT string_to_array(m.run[1], NULL) AS ch) c
        CROSS JOIN LATERAL generate_series(1, greatest(cardinality(c.ch) - 1, 1)) AS i
    ) x
    GROUP BY g
$$;
-- +goose StatementEnd

-- knowledge_terms: the one analysis of the module (migration 00002 says
-- what it returns; the signature and the output are the same). A title or
-- body with a CJK character (the test: CJK letters, CJK punctuation and
-- symbols, the half- and full-width forms, enclosed CJK like ㈱) is
-- NFKC-normalised (ｐｏｓｔｇｒｅｓ -> postgres, ｶﾀｶﾅ -> カタカナ, ，-> ,),
-- its CJK characters are replaced by spaces for the text search
-- configuration and the identifiers (which would otherwise take a CJK run
-- glued to an identifier as part of it), and its CJK runs give their
-- bigrams (knowledge_cjk_bigrams), which count in len like words. A text
-- without one is analysed exactly as before.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_terms(cfg regconfig, title text, body text)
RETURNS TABLE (field "char", term text, tf integer, len integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    WITH n AS MATERIALIZED (
        SELECT CASE WHEN title ~ '[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]'
                    THEN normalize(title, NFKC) END AS tn,
               CASE WHEN body ~ '[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]'
                    THEN normalize(body, NFKC) END AS bn
    ),
    w AS (
        SELECT n.tn, n.bn,
               CASE WHEN n.tn IS NULL THEN title
                    ELSE regexp_replace(n.tn, '[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]+', ' ', 'g') END AS tw,
               CASE WHEN n.bn IS NULL THEN body
                    ELSE regexp_replace(n.bn, '[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]+', ' ', 'g') END AS bw
        FROM n
    ),
    t AS (
        SELECT term, max(tf)::integer AS tf FROM (
            SELECT lexeme AS term, coalesce(cardinality(positions), 1) AS tf FROM w, unnest(to_tsvector(cfg, w.tw))
            UNION ALL
            SELECT i.term, i.tf FROM w, knowledge_identifiers(w.tw) AS i
            UNION ALL
            SELECT g.term, g.tf FROM w, knowledge_cjk_bigrams(w.tn) AS g
        ) x GROUP BY term
    ),
    b AS (
        SELECT term, max(tf)::integer AS tf FROM (
            SELECT lexeme AS term, coalesce(cardinality(positions), 1) AS tf FROM w, unnest(to_tsvector(cfg, w.bw))
            UNION ALL
            SELECT i.term, i.tf FROM w, knowledge_identifiers(w.bw) AS i
            UNION ALL
            SELECT g.term, g.tf FROM w, knowledge_cjk_bigrams(w.bn) AS g
        ) x GROUP BY term
    ),
    f AS (
        SELECT term, sum(tf)::integer AS tf FROM (SELECT * FROM t UNION ALL SELECT * FROM b) x GROUP BY term
    )
    SELECT 't'::"char", term, tf, (sum(tf) OVER ())::integer FROM t
    UNION ALL
    SELECT 'b'::"char", term, tf, (sum(tf) OVER ())::integer FROM f
$$;
-- +goose StatementEnd

-- +goose Down
-- The reverse: entries holding CJK leave the index with the bigram
-- analysis, are queued again, and the old function comes back.
LOCK TABLE knowledge_search_stats IN EXCLUSIVE MODE;

CREATE TEMP TABLE knowledge_cjk_reindex ON COMMIT DROP AS
SELECT k.org_id, k.id AS entry_id, k.created_at, s.config
FROM knowledge k
JOIN knowledge_search_stats s ON s.org_id = k.org_id
WHERE (k.title ~ '[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]'
       OR k.body ~ '[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff]')
  AND NOT EXISTS (SELECT 1 FROM knowledge_index_queue q WHERE q.org_id = k.org_id AND q.entry_id = k.id);

CREATE TEMP TABLE knowledge_cjk_terms ON COMMIT DROP AS
SELECT r.org_id, r.entry_id, a.field, a.term, a.len
FROM knowledge_cjk_reindex r
JOIN knowledge k ON k.org_id = r.org_id AND k.id = r.entry_id
CROSS JOIN LATERAL knowledge_terms(r.config, k.title, k.body) AS a (field, term, tf, len);

DELETE FROM knowledge_postings p
USING (SELECT DISTINCT t.org_id, t.field, t.term FROM knowledge_cjk_terms t) d
WHERE p.org_id = d.org_id AND p.field = d.field AND p.term = d.term
  AND (p.org_id, p.entry_id) IN (SELECT r.org_id, r.entry_id FROM knowledge_cjk_reindex r);

DELETE FROM knowledge_term_stats s
USING (SELECT t.org_id, t.field, t.term, count(*)::integer AS n FROM knowledge_cjk_terms t GROUP BY 1, 2, 3) d
WHERE s.org_id = d.org_id AND s.field = d.field AND s.term = d.term AND s.df <= d.n;

UPDATE knowledge_term_stats s SET df = s.df - d.n
FROM (SELECT t.org_id, t.field, t.term, count(*)::integer AS n FROM knowledge_cjk_terms t GROUP BY 1, 2, 3) d
WHERE s.org_id = d.org_id AND s.field = d.field AND s.term = d.term;

UPDATE knowledge_search_stats s
SET docs = s.docs - x.n, len_b = s.len_b - x.len_b, len_t = s.len_t - x.len_t, updated_at = now()
FROM (
    SELECT e.org_id, count(*) AS n, coalesce(sum(e.len_b), 0) AS len_b, coalesce(sum(e.len_t), 0) AS len_t
    FROM (SELECT t.org_id, t.entry_id, max(t.len) FILTER (WHERE t.field = 'b') AS len_b,
                 coalesce(max(t.len) FILTER (WHERE t.field = 't'), 0) AS len_t
          FROM knowledge_cjk_terms t GROUP BY t.org_id, t.entry_id) e
    GROUP BY e.org_id
) x
WHERE s.org_id = x.org_id;

INSERT INTO knowledge_index_queue (org_id, entry_id, queued_at)
SELECT r.org_id, r.entry_id, r.created_at FROM knowledge_cjk_reindex r
ON CONFLICT DO NOTHING;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION knowledge_terms(cfg regconfig, title text, body text)
RETURNS TABLE (field "char", term text, tf integer, len integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    WITH t AS (
        SELECT term, max(tf)::integer AS tf FROM (
            SELECT lexeme AS term, coalesce(cardinality(positions), 1) AS tf FROM unnest(to_tsvector(cfg, title))
            UNION ALL
            SELECT term, tf FROM knowledge_identifiers(title)
        ) x GROUP BY term
    ),
    b AS (
        SELECT term, max(tf)::integer AS tf FROM (
            SELECT lexeme AS term, coalesce(cardinality(positions), 1) AS tf FROM unnest(to_tsvector(cfg, body))
            UNION ALL
            SELECT term, tf FROM knowledge_identifiers(body)
        ) x GROUP BY term
    ),
    f AS (
        SELECT term, sum(tf)::integer AS tf FROM (SELECT * FROM t UNION ALL SELECT * FROM b) x GROUP BY term
    )
    SELECT 't'::"char", term, tf, (sum(tf) OVER ())::integer FROM t
    UNION ALL
    SELECT 'b'::"char", term, tf, (sum(tf) OVER ())::integer FROM f
$$;
-- +goose StatementEnd
DROP FUNCTION knowledge_cjk_bigrams(text);
