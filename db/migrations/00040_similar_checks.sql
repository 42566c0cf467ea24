-- The duplicate check by meaning, finished after the store's answer
-- (issue 37; packages/knowledge/entries/finish.go, docs/knowledge.md
-- "Duplicates at store time").
--
-- A store does not wait for the embedding provider unless its caller asks
-- (ifSimilar: report or skip): it answers with the check by words and by a
-- vector already at hand, and when the meaning side is missing it writes a
-- pending row here, in its own transaction. The embeddings worker, once it
-- has written the entry's vector, compares it with the org's vectors, writes
-- what it found into knowledge_similar and marks the row done;
-- get_knowledge shows both.
--
--   knowledge_similar_checks  one row per entry whose check the worker owes
--                             or finished: no text, ids and times only.
--                             Its own table, not a column of knowledge: the
--                             worker's update of a knowledge row would be a
--                             new version in every index of the table (HNSW,
--                             GIN) and a run of its update triggers.
--   knowledge_similar         what a finished check found: the other entry
--                             and the score, never a title (read at get
--                             time from the row, so an erased entry's title
--                             is nowhere).
--
-- Both go with the entries they name: ON DELETE CASCADE from knowledge, on
-- either end of a pair, so forget and purge (which delete the knowledge
-- row) erase them without a statement of their own.
-- +goose Up
CREATE TABLE knowledge_similar_checks (
    org_id       uuid        NOT NULL,
    entry_id     uuid        NOT NULL,
    state        text        NOT NULL DEFAULT 'pending'
                             CONSTRAINT knowledge_similar_checks_state_check CHECK (state IN ('pending', 'done')),
    requested_at timestamptz NOT NULL,
    checked_at   timestamptz,
    PRIMARY KEY (org_id, entry_id),
    CONSTRAINT knowledge_similar_checks_entry_fkey FOREIGN KEY (org_id, entry_id) REFERENCES knowledge (org_id, id) ON DELETE CASCADE,
    CONSTRAINT knowledge_similar_checks_done CHECK ((state = 'done') = (checked_at IS NOT NULL))
);
-- The worker's sweep of checks left pending (oldest first): small, the
-- checks not finished yet.
CREATE INDEX knowledge_similar_checks_pending_idx ON knowledge_similar_checks (requested_at) WHERE state = 'pending';

CREATE TABLE knowledge_similar (
    org_id     uuid NOT NULL,
    entry_id   uuid NOT NULL,
    similar_id uuid NOT NULL,
    score      real NOT NULL CONSTRAINT knowledge_similar_score_check CHECK (score > 0 AND score <= 1),
    PRIMARY KEY (org_id, entry_id, similar_id),
    CONSTRAINT knowledge_similar_check_fkey FOREIGN KEY (org_id, entry_id) REFERENCES knowledge_similar_checks (org_id, entry_id) ON DELETE CASCADE,
    CONSTRAINT knowledge_similar_similar_fkey FOREIGN KEY (org_id, similar_id) REFERENCES knowledge (org_id, id) ON DELETE CASCADE,
    CONSTRAINT knowledge_similar_not_self CHECK (entry_id <> similar_id)
);
-- The cascade from an erased entry listed by others.
CREATE INDEX knowledge_similar_similar_idx ON knowledge_similar (org_id, similar_id);

ALTER TABLE knowledge_similar_checks ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_similar_checks_org ON knowledge_similar_checks USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_similar ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_similar_org ON knowledge_similar USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());

-- On a cluster: distributed by org_id, co-located with knowledge (00027).
SELECT knowledge_distribute();

-- +goose Down
DROP TABLE knowledge_similar;
DROP TABLE knowledge_similar_checks;
