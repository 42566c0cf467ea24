-- Entries, supersession and task links (packages/knowledge).

-- name: GetEntry :one
SELECT * FROM knowledge WHERE org_id = @org_id AND id = @id;
