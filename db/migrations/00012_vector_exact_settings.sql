-- The exact vector function carries every planner setting its plan depends
-- on. It turned off sequential and plain index scans, so that its plan is
-- a bitmap of the org's rows and a sort, and took the other settings from
-- the statement calling it. The vector list's statement
-- (packages/knowledge/sql/search_vector.sql) now runs with bitmap scans and
-- sorts off (SearchConfig's pin, for its own HNSW scans): inside the
-- function every way to read the org was then off, and the planner read
-- the whole table for each chunk's entry probe (NFCorpus, 3,633 entries
-- and 582 chunks: 75 ms instead of 13). A function's settings are its own
-- from here on, whatever the caller's; a later CREATE OR REPLACE of it must
-- repeat them (it replaces the function's SET clauses).
-- +goose Up
ALTER FUNCTION knowledge_vector_exact(uuid, vector, text, text[], bool, bool, int)
    SET enable_bitmapscan = on;
ALTER FUNCTION knowledge_vector_exact(uuid, vector, text, text[], bool, bool, int)
    SET enable_sort = on;

-- +goose Down
ALTER FUNCTION knowledge_vector_exact(uuid, vector, text, text[], bool, bool, int)
    RESET enable_bitmapscan;
ALTER FUNCTION knowledge_vector_exact(uuid, vector, text, text[], bool, bool, int)
    RESET enable_sort;
