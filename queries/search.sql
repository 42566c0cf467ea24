-- Hybrid search and the lexical index (packages/knowledge).
--
-- BM25, as in Lucene: a term t of the query adds to an entry's score
--   idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))
-- with idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)), N the org's indexed
-- entries, df(t) the org's entries holding t, len the field's length in
-- terms and avglen the org's average: every statistic is the org's own.
-- k1 and b are parameters (knowledge.BM25K1, knowledge.BM25B).

-- name: SearchConfig :exec
-- Transaction-local settings of the search statement that follows it in the
-- same pipeline (see search.go): the HNSW probe width, pgvector 0.8's
-- iterative index scan so a small org's filter does not starve the vector
-- list, and generic plans: the statement's plan is pinned by its shape (see
-- packages/knowledge/search/sql/search_candidates.sql), not by the selectivity of
-- its arguments, so it is planned once per connection instead of on every
-- call (planning it took ~3 ms, as long as running it). No JIT: the HNSW
-- scan's cost estimate (millions) crosses jit_above_cost, and compiling
-- the plan took 100-180 ms of a search that runs in milliseconds.
-- pin_vector_plan, for the vector list's statement
-- (packages/knowledge/search/sql/search_vector.sql): no sequential scan, sort or
-- bitmap scan where an index gives the order, so its generic plan walks
-- the space's HNSW index whatever the statistics say (the settings the
-- vector functions carry themselves). The other statements keep the
-- deployment's settings. On a Citus coordinator (citus.version set) plans
-- stay custom: a generic plan of a statement with parameters cannot be
-- routed to the one worker of its org (docs/operators.md, "Running on a
-- cluster").
SELECT set_config('hnsw.ef_search', @ef_search::text, true),
       set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('plan_cache_mode', CASE WHEN current_setting('citus.version', true) IS NULL THEN 'force_generic_plan' ELSE current_setting('plan_cache_mode') END, true),
       set_config('jit', 'off', true),
       set_config('enable_seqscan', CASE WHEN @pin_vector_plan::bool THEN 'off' ELSE current_setting('enable_seqscan') END, true),
       set_config('enable_sort', CASE WHEN @pin_vector_plan::bool THEN 'off' ELSE current_setting('enable_sort') END, true),
       set_config('enable_bitmapscan', CASE WHEN @pin_vector_plan::bool THEN 'off' ELSE current_setting('enable_bitmapscan') END, true);

-- name: SetLocal :exec
-- Settings (names and values, in turn) local to the transaction: sent
-- ahead of a statement in one pipeline (internal/pgbatch), the settings of
-- that statement alone (internal/data, Reads). A single node's form of
-- what a worker's guard sets (internal/orgcall, QueryShards).
SELECT count(set_config((@names::text[])[i], (@values::text[])[i], true)) FROM generate_subscripts(@names::text[], 1) AS i;

-- name: SearchBodies :many
-- The bodies of the hits an answer returns, for their snippets, and their
-- fields (source, kind, metadata: read for the hits answered only), with
-- the document of a hit that is a section (doc_*, as SearchBodiesNear's).
SELECT k.id, k.body, k.source, k.kind, k.metadata,
       s.document_id AS doc_id, s.heading_path AS doc_heading_path, s.position AS doc_position, s.ended_how AS doc_ended_how,
       dk.title AS doc_title, d.source AS doc_source, (d.id IS NOT NULL AND dk.id IS NOT NULL) AS doc_found
FROM knowledge k
LEFT JOIN knowledge_sections s ON s.org_id = k.org_id AND s.id = k.id
LEFT JOIN knowledge_documents d ON d.org_id = s.org_id AND d.id = s.document_id
LEFT JOIN knowledge dk ON dk.org_id = s.org_id AND dk.id = s.document_id
WHERE k.org_id = @org_id AND k.id = ANY(@ids::uuid[]);

-- name: SearchTableDocs :one
-- Entries indexed in all orgs: with an org's own count, it tells whether
-- the HNSW scan or an exact scan of the org is the cheaper vector plan.
SELECT coalesce(sum(docs), 0)::bigint FROM knowledge_search_stats;

-- name: LockSearchStats :one
-- The indexer's first statement: the org's statistics row, made on first
-- use with the deployment's text search configuration, and locked, so the
-- indexers of one org take turns and the statistics always equal the index.
-- Other orgs never wait: the row is the org's own.
-- (updated_at through excluded: Citus allows only immutable functions in
-- the DO UPDATE SET of a distributed table.)
INSERT INTO knowledge_search_stats (org_id, config, updated_at)
VALUES (@org_id, @default_config::regconfig, now())
ON CONFLICT (org_id) DO UPDATE SET updated_at = excluded.updated_at
RETURNING docs;

-- name: OrgsWithQueuedEntries :many
-- Orgs with entries waiting for the indexer (a loose index scan would be
-- faster on a huge queue; the queue is short when the indexer keeps up).
SELECT DISTINCT org_id FROM knowledge_index_queue LIMIT @max::int;

-- name: TableActivity :many
-- What changed in the module's tables since their last vacuum and analyze
-- (by us or by autovacuum), for Upkeep: pg_stat_user_tables' counters, read
-- through the functions behind that view.
SELECT c.relname::text AS name,
       pg_stat_get_live_tuples(c.oid)::bigint AS live,
       pg_stat_get_dead_tuples(c.oid)::bigint AS dead,
       pg_stat_get_mod_since_analyze(c.oid)::bigint AS mod_since_analyze,
       pg_stat_get_ins_since_vacuum(c.oid)::bigint AS ins_since_vacuum,
       (pg_stat_get_last_analyze_time(c.oid) IS NOT NULL
        OR pg_stat_get_last_autoanalyze_time(c.oid) IS NOT NULL)::bool AS analyzed,
       -- What the catalog says, which survives a crash, a restore and a
       -- statistics reset (the counters above do not): whether ANALYZE ever
       -- wrote column statistics (not reltuples < 0: CREATE INDEX sets
       -- reltuples too, and Upkeep builds vector indexes on tables nobody
       -- analyzed), the pages seen by the last VACUUM, ANALYZE or CREATE
       -- INDEX and how many of them the visibility map had all-visible
       -- then, and the pages the table has now (its file size, read
       -- without scanning it).
       NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stats s
                   WHERE s.schemaname = c.relnamespace::regnamespace::text AND s.tablename = c.relname)
           AS never_analyzed,
       c.relpages::bigint AS pages_seen,
       c.relallvisible::bigint AS all_visible_seen,
       (pg_catalog.pg_relation_size(c.oid) / current_setting('block_size')::bigint)::bigint AS pages
FROM pg_catalog.pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND c.relname = ANY(@names::text[])
-- Smallest first: a pass that vacuums a bulk load makes the small tables
-- every search reads (the statistics) fast within seconds, instead of
-- after the minutes of the largest.
ORDER BY pages, name;

-- name: ShardActivity :many
-- TableActivity's figures of every shard of the named tables on a Citus
-- cluster, read on the workers (migration 00035): the coordinator's own
-- figures of a distributed table are those of an empty shell. A shard
-- whose worker did not answer has ok false and its error. Smallest first,
-- as TableActivity. No row on a single node.
SELECT a.table_name::text AS table_name, a.shard_id::bigint AS shard_id, a.shard::text AS shard,
       a.node::text AS node, a.port::int AS port, coalesce(a.ok, false)::bool AS ok, coalesce(a.error, '')::text AS error,
       coalesce(a.live, 0)::bigint AS live, coalesce(a.dead, 0)::bigint AS dead,
       coalesce(a.mod_since_analyze, 0)::bigint AS mod_since_analyze, coalesce(a.ins_since_vacuum, 0)::bigint AS ins_since_vacuum,
       coalesce(a.analyzed, false)::bool AS analyzed, coalesce(a.never_analyzed, false)::bool AS never_analyzed,
       coalesce(a.pages_seen, 0)::bigint AS pages_seen, coalesce(a.all_visible_seen, 0)::bigint AS all_visible_seen,
       coalesce(a.pages, 0)::bigint AS pages
FROM knowledge_shard_activity(@names::text[]) AS a (table_name, shard_id, shard, node, port, ok, error, live, dead,
     mod_since_analyze, ins_since_vacuum, analyzed, never_analyzed, pages_seen, all_visible_seen, pages)
ORDER BY pages, shard;

-- name: ShardUpkeep :one
-- VACUUM (ANALYZE) (vacuum) or ANALYZE of one shard, on its worker
-- (migration 00035); it returns the placements done.
SELECT knowledge_shard_upkeep(@shard_id::bigint, @vacuum::bool)::int;

-- name: TextSearchConfigExists :one
-- A text search configuration of that name, visible on the search path.
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_ts_config c
               WHERE c.cfgname = @name::text AND pg_catalog.pg_ts_config_is_visible(c.oid));

