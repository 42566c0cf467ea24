-- Long entries are scored by their best passage (docs/knowledge.md,
-- "Long entries"). A body longer than a passage is indexed as overlapping
-- passages of about 2,000 characters, each with its own term counts and
-- length, and an entry's full-text BM25 is that of its best passage. Over
-- the whole body, a long entry's evidence was divided by its length: a
-- 29,000-character report holding every query word in its last paragraph
-- scored 1.21 where the same paragraph alone scores several times more,
-- and ranked last of 21 (issue 23). Title and body are one text per
-- passage (the title is every passage's context), as before for the body.
--
-- Statistics stay per entry: document frequency counts entries, and each
-- entry adds the mean length of its passages to len_b, so the average
-- length BM25 normalises by is that of a passage-sized unit (an entry of
-- one passage adds its length, as before). Bodies of at most a passage,
-- nearly every knowledge entry, are indexed exactly as before.

-- +goose Up
-- knowledge_passages: body cut into passages of at most 2,000 characters,
-- each ending at the last white space of its second half (a word is not
-- cut unless the passage has no white space there), each the next one's
-- first ~500 characters too, so a span of up to 500 characters lies whole
-- in some passage. A body of at most 2,000 characters is passage 0 alone.
-- +goose StatementBegin
CREATE FUNCTION knowledge_passages(body text)
RETURNS TABLE (passage integer, part text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
-- Most bodies are one passage. The planner's default for a set-returning
-- function, 1,000 rows, made every statement analysing an entry look a
-- thousand times dearer: past jit_above_cost, and purge spent 2 s a call
-- compiling JIT code for a few rows.
ROWS 1
AS $$
DECLARE
    size    constant integer := 2000;
    overlap constant integer := 500;
    n       integer := length(body);
    s       integer := 1;
    seg     text;
    cut     integer;
    skip    integer;
BEGIN
    passage := 0;
    IF n <= size THEN
        part := body;
        RETURN NEXT;
        RETURN;
    END IF;
    LOOP
        IF s + size - 1 >= n THEN
            part := substr(body, s);
            RETURN NEXT;
            RETURN;
        END IF;
        seg := substr(body, s, size);
        cut := length(regexp_replace(seg, '\s\S*$', ''));
        IF cut < size / 2 THEN
            cut := size;
        END IF;
        part := substr(seg, 1, cut);
        RETURN NEXT;
        passage := passage + 1;
        s := s + cut - overlap;
        -- Start the next passage at a word: after the first white space of
        -- the overlap, if it has one.
        skip := position(' ' IN substr(body, s, overlap));
        IF skip > 0 THEN
            s := s + skip;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- knowledge_passage_terms: knowledge_terms by passage, the analysis of the
-- index (the indexer, search's tail of queued entries, purge): field 't'
-- (the title) in passage 0, field 'b' (title and passage) in each passage.
-- +goose StatementBegin
CREATE FUNCTION knowledge_passage_terms(cfg regconfig, title text, body text)
RETURNS TABLE (field "char", passage integer, term text, tf integer, len integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT a.field, p.passage, a.term, a.tf, a.len
    FROM knowledge_passages(coalesce(body, '')) p
    CROSS JOIN LATERAL knowledge_terms(cfg, title, p.part) AS a (field, term, tf, len)
    WHERE a.field = 'b' OR p.passage = 0
$$;
-- +goose StatementEnd

ALTER TABLE knowledge_postings ADD COLUMN passage smallint NOT NULL DEFAULT 0;
ALTER TABLE knowledge_postings DROP CONSTRAINT knowledge_postings_pkey;
ALTER TABLE knowledge_postings ADD CONSTRAINT knowledge_postings_pkey
    PRIMARY KEY (org_id, field, term, impact, entry_id, passage) INCLUDE (tf, len);

-- Orgs holding a body longer than a passage were indexed whole: their
-- index is rebuilt, as `ctl search language` does (emptied, statistics
-- zeroed, every entry queued again for the worker's indexer; meanwhile
-- search scores the newest queued entries on the fly). Other orgs' indexes
-- are already what the indexer writes now.
DELETE FROM knowledge_postings
WHERE org_id IN (SELECT DISTINCT org_id FROM knowledge WHERE octet_length(body) > 2000 AND length(body) > 2000);
DELETE FROM knowledge_term_stats
WHERE org_id IN (SELECT DISTINCT org_id FROM knowledge WHERE octet_length(body) > 2000 AND length(body) > 2000);
UPDATE knowledge_search_stats SET docs = 0, len_b = 0, len_t = 0, updated_at = now()
WHERE org_id IN (SELECT DISTINCT org_id FROM knowledge WHERE octet_length(body) > 2000 AND length(body) > 2000);
INSERT INTO knowledge_index_queue (org_id, entry_id)
SELECT k.org_id, k.id FROM knowledge k
WHERE k.org_id IN (SELECT DISTINCT org_id FROM knowledge WHERE octet_length(body) > 2000 AND length(body) > 2000)
ON CONFLICT (org_id, entry_id) DO NOTHING;

-- +goose Down
-- Orgs indexed by passage are rebuilt whole, as on the way up.
DELETE FROM knowledge_postings
WHERE org_id IN (SELECT DISTINCT org_id FROM knowledge WHERE octet_length(body) > 2000 AND length(body) > 2000);
DELETE FROM knowledge_term_stats
WHERE org_id IN (SELECT DISTINCT org_id FROM knowledge WHERE octet_length(body) > 2000 AND length(body) > 2000);
UPDATE knowledge_search_stats SET docs = 0, len_b = 0, len_t = 0, updated_at = now()
WHERE org_id IN (SELECT DISTINCT org_id FROM knowledge WHERE octet_length(body) > 2000 AND length(body) > 2000);
INSERT INTO knowledge_index_queue (org_id, entry_id)
SELECT k.org_id, k.id FROM knowledge k
WHERE k.org_id IN (SELECT DISTINCT org_id FROM knowledge WHERE octet_length(body) > 2000 AND length(body) > 2000)
ON CONFLICT (org_id, entry_id) DO NOTHING;

ALTER TABLE knowledge_postings DROP CONSTRAINT knowledge_postings_pkey;
ALTER TABLE knowledge_postings ADD CONSTRAINT knowledge_postings_pkey
    PRIMARY KEY (org_id, field, term, impact, entry_id) INCLUDE (tf, len);
ALTER TABLE knowledge_postings DROP COLUMN passage;
DROP FUNCTION knowledge_passage_terms(regconfig, text, text);
DROP FUNCTION knowledge_passages(text);
