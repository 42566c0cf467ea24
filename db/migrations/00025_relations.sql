-- Typed relations between entries (issue 26; packages/knowledge/relations.go).
--
-- A relation is (org, from_id, type, to_id) with who made it, when, an
-- optional note and a validity interval: unlink_knowledge closes it
-- (valid_to), it is never deleted, so list_relations and search hops can
-- read the graph as of a past time. Only erasure deletes relation rows:
-- forget and purge erase an entry together with every relation it is an
-- end of (a closed relation to an erased entry would name nothing readable),
-- and the tombstone keeps how many open relations the entry had.
--
-- type is always the canonical name of a catalogue type: a link made with
-- an inverse name (REQUIRED_BY) is stored from the other end (DEPENDS_ON),
-- and a symmetric type is stored with from_id < to_id, so one relation has
-- one row whichever end it was made from and the partial unique key below
-- forbids a second open copy. The built-in catalogue lives in the Go code
-- (knowledge.BuiltinRelationTypes); an org's own types are rows of
-- knowledge_relation_types (ctl relation-type add).
-- +goose Up
CREATE TABLE knowledge_relation_types (
    org_id     uuid        NOT NULL REFERENCES orgs (id),
    name       text        NOT NULL CONSTRAINT knowledge_relation_types_name_check
                               CHECK (char_length(name) BETWEEN 2 AND 48 AND name ~ '^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$'),
    -- The name read from the other end; equal to name for a symmetric type.
    inverse    text        NOT NULL CONSTRAINT knowledge_relation_types_inverse_check
                               CHECK (char_length(inverse) BETWEEN 2 AND 48 AND inverse ~ '^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, name),
    CONSTRAINT knowledge_relation_types_inverse_key UNIQUE (org_id, inverse)
);

CREATE TABLE knowledge_relations (
    org_id              uuid        NOT NULL,
    id                  uuid        NOT NULL DEFAULT gen_random_uuid(),
    from_id             uuid        NOT NULL,
    to_id               uuid        NOT NULL,
    type                text        NOT NULL CONSTRAINT knowledge_relations_type_check
                                        CHECK (char_length(type) BETWEEN 2 AND 48 AND type ~ '^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$'),
    note                text        CONSTRAINT knowledge_relations_note_check CHECK (char_length(note) BETWEEN 1 AND 500),
    created_by_agent_id uuid,
    valid_from          timestamptz NOT NULL DEFAULT now(),
    valid_to            timestamptz,
    closed_by_agent_id  uuid,
    PRIMARY KEY (org_id, id),
    CONSTRAINT knowledge_relations_from_fkey FOREIGN KEY (org_id, from_id) REFERENCES knowledge (org_id, id),
    CONSTRAINT knowledge_relations_to_fkey FOREIGN KEY (org_id, to_id) REFERENCES knowledge (org_id, id),
    CONSTRAINT knowledge_relations_author_fkey FOREIGN KEY (org_id, created_by_agent_id) REFERENCES agents (org_id, id),
    CONSTRAINT knowledge_relations_closer_fkey FOREIGN KEY (org_id, closed_by_agent_id) REFERENCES agents (org_id, id),
    CONSTRAINT knowledge_relations_not_self CHECK (from_id <> to_id),
    CONSTRAINT knowledge_relations_validity CHECK (valid_to IS NULL OR valid_to >= valid_from)
);
-- At most one open relation of a type between two entries.
CREATE UNIQUE INDEX knowledge_relations_open_key ON knowledge_relations (org_id, from_id, type, to_id) WHERE valid_to IS NULL;
-- Both ends, newest first (list_relations' order; search hops read them by
-- equality on the entry, which keeps the index under row-level security).
CREATE INDEX knowledge_relations_from_idx ON knowledge_relations (org_id, from_id, valid_from DESC);
CREATE INDEX knowledge_relations_to_idx ON knowledge_relations (org_id, to_id, valid_from DESC);

-- A forgotten entry's tombstone keeps how many open relations it had.
ALTER TABLE knowledge_tombstones ADD COLUMN relations integer NOT NULL DEFAULT 0 CHECK (relations >= 0);

ALTER TABLE knowledge_relation_types ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_relation_types_org ON knowledge_relation_types USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());
ALTER TABLE knowledge_relations ENABLE ROW LEVEL SECURITY;
CREATE POLICY knowledge_relations_org ON knowledge_relations USING (org_id = app_org_id()) WITH CHECK (org_id = app_org_id());

-- +goose Down
ALTER TABLE knowledge_tombstones DROP COLUMN relations;
DROP TABLE knowledge_relations;
DROP TABLE knowledge_relation_types;