-- name: TextSearchConfigs :many
SELECT c.cfgname::text FROM pg_catalog.pg_ts_config c
WHERE pg_catalog.pg_ts_config_is_visible(c.oid) ORDER BY 1;

-- name: ResetSearchIndex :exec
-- The org's index emptied, its statistics zeroed under a new text search
-- configuration; ReindexOrg then queues every entry again. Runs after
-- LockSearchStats in the same transaction.
UPDATE knowledge_search_stats
SET config = @config::regconfig, docs = 0, len_b = 0, len_t = 0, updated_at = now()
WHERE org_id = @org_id;

-- name: DeleteOrgPostings :exec
DELETE FROM knowledge_postings WHERE org_id = @org_id;

-- name: DeleteOrgTermStats :exec
DELETE FROM knowledge_term_stats WHERE org_id = @org_id;

-- name: QueueOrgEntries :execrows
INSERT INTO knowledge_index_queue (org_id, entry_id)
SELECT k.org_id, k.id FROM knowledge k WHERE k.org_id = @org_id
ON CONFLICT (org_id, entry_id) DO NOTHING;

-- name: SearchIndexStatus :one
-- What an operator sees of an org's index: its configuration, entries
-- indexed and still queued.
SELECT coalesce((SELECT s.config::text FROM knowledge_search_stats s WHERE s.org_id = @org_id), '')::text AS config,
       coalesce((SELECT s.docs FROM knowledge_search_stats s WHERE s.org_id = @org_id), 0)::bigint AS indexed,
       (SELECT count(*) FROM knowledge_index_queue q WHERE q.org_id = @org_id)::bigint AS queued;

