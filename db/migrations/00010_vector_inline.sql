-- Vectors stay inline and uncompressed. 00008 gave the width-free
-- embedding column STORAGE MAIN, so a 3,072-dimension vector (12 KB, more
-- than a page) can be stored at all. But MAIN also lets the toaster
-- compress the vector whenever a row passes toast_tuple_target (2 KB by
-- default), which a 768-dimension vector alone does: a sparse vector (the
-- local embedder's, hashed features) compresses, and the exact scan of an
-- org then decompresses every row: 17.5 ms for 5,000 vectors instead of
-- 8.8 (measured side by side), and the MCP search of a 5,000-entry org
-- went from 10 to 23 ms p50 before any statistics exist.
--
-- toast_tuple_target = 8160 (the most a page allows) makes the toaster act
-- only on rows that would not fit a page: bodies are compressed or moved
-- out first, and a vector up to ~1,900 dimensions is never touched, as
-- with the old STORAGE PLAIN; a wider one is still moved out of line.
-- Rows holding a body of 2-8 KB now keep it inline too, uncompressed:
-- more heap pages for such orgs, and no TOAST fetch for their snippets.
-- Changes rows written from now on; vectors compressed before stay so
-- until they are written again (ctl reembed).
-- +goose Up
ALTER TABLE knowledge SET (toast_tuple_target = 8160);
ALTER TABLE knowledge_chunks SET (toast_tuple_target = 8160);

-- +goose Down
ALTER TABLE knowledge_chunks RESET (toast_tuple_target);
ALTER TABLE knowledge RESET (toast_tuple_target);
