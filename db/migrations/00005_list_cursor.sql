-- list_knowledge pages with an opaque cursor (packages/knowledge/list.go):
-- the position of the last entry of a page, signed so a forged or altered
-- cursor is refused instead of read. The key must be the same for every
-- MCP replica and survive restarts, so it lives in the database, made once
-- here from the server's random generator (gen_random_uuid: 122 random
-- bits each, 244 together).
-- +goose Up
CREATE TABLE knowledge_secrets (
    name  text  PRIMARY KEY,
    value bytea NOT NULL CHECK (octet_length(value) >= 16)
);
INSERT INTO knowledge_secrets (name, value)
VALUES ('list_cursor', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- +goose Down
DROP TABLE knowledge_secrets;