-- name: OrgsForVectorIndex :many
-- Orgs large enough for an HNSW index of their own but a minority of the
-- table (see maintenance/upkeep.go), largest first.
SELECT s.org_id, s.docs
FROM knowledge_search_stats s
WHERE s.docs >= @min_docs::bigint
  AND s.docs::float8 <= sqlc.arg(max_share)::float8 * (SELECT sum(t.docs) FROM knowledge_search_stats t)::float8
ORDER BY s.docs DESC, s.org_id;

-- name: PairsForVectorIndex :many
-- The metadata pairs searched since @searched_since (epoch seconds) of the
-- orgs of at least @min_docs entries indexed or with entries queued for
-- the indexer (indexing: its size may be a rebuild's count up from 0, ctl
-- search language), carried by at least @min_pair of their entries
-- (every version counts: a count by the pairs' own index alone), with the
-- org's size and the name of the pair's HNSW index in the space of
-- @prefix (maintenance/upkeep.go chooses among them), the org's largest
-- pairs first.
SELECT p.org_id, p.pair, count(*)::bigint AS docs, s.docs AS org_docs,
       knowledge_pair_index_name(@prefix::text, p.org_id, p.pair)::text AS name,
       EXISTS (SELECT 1 FROM knowledge_index_queue q WHERE q.org_id = p.org_id) AS indexing
FROM knowledge_search_stats s
CROSS JOIN LATERAL jsonb_each_text(s.searched_pairs) AS d (pair, at)
JOIN knowledge_metadata_pairs p ON p.org_id = s.org_id AND p.pair = d.pair::bigint
WHERE (s.docs >= @min_docs::bigint OR EXISTS (SELECT 1 FROM knowledge_index_queue q WHERE q.org_id = s.org_id))
  AND d.at::bigint >= @searched_since::bigint
GROUP BY p.org_id, p.pair, s.docs
HAVING count(*) >= @min_pair::bigint
ORDER BY p.org_id, count(*) DESC, p.pair;

-- name: RecordPairSearch :exec
-- A search of the org filtered by @metadata: its pairs searched now, kept
-- with the others, the newest 64 (Upkeep gives the pairs searched lately an HNSW index:
-- db/migrations/00050_pair_vector_indexes.sql). An org without statistics
-- yet (nothing indexed) records nothing.
UPDATE knowledge_search_stats s
SET searched_pairs = (
    SELECT coalesce(jsonb_object_agg(x.pair, x.at), '{}')
    FROM (SELECT a.pair, max(a.at) AS at
          FROM (SELECT e.key AS pair, e.value::bigint AS at FROM jsonb_each_text(s.searched_pairs) AS e
                UNION ALL
                SELECT k::text, extract(epoch FROM now())::bigint FROM unnest(knowledge_metadata_pair_keys(@metadata::jsonb)) AS k) a
          GROUP BY a.pair
          ORDER BY max(a.at) DESC, a.pair
          LIMIT 64) x)
WHERE s.org_id = @org_id;

-- name: OrgPairIndexNames :many
-- The names of the HNSW indexes the org's searched pairs would have in the
-- space of @prefix (built or not: maintenance/language.go looks them up).
SELECT d.pair::bigint AS pair, knowledge_pair_index_name(@prefix::text, s.org_id, d.pair::bigint)::text AS name
FROM knowledge_search_stats s
CROSS JOIN LATERAL jsonb_object_keys(s.searched_pairs) AS d (pair)
WHERE s.org_id = @org_id
ORDER BY 2;

-- name: PairFilter :one
-- The metadata pair @pair of the org as a one-pair object, read from an
-- entry that carries it (ctl search status shows a pair's index with it).
SELECT jsonb_build_object(e.key, e.value)::text AS filter
FROM knowledge_metadata_pairs p
JOIN knowledge k ON k.org_id = p.org_id AND k.id = p.entry_id
CROSS JOIN LATERAL jsonb_each(k.metadata) AS e
WHERE p.org_id = @org_id AND p.pair = @pair::bigint
  AND knowledge_metadata_pair_keys(jsonb_build_object(e.key, e.value)) = ARRAY[@pair::bigint]
LIMIT 1;

-- name: TryLockVectorIndexBuild :one
-- One per-org index build at a time across workers (session lock, held on
-- the build's own connection).
SELECT pg_try_advisory_lock(hashtext('knowledge.upkeep.org_vector_index'));

-- name: UnlockVectorIndexBuild :exec
SELECT pg_advisory_unlock(hashtext('knowledge.upkeep.org_vector_index'));
