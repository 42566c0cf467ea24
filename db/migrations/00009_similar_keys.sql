-- store_knowledge's duplicate check (packages/knowledge/similar.go): the
-- locality-sensitive keys of each entry's word set (MinHash, 16 bands of
-- 3), salted with the org, so entries that share most of their words
-- share a key and a GIN look-up finds them in any org size, also when all
-- their words are common ones (the rare-term candidates cannot tell those
-- apart). Written by Store and Correct with the entry; NULL for entries
-- stored before this migration or imported, which Upkeep fills in batches
-- (knowledge_similar_keys_missing_idx finds them, and is empty after).
-- Adding a nullable column without a default rewrites nothing; the GIN
-- index starts empty.
-- +goose Up
ALTER TABLE knowledge ADD COLUMN similar_keys bigint[];
-- fastupdate off: with it, new keys wait in the index's pending list until
-- a VACUUM or a 4 MB list moves them into the tree, and every look-up
-- reads that whole list (NFCorpus loaded and never vacuumed: 5.9 ms a
-- store instead of 1.9). Sixteen tree inserts per stored entry cost less.
CREATE INDEX knowledge_similar_keys_idx ON knowledge USING gin (similar_keys) WITH (fastupdate = off);
CREATE INDEX knowledge_similar_keys_missing_idx ON knowledge (org_id, id) WHERE similar_keys IS NULL;

-- +goose Down
DROP INDEX knowledge_similar_keys_missing_idx;
DROP INDEX knowledge_similar_keys_idx;
ALTER TABLE knowledge DROP COLUMN similar_keys;
