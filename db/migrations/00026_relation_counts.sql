-- Open relations by type in the org statistics (ctl stats,
-- knowledge://stats; issue 26), kept the way 00007 keeps the entries'
-- counts: a statement-level trigger on knowledge_relations appends the net
-- change of open relations per stored type to knowledge_count_deltas
-- (kind 'relation', key the type), in the writer's transaction, and the
-- worker's upkeep folds them. A link adds one, an unlink (valid_to set)
-- takes one, erasure (forget, purge) takes the open ones it deletes.
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION knowledge_relation_count_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT r.org_id, 'relation', r.type, count(*)
        FROM new_rows r WHERE r.valid_to IS NULL
        GROUP BY 1, 2, 3
        ORDER BY 1, 2, 3;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT r.org_id, 'relation', r.type, -count(*)
        FROM old_rows r WHERE r.valid_to IS NULL
        GROUP BY 1, 2, 3
        ORDER BY 1, 2, 3;
    ELSE
        INSERT INTO knowledge_count_deltas (org_id, kind, key, delta)
        SELECT org_id, 'relation', type, sum(d)
        FROM (
            SELECT r.org_id, r.type, 1 AS d FROM new_rows r WHERE r.valid_to IS NULL
            UNION ALL
            SELECT r.org_id, r.type, -1 FROM old_rows r WHERE r.valid_to IS NULL
        ) x
        GROUP BY 1, 2, 3
        HAVING sum(d) <> 0
        ORDER BY 1, 2, 3;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER knowledge_relation_count_inserts AFTER INSERT ON knowledge_relations
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_relation_count_changes();
CREATE TRIGGER knowledge_relation_count_updates AFTER UPDATE ON knowledge_relations
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_relation_count_changes();
CREATE TRIGGER knowledge_relation_count_deletes AFTER DELETE ON knowledge_relations
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION knowledge_relation_count_changes();

-- +goose Down
DROP TRIGGER knowledge_relation_count_deletes ON knowledge_relations;
DROP TRIGGER knowledge_relation_count_updates ON knowledge_relations;
DROP TRIGGER knowledge_relation_count_inserts ON knowledge_relations;
DROP FUNCTION knowledge_relation_count_changes();
