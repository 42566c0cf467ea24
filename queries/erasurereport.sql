-- The erasure report's reads of an entry (packages/knowledge/erasure,
-- report.go); the scan of every table is built from the catalogue there.

-- name: ErasureEntryText :one
-- An entry's text, to scan for: its title, body and tags, if it is stored
-- in the org.
SELECT title, body, tags FROM knowledge WHERE org_id = @org_id AND id = @id;

-- name: WordsOnlyInEntry :many
-- The words of @words that no other entry of the org holds (in its title,
-- body or tags, case-insensitively): what is the entry's own to scan for.
-- One pass over the org's entries.
SELECT w::text AS word
FROM unnest(@words::text[]) AS w
WHERE NOT EXISTS (
  SELECT 1 FROM knowledge k
  WHERE k.org_id = @org_id AND k.id <> @id
    AND strpos(lower(k.title || ' ' || k.body || ' ' || array_to_string(k.tags, ' ')), w) > 0
);
