-- Each posting carries its entry's metadata signature (msig), so that a
-- search filtered by metadata drops the postings of the entries the filter
-- rejects as it reads them, instead of testing each entry its lists walk
-- against knowledge_metadata_pairs.
--
-- A filter passing one entry in ten left the lexical lists 1.36-1.42x
-- their unfiltered time at 100,000 entries (docs/benchmarks.md, "Entry
-- field filters"): the full-text and title walks probed the pairs of ~1,000
-- entries (a key probe of each of the filter's pairs, ~2 us each) to keep
-- 40 of each. The postings read are the same with or without a filter (a
-- term's best postings by impact, bounded: search_candidates.sql); with
-- the signature the entries scored are only those the filter may pass,
-- and the walks probe nothing before an entry's own row, which tests the
-- metadata itself (metadata @> filter) as before.
--
-- The signature is 32 bits, two of them set per metadata pair (bits of
-- the pair's 64-bit hash, knowledge_metadata_pair_keys): a filter's
-- signature is its pairs', and an entry holding every pair of a filter
-- holds every bit of its signature. An entry without a pair may share the
-- bits (about 3% of entries of three pairs pass a one-pair filter's test
-- wrongly; 10% of entries of six): those reach the row's own test and are
-- rejected there, at the cost of a row read each. An entry's metadata
-- never changes after its insert (00041), and its postings are written
-- once, by the indexer, from its row (maintenance/sql/index_batch.sql):
-- the signature is fixed.
--
-- NULL is "not known": the postings written before this migration were
-- given 0 (no metadata) or their entry's signature below; a build from
-- before it, still indexing during a rolling deploy, writes NULL, and
-- search tests those entries' pairs as it did.
-- +goose Up
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);

-- +goose StatementBegin
CREATE FUNCTION knowledge_metadata_sig(metadata jsonb) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $$
BEGIN
    RETURN (SELECT coalesce(bit_or((1 << (p & 31)::int) | (1 << ((p >> 5) & 31)::int)), 0)
            FROM unnest(knowledge_metadata_pair_keys(metadata)) AS p);
END
$$;
-- +goose StatementEnd

-- The default fills the existing rows without a rewrite (a missing value
-- of the catalog) and is dropped at once: a posting written without the
-- column is NULL, not known.
ALTER TABLE knowledge_postings ADD COLUMN msig integer DEFAULT 0;
ALTER TABLE knowledge_postings ALTER COLUMN msig DROP DEFAULT;

-- On a cluster: the function made on every node before the backfill
-- calls it on the shards.
SELECT knowledge_distribute();

UPDATE knowledge_postings p SET msig = knowledge_metadata_sig(k.metadata)
FROM knowledge k
WHERE k.org_id = p.org_id AND k.id = p.entry_id AND k.metadata <> '{}';

-- The lists read a term's postings by index-only scans of the key
-- (00002): the signature in it too.
ALTER TABLE knowledge_postings DROP CONSTRAINT knowledge_postings_pkey;
ALTER TABLE knowledge_postings ADD CONSTRAINT knowledge_postings_pkey
    PRIMARY KEY (org_id, field, term, impact, entry_id, passage) INCLUDE (tf, len, msig);

-- +goose Down
SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true);
ALTER TABLE knowledge_postings DROP CONSTRAINT knowledge_postings_pkey;
ALTER TABLE knowledge_postings DROP COLUMN msig;
ALTER TABLE knowledge_postings ADD CONSTRAINT knowledge_postings_pkey
    PRIMARY KEY (org_id, field, term, impact, entry_id, passage) INCLUDE (tf, len);
DROP FUNCTION knowledge_metadata_sig(jsonb);
SELECT knowledge_distribute();
