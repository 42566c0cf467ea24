-- An upload's parts in order (packages/knowledge/uploadfinish.go): one row
-- a part, read as they arrive, so the finish copies each into the document
-- and holds no list of parts. One range of the parts' primary key.
-- $1: the org, $2: the upload.
SELECT content FROM knowledge_document_upload_parts
WHERE org_id = $1 AND upload_id = $2
ORDER BY index
