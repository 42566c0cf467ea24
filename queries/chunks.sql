-- Chunks of long entries (packages/knowledge/outbox/chunk.go, jobs/handler.go;
-- db/migrations/00008_embedding_width.sql).

-- name: InsertChunk :exec
INSERT INTO knowledge_chunks (org_id, entry_id, chunk, start_char, end_char, embedding_model, embedding)
VALUES (@org_id, @entry_id, @chunk, @start_char, @end_char, @embedding_model, @embedding);

-- name: SearchBodiesNear :many
-- The bodies of the hits an answer returns, for their snippets, and for
-- each the span of its chunk nearest the query vector when that chunk is
-- nearer than the entry's own vector (its first chunk): the snippet of a
-- hit found by a later chunk is centred on that chunk (-1: none is
-- nearer). Only vectors of the query's model and width are compared.
--
-- A hit's chunks are found by the primary key (org, entry): a handful of
-- rows. The model and width are tested in the filter (the CASE), not as
-- conditions an index could take: as such the space index (org, model,
-- width) matched one more column than the key, and without statistics
-- the planner took it and read every chunk of the org for each hit (3 ms
-- for 10 hits of an org of 988 chunks, growing with the org).
--
-- The document of a hit that is a section comes in the same round trip
-- (doc_*: SectionsDocuments' columns, by primary key; NULL for an entry
-- that is no section).
--
-- Each hit is one probe of the primary key (a LATERAL under LIMIT 1): as
-- "k.id = ANY(@ids)" the plan a connection keeps read the org's entries
-- through another index of the org and kept the hits, in orgs of a few
-- thousand entries never analyzed (TestSearchHopsReadOnlyTheEntriesReached
-- counts the rows a scan's filter removed).
SELECT k.id, k.body, k.source, k.kind, k.metadata, coalesce(b.start_char, -1)::int AS start_char, coalesce(b.end_char, -1)::int AS end_char,
       s.document_id AS doc_id, s.heading_path AS doc_heading_path, s.position AS doc_position, s.ended_how AS doc_ended_how,
       dk.title AS doc_title, d.source AS doc_source, (d.id IS NOT NULL AND dk.id IS NOT NULL) AS doc_found
FROM unnest(@ids::uuid[]) AS h (id)
CROSS JOIN LATERAL (
    SELECT k.org_id, k.id, k.body, k.source, k.kind, k.metadata, k.embedding, k.embedding_model
    FROM knowledge k
    WHERE k.org_id = @org_id AND k.id = h.id
    LIMIT 1
) k
LEFT JOIN knowledge_sections s ON s.org_id = k.org_id AND s.id = k.id
LEFT JOIN knowledge_documents d ON d.org_id = s.org_id AND d.id = s.document_id
LEFT JOIN knowledge dk ON dk.org_id = s.org_id AND dk.id = s.document_id
LEFT JOIN LATERAL (
    SELECT c.start_char, c.end_char
    FROM knowledge_chunks c
    WHERE c.org_id = @org_id AND c.entry_id = k.id
      AND k.embedding IS NOT NULL
      AND CASE WHEN c.embedding_model = @model::text AND vector_dims(c.embedding) = vector_dims(@query_vec::vector)
               THEN c.embedding <=> @query_vec::vector
                    < CASE WHEN k.embedding_model = @model::text AND vector_dims(k.embedding) = vector_dims(@query_vec::vector)
                           THEN k.embedding <=> @query_vec::vector ELSE 'Infinity'::float8 END
               ELSE false END
    ORDER BY c.embedding <=> @query_vec::vector
    LIMIT 1
) b ON true;

-- name: ChunkStorage :one
-- Bytes and rows of the chunks table, its indexes included (benchmarks).
SELECT pg_total_relation_size('knowledge_chunks')::bigint AS bytes, (SELECT count(*) FROM knowledge_chunks)::bigint AS chunks;
