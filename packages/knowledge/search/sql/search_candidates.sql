-- Run by packages/knowledge through pgx with named arguments, not through
-- sqlc: sqlc v1.31's analyzer cannot follow columns through this shape
-- (CTE columns used inside LATERAL subqueries and UNIONs: 'column "idf" does
-- not exist'; CTEs read by data-modifying CTEs: 'table alias "terms" does
-- not exist'), and the shape is what pins the plans. Its arguments are
-- named; search.go and indexer.go pass every one of them.
--
-- The two lexical lists of one search (full text and title), each
-- restricted to the org and the filters (and to @ids, below) and cut at
-- @candidates, as one row
-- per entry found with its rank and raw signal in each list (0: not in
-- that list; the vector columns are always 0 here: the vector list is
-- sql/search_vector.sql). Fusion and calibration are done by the caller
-- (search.go, rrf.go).
--
-- @lists says which lists this run computes (2: full text, 4: title; 6:
-- both, as search.go runs it). A list not asked for costs nothing: its
-- branch below is gated by a one-time filter, so neither it nor the CTEs
-- only it reads run. The two share the org's statistics, the query's
-- terms and the postings' scores: one statement computes both (a statement
-- each was 0.5-0.8 ms slower a search on two cores; docs/benchmarks.md,
-- "Why search is built so").
--
-- Plans are pinned by the statement's shape, not left to statistics: every
-- read of a term's postings is an index range scan under a LIMIT (a
-- LATERAL per term), every look-up of an entry a primary-key probe (a
-- LATERAL with LIMIT 1 is never turned into a hash join over the whole
-- table), and the queue's read is a function with its own planner
-- settings (db/migrations/00002_search.sql). The walks that stop at
-- @candidates rely on the executor reading a nested loop's outer side and
-- a UNION ALL's branches in order, and stopping when the LIMIT above is
-- met: a probe past that point is never made.
WITH st AS MATERIALIZED (
    SELECT coalesce(s.config, @default_config::regconfig) AS config,
           coalesce(s.docs, 0)::float8 AS docs,
           -- NULL before the first entry is indexed: then each entry is its
           -- own average (no length normalisation) until statistics exist.
           CASE WHEN s.docs > 0 THEN s.len_b::float8 / s.docs END AS avg_b,
           CASE WHEN s.docs > 0 THEN greatest(s.len_t::float8 / s.docs, 1) END AS avg_t
    FROM (SELECT 1) one
    LEFT JOIN knowledge_search_stats s ON s.org_id = @org_id
),
-- A metadata filter's key/value pairs (db/migrations/00041), each an index
-- range of knowledge_metadata_pairs holding the org's entries with that
-- pair (narrow rows, read by index-only scans).
mpairs AS MATERIALIZED (
    SELECT unnest(knowledge_metadata_pair_keys(@metadata::jsonb)) AS pair
),
-- The filter's metadata signature (db/migrations/00051): each posting
-- carries its entry's (msig), and one lacking a bit of the filter's is of
-- an entry the filter rejects. 0 without a filter: every posting passes.
fsig AS MATERIALIZED (
    SELECT coalesce(knowledge_metadata_sig(@metadata::jsonb), 0) AS sig
),
-- With @match_max > 0 (filtersearch.go: a filter not known to be common)
-- each pair's entries are read, at most @match_max + 1 of them (mread);
-- the pair with the fewest, if at most @match_max, gives the filter's
-- matches (mpick, mset: its entries holding the other pairs, a key probe
-- each). The choice is a count of rows read, never an estimate.
mread AS MATERIALIZED (
    SELECT p.pair, m.entry_id
    FROM mpairs p
    CROSS JOIN LATERAL (SELECT m.entry_id FROM knowledge_metadata_pairs m
                        WHERE m.org_id = @org_id AND m.pair = p.pair
                        LIMIT @match_max::int + 1) m
    WHERE @match_max::int > 0
),
mpick AS MATERIALIZED (
    SELECT r.pair FROM mread r GROUP BY r.pair HAVING count(*) <= @match_max::int ORDER BY count(*), r.pair LIMIT 1
),
mset AS MATERIALIZED (
    SELECT r.entry_id AS id
    FROM mread r
    WHERE r.pair = (SELECT pair FROM mpick)
      AND ((SELECT count(*) FROM mpairs) = 1
           OR (SELECT count(*) FROM mpairs p
               CROSS JOIN LATERAL (SELECT 1 FROM knowledge_metadata_pairs m
                                   WHERE m.org_id = @org_id AND m.pair = p.pair AND m.entry_id = r.entry_id LIMIT 1) m)
              = (SELECT count(*) FROM mpairs))
),
-- The search's set (within), when it has one (ws): the entries the caller
-- read first (@by_ids, @ids: a document's sections, or a source or kind
-- few entries pass) or the metadata filter's matches (mset). The lists'
-- walks below then skip every entry outside it by a hashed subplan,
-- before its key probe. Everything else is as without the filter (the
-- same postings read, each kept entry scored the same, the same titles
-- tested for the query), so each list is the unfiltered one less the
-- entries the filter rejects, and the walks probe only entries of the set.
within AS MATERIALIZED (
    SELECT i.id FROM unnest(@ids::uuid[]) AS i (id) WHERE @by_ids::bool
    UNION ALL
    SELECT mset.id FROM mset WHERE NOT @by_ids::bool
),
ws AS MATERIALIZED (
    SELECT @by_ids::bool OR EXISTS (SELECT 1 FROM mpick) AS set_on
),
-- The query's terms with their frequency in it (qtf): BM25 weighs a term
-- its query holds n times n times (a paragraph as query repeats the words
-- of its subject; the words it uses once are mostly its argument's
-- setting). A question holds each word once, and is unchanged by it.
qterms AS MATERIALIZED (
    SELECT a.term, max(a.tf)::float8 AS qtf FROM st CROSS JOIN LATERAL knowledge_terms(st.config, '', @query::text) AS a (field, term, tf, len)
    WHERE a.field = 'b'
    GROUP BY a.term
),
weights AS MATERIALIZED (
    SELECT f.field, q.term, q.qtf, coalesce(ts.df, 0) AS df,
           ln(1 + (st.docs - coalesce(ts.df, 0) + 0.5) / (coalesce(ts.df, 0) + 0.5)) AS idf
    FROM qterms q
    CROSS JOIN (SELECT 'b'::"char" AS field UNION ALL SELECT 't'::"char") f
    CROSS JOIN st
    LEFT JOIN LATERAL (
        SELECT x.df FROM knowledge_term_stats x
        WHERE x.org_id = @org_id AND x.field = f.field AND x.term = q.term
        LIMIT 1
    ) ts ON true
),
-- A long query keeps its @max_terms heaviest terms (highest weight, qtf *
-- idf in the body field). Each term's read is bounded (reads, below) in
-- proportion to its weight: the heaviest term of the query (in the org) is
-- read @per_term deep, a term of a tenth of its weight a tenth as deep,
-- never less than @min_per_term. A term's weight caps what it adds to any
-- score (qtf * idf * (k1 + 1)), so the postings of a common word beyond its
-- first few hundred add little to scores that the query's informative
-- words decide, and they were most of the cost of a search (a word held by
-- most entries: 2,000 of 2,700 postings read, docs/benchmarks.md).
-- ik, c0 and kb are the term's constants of the BM25 formula (scored).
picked AS MATERIALIZED (
    SELECT p.field, p.term, p.df, p.qtf * p.idf AS idf, p.qtf * p.idf * (@k1::float8 + 1) AS ik,
           CASE WHEN a.avg IS NULL THEN @k1::float8 ELSE @k1::float8 * (1 - @b::float8) END AS c0,
           coalesce(@k1::float8 * @b::float8 / a.avg, 0) AS kb,
           greatest(@min_per_term::int,
                    ceil(@per_term::int * least(1, p.qtf * p.idf / coalesce(max(p.qtf * p.idf) FILTER (WHERE p.df > 0) OVER (PARTITION BY p.field), p.qtf * p.idf))))::int
               AS reads
    FROM (
        SELECT w.field, w.term, w.qtf, w.df, w.idf FROM weights w
        WHERE w.term IN (SELECT term FROM weights WHERE field = 'b' ORDER BY qtf * idf DESC, term LIMIT @max_terms::int)
    ) p
    CROSS JOIN LATERAL (SELECT CASE p.field WHEN 'b' THEN st.avg_b ELSE st.avg_t END AS avg FROM st) a
),
-- The best postings of each term by impact, w.reads of them. A term held
-- by fewer entries is read whole; a term held by more is, by its idf, a
-- small part of any score (docs/knowledge.md, "Search", and apps/eval
-- measure what the bound costs). Of those, the postings of the entries a
-- metadata filter rejects by their signature are dropped: the same
-- postings read as without the filter (the test is outside the LIMIT),
-- and an entry's postings all go or all stay (one signature an entry), so
-- the entries kept score as they would unfiltered. An entry whose
-- signature is not known (msig NULL) stays, for the walks to test.
post AS (
    SELECT w.field, w.ik, w.c0, w.kb, p.entry_id, p.passage, p.tf, p.len, p.msig
    FROM picked w
    CROSS JOIN LATERAL (
        SELECT x.entry_id, x.passage, x.tf, x.len, x.msig FROM knowledge_postings x
        WHERE x.org_id = @org_id AND x.field = w.field AND x.term = w.term
        ORDER BY x.impact DESC
        LIMIT w.reads
    ) p
    WHERE w.df > 0
      AND ((w.field = 'b' AND @lists::int & 2 <> 0) OR (w.field = 't' AND @lists::int & 4 <> 0))
      AND ((SELECT sig FROM fsig) = 0 OR p.msig IS NULL OR p.msig & (SELECT sig FROM fsig) = (SELECT sig FROM fsig))
),
-- Entries stored but not indexed yet (the newest @tail of them), analysed
-- here exactly as the indexer will: found at once, scored the same way.
-- The queue is usually empty (the indexer keeps up); the EXISTS, a
-- one-time filter of one index probe, then spares the queue function's call.
tail AS (
    SELECT a.field, w.ik, w.c0, w.kb, tq.entry_id, a.passage, a.tf, a.len, e.msig
    FROM knowledge_queued(@org_id, @tail::int) AS tq (entry_id)
    CROSS JOIN LATERAL (SELECT k.title, k.body, knowledge_metadata_sig(k.metadata) AS msig FROM knowledge k
                        WHERE k.org_id = @org_id AND k.id = tq.entry_id LIMIT 1) e
    CROSS JOIN st
    CROSS JOIN LATERAL knowledge_passage_terms(st.config, e.title, e.body) AS a (field, passage, term, tf, len)
    JOIN picked w ON w.field = a.field AND w.term = a.term
    WHERE ((a.field = 'b' AND @lists::int & 2 <> 0) OR (a.field = 't' AND @lists::int & 4 <> 0))
      AND e.msig & (SELECT sig FROM fsig) = (SELECT sig FROM fsig)
      AND EXISTS (SELECT 1 FROM knowledge_index_queue q WHERE q.org_id = @org_id)
),
-- BM25 of every entry found, per field, and its coverage of the query:
-- the same sum with no length normalisation (b = 0; a term held once adds
-- its idf), the lexical evidence of fusion (rrf.go). The body's are its
-- best passage's
-- (a body longer than a passage is indexed by passage,
-- db/migrations/00015_passages.sql), the title's is passage 0's. A
-- posting's part is
-- idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg)), written as
-- ik * tf / (tf + c0 + kb * len) with ik, c0 and kb computed once per term
-- and field in picked: each operator here runs once per posting read (up to
-- a few thousand a search), and the generic plan cannot fold arguments into
-- constants. Without statistics yet (avg NULL) each entry is its own
-- average: c0 = k1, kb = 0. known: the entry's metadata signature is known
-- (post), so a metadata filter's walk needs no test of its pairs.
scored AS MATERIALIZED (
    SELECT y.entry_id, coalesce(max(y.b), 0) AS bm25_b, coalesce(max(y.t), 0) AS bm25_t,
           coalesce(max(y.cb), 0) AS cov_b, coalesce(max(y.ct), 0) AS cov_t, bool_and(y.known) AS known
    FROM (SELECT x.entry_id, x.passage,
                 sum(x.s) FILTER (WHERE x.field = 'b') AS b,
                 sum(x.s) FILTER (WHERE x.field = 't') AS t,
                 sum(x.c) FILTER (WHERE x.field = 'b') AS cb,
                 sum(x.c) FILTER (WHERE x.field = 't') AS ct,
                 bool_and(x.msig IS NOT NULL) AS known
          FROM (SELECT u.field, u.entry_id, u.passage, u.msig,
                       u.ik * u.tf / (u.tf + u.c0 + u.kb * u.len) AS s,
                       u.ik * u.tf / (u.tf + @k1::float8) AS c
                FROM (SELECT post.field, post.ik, post.c0, post.kb, post.entry_id, post.passage, post.tf, post.len, post.msig FROM post
                      UNION ALL SELECT tail.field, tail.ik, tail.c0, tail.kb, tail.entry_id, tail.passage, tail.tf, tail.len, tail.msig FROM tail) u) x
          GROUP BY x.entry_id, x.passage) y
    GROUP BY y.entry_id
),
-- The full-text list: the best entries by body BM25 that pass the filters,
-- walked best first with a key probe each until @candidates pass. The probe
-- also reads the columns the answer needs, so no entry is looked up again.
-- The walk reads the best 2 * @candidates first (a top-N sort) and sorts
-- the rest only if filters leave it short, instead of sorting every entry
-- found (a few thousand for common words) for the sake of the first 40.
fts AS (
    SELECT f.*, row_number() OVER (ORDER BY f.signal DESC, f.id) AS rank
    FROM (
        SELECT s.entry_id AS id, s.bm25_b AS signal, s.cov_b AS cov,
               k.title, k.tags, k.confidence, k.created_at, k.expires_at, k.head_id, k.embedding_status
        FROM ((SELECT entry_id, bm25_b, cov_b, known FROM scored
               WHERE bm25_b > 0 AND (NOT (SELECT set_on FROM ws) OR entry_id IN (SELECT id FROM within))
               ORDER BY bm25_b DESC, entry_id LIMIT 2 * @candidates::int)
              UNION ALL
              (SELECT entry_id, bm25_b, cov_b, known FROM scored
               WHERE bm25_b > 0 AND (NOT (SELECT set_on FROM ws) OR entry_id IN (SELECT id FROM within))
               ORDER BY bm25_b DESC, entry_id OFFSET 2 * @candidates::int)) s
        CROSS JOIN LATERAL (
            SELECT k.title, k.tags, k.confidence, k.created_at, k.expires_at, k.head_id, k.embedding_status
            FROM knowledge k
            WHERE k.org_id = @org_id AND k.id = s.entry_id
              AND ((cardinality(@tags::text[]) = 0 OR k.tags @> @tags::text[])
              AND (@as_of::timestamptz IS NULL OR k.created_at <= @as_of::timestamptz)
              AND (@include_superseded::bool OR k.superseded_at IS NULL OR k.superseded_at > coalesce(@as_of::timestamptz, 'infinity'))
              AND (@include_expired::bool OR k.expires_at IS NULL OR k.expires_at > coalesce(@as_of::timestamptz, now()))
              AND (@kind::text IS NULL OR k.kind = @kind::text) AND (@source::text IS NULL OR k.source = @source::text)
              AND (@source_prefix::text IS NULL OR starts_with(k.source, @source_prefix::text))
              AND (@metadata::jsonb IS NULL OR k.metadata @> @metadata::jsonb))
            LIMIT 1
        ) k
        -- An entry whose signature is not known (post) is tested here
        -- against a metadata filter before its probe, without a set: a
        -- key probe of the narrow pairs per pair of the filter, so an
        -- entry the filter rejects costs no read of its wide row (the
        -- vector is inline). Its probe still tests the metadata itself
        -- (pairs may share a hash, signatures a bit). A test of s alone:
        -- the LIMITs inside s keep it out of their sorts.
        WHERE @metadata::jsonb IS NULL OR (SELECT set_on FROM ws) OR s.known
           OR (SELECT count(*) FROM mpairs p
               CROSS JOIN LATERAL (SELECT 1 FROM knowledge_metadata_pairs m
                                   WHERE m.org_id = @org_id AND m.pair = p.pair AND m.entry_id = s.entry_id LIMIT 1) m)
              = (SELECT count(*) FROM mpairs)
        LIMIT @candidates::int
    ) f
),
-- The title list's entries best first by title BM25 (the best
-- @contains_checked, then the rest, sorted only if read), each probed once:
-- whether it passes the filters, its columns, and, for the best
-- @contains_checked, whether its title holds the whole query (ILIKE), the
-- title list's strongest signal. Such a title holds every query word, so
-- it is among the best titles by BM25 (see db/migrations/00002_search.sql
-- for why not a trigram index). The CTE is read lazily: ttl below stops
-- reading it as soon as it has @candidates entries, so usually only the
-- best @contains_checked are probed.
ttl_probed AS MATERIALIZED (
    SELECT s.entry_id AS id, s.bm25_t AS signal, s.cov_t AS cov, k.passes, k.contains,
           k.title, k.tags, k.confidence, k.created_at, k.expires_at, k.head_id, k.embedding_status
    FROM ((SELECT entry_id, bm25_t, cov_t, known, true AS tested FROM scored WHERE bm25_t > 0 ORDER BY bm25_t DESC, entry_id LIMIT @contains_checked::int)
          UNION ALL
          (SELECT entry_id, bm25_t, cov_t, known, false FROM scored WHERE bm25_t > 0 ORDER BY bm25_t DESC, entry_id OFFSET @contains_checked::int)) s
    CROSS JOIN LATERAL (
        SELECT ((cardinality(@tags::text[]) = 0 OR k.tags @> @tags::text[])
              AND (@as_of::timestamptz IS NULL OR k.created_at <= @as_of::timestamptz)
              AND (@include_superseded::bool OR k.superseded_at IS NULL OR k.superseded_at > coalesce(@as_of::timestamptz, 'infinity'))
              AND (@include_expired::bool OR k.expires_at IS NULL OR k.expires_at > coalesce(@as_of::timestamptz, now()))
              AND (@kind::text IS NULL OR k.kind = @kind::text) AND (@source::text IS NULL OR k.source = @source::text)
              AND (@source_prefix::text IS NULL OR starts_with(k.source, @source_prefix::text))
              AND (@metadata::jsonb IS NULL OR k.metadata @> @metadata::jsonb)) AS passes,
               (s.tested AND @use_contains::bool AND k.title ILIKE @title_pattern::text) AS contains,
               k.title, k.tags, k.confidence, k.created_at, k.expires_at, k.head_id, k.embedding_status
        FROM knowledge k
        WHERE k.org_id = @org_id AND k.id = s.entry_id
        LIMIT 1
    ) k
    -- Tested or not as without the filter; then only the set's probed, or
    -- without a set the entries holding the metadata filter's pairs (as
    -- the full-text walk tests them).
    WHERE (NOT (SELECT set_on FROM ws) OR s.entry_id IN (SELECT id FROM within))
      AND (@metadata::jsonb IS NULL OR (SELECT set_on FROM ws) OR s.known
           OR (SELECT count(*) FROM mpairs p
               CROSS JOIN LATERAL (SELECT 1 FROM knowledge_metadata_pairs m
                                   WHERE m.org_id = @org_id AND m.pair = p.pair AND m.entry_id = s.entry_id LIMIT 1) m)
              = (SELECT count(*) FROM mpairs))
),
-- The title list ranks titles holding the query first, then by BM25. A
-- title past the best @contains_checked is never tested for the query, so
-- that order is the best @contains_checked that pass, re-ordered, followed
-- by the rest that pass in ttl_probed's order (each below all of those
-- before it); the second part is read only when the first gives fewer than
-- @candidates entries.
ttl AS (
    SELECT t.*, row_number() OVER (ORDER BY t.contains DESC, t.signal DESC, t.id) AS rank
    FROM (
        SELECT c.id, c.signal, c.cov, c.contains, c.title, c.tags, c.confidence, c.created_at, c.expires_at, c.head_id, c.embedding_status
        FROM ((SELECT b.* FROM (SELECT * FROM ttl_probed LIMIT @contains_checked::int) b
               WHERE b.passes ORDER BY b.contains DESC, b.signal DESC, b.id)
              UNION ALL
              (SELECT r.* FROM (SELECT * FROM ttl_probed OFFSET @contains_checked::int) r WHERE r.passes)) c
        LIMIT @candidates::int
    ) t
)
-- One row per entry in either list, with its columns from whichever probe
-- read them (the same row).
SELECT coalesce(f.id, t.id) AS id, 0 AS vector_rank, 0::float8 AS cosine,
       coalesce(f.rank, 0)::int AS full_text_rank, coalesce(f.signal, 0)::float8 AS bm25,
       coalesce(t.rank, 0)::int AS title_rank, coalesce(t.signal, 0)::float8 AS title_bm25, coalesce(t.contains, false) AS title_contains,
       coalesce(f.cov, 0)::float8 AS full_text_coverage, coalesce(t.cov, 0)::float8 AS title_coverage,
       CASE WHEN @lists::int & 2 <> 0 THEN (SELECT coalesce(sum(idf), 0) FROM picked WHERE field = 'b') ELSE 0 END::float8 AS query_idf_b,
       CASE WHEN @lists::int & 4 <> 0 THEN (SELECT coalesce(sum(idf), 0) FROM picked WHERE field = 't') ELSE 0 END::float8 AS query_idf_t,
       (SELECT count(*) FROM picked WHERE field = 'b')::int AS query_terms,
       (SELECT docs FROM st)::float8 AS org_docs,
       coalesce(f.title, t.title) AS title, coalesce(f.tags, t.tags) AS tags, coalesce(f.confidence, t.confidence) AS confidence,
       coalesce(f.created_at, t.created_at) AS created_at, coalesce(f.expires_at, t.expires_at) AS expires_at,
       coalesce(f.head_id, t.head_id) AS head_id, coalesce(f.embedding_status, t.embedding_status) AS embedding_status
FROM (SELECT * FROM fts WHERE @lists::int & 2 <> 0) f
FULL JOIN (SELECT * FROM ttl WHERE @lists::int & 4 <> 0) t ON t.id = f.id;
