-- Typed relations between entries (packages/knowledge/relations.go).
--
-- Every look-up is by equality on the org and an entry id (btree), so the
-- indexes serve knowledge_app under row-level security too.

-- name: ListOrgRelationTypes :many
-- The org's own relation types (ctl relation-type add); the built-in
-- catalogue is in the Go code.
SELECT name, inverse, created_at
FROM knowledge_relation_types
WHERE org_id = @org_id
ORDER BY name;

-- name: LockOrgRelationTypes :exec
-- Serialises additions of relation types in one org, so two operators
-- cannot add clashing names at once.
SELECT pg_advisory_xact_lock(hashtext('knowledge.relation_types'), hashtext(@org_id::text));

-- name: InsertRelationType :one
INSERT INTO knowledge_relation_types (org_id, name, inverse)
VALUES (@org_id, @name, @inverse)
RETURNING name, inverse, created_at;

-- name: LockRelationEnds :many
-- The two ends of a link or unlink, locked in id order (as supersede and
-- purge lock entries) against a concurrent forget or purge, which deletes
-- them FOR UPDATE: a link either commits before the erasure (which then
-- deletes the relation with the entry) or finds the entry gone. FOR NO KEY
-- UPDATE also serialises links on one entry, so the per-entry cap is exact;
-- it does not block the foreign-key checks of other writers (KEY SHARE).
SELECT id, created_at
FROM knowledge
WHERE org_id = @org_id AND id = ANY(@ids::uuid[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: CountOpenRelations :one
-- Open relations each end already has, for the per-entry cap.
SELECT (SELECT count(*) FROM knowledge_relations r
        WHERE r.org_id = @org_id AND r.valid_to IS NULL AND (r.from_id = @a OR r.to_id = @a))::bigint AS a_count,
       (SELECT count(*) FROM knowledge_relations r
        WHERE r.org_id = @org_id AND r.valid_to IS NULL AND (r.from_id = @b OR r.to_id = @b))::bigint AS b_count;

-- name: InsertRelation :one
-- No row back: the same relation is already open (answered with existed).
INSERT INTO knowledge_relations (org_id, from_id, to_id, type, note, created_by_agent_id)
VALUES (@org_id, @from_id, @to_id, @type, sqlc.narg(note)::text, sqlc.narg(agent_id)::uuid)
ON CONFLICT (org_id, from_id, type, to_id) WHERE valid_to IS NULL DO NOTHING
RETURNING id, from_id, to_id, type, note, created_by_agent_id, valid_from, valid_to, closed_by_agent_id;

-- name: InsertRelationCapped :one
-- link_knowledge's one write after the ends are locked: the relation, if
-- neither end already has @max_open open relations (the per-entry cap,
-- counted after the lock, in this statement's snapshot) and it is not
-- open already. No row back: one of the two; the caller asks which (rare).
-- The row is read from the from end's entry (locked before) and its id
-- given by the caller: on a Citus cluster an INSERT ... SELECT is routed
-- whole to the org's worker only when it reads a co-located table and
-- calls no volatile function (the column's default, gen_random_uuid()),
-- and its RETURNING names the target by an alias (InsertDocumentEntries).
-- The interval starts at the later of now() and the end of the relation's
-- last interval: now() is the transaction's start, which can precede the
-- unlink that this link waited for on the ends' locks, and the relation's
-- history is a sequence of intervals that never overlap.
INSERT INTO knowledge_relations AS ins (org_id, id, from_id, to_id, type, note, created_by_agent_id, valid_from)
SELECT k.org_id, @id, @from_id, @to_id, @type, sqlc.narg(note)::text, sqlc.narg(agent_id)::uuid,
       greatest(now(), (SELECT max(p.valid_to) FROM knowledge_relations p
                        WHERE p.org_id = @org_id AND p.from_id = @from_id AND p.type = @type AND p.to_id = @to_id))
FROM knowledge k
WHERE k.org_id = @org_id AND k.id = @from_id
  AND (SELECT count(*) FROM knowledge_relations r
       WHERE r.org_id = @org_id AND r.valid_to IS NULL AND (r.from_id = @from_id OR r.to_id = @from_id)) < @max_open::bigint
  AND (SELECT count(*) FROM knowledge_relations r
       WHERE r.org_id = @org_id AND r.valid_to IS NULL AND (r.from_id = @to_id OR r.to_id = @to_id)) < @max_open::bigint
ON CONFLICT (org_id, from_id, type, to_id) WHERE valid_to IS NULL DO NOTHING
RETURNING ins.id, ins.from_id, ins.to_id, ins.type, ins.note, ins.created_by_agent_id, ins.valid_from, ins.valid_to, ins.closed_by_agent_id;

-- name: GetOpenRelation :one
SELECT id, from_id, to_id, type, note, created_by_agent_id, valid_from, valid_to, closed_by_agent_id
FROM knowledge_relations
WHERE org_id = @org_id AND from_id = @from_id AND type = @type AND to_id = @to_id AND valid_to IS NULL;

-- name: CloseRelation :one
-- unlink_knowledge: the open relation ends now; its row stays (history).
UPDATE knowledge_relations
SET valid_to = greatest(now(), valid_from), closed_by_agent_id = sqlc.narg(agent_id)::uuid
WHERE org_id = @org_id AND from_id = @from_id AND type = @type AND to_id = @to_id AND valid_to IS NULL
RETURNING id, from_id, to_id, type, note, created_by_agent_id, valid_from, valid_to, closed_by_agent_id;

-- name: LastClosedRelation :one
-- A repeated unlink answers the relation it closed before.
SELECT id, from_id, to_id, type, note, created_by_agent_id, valid_from, valid_to, closed_by_agent_id
FROM knowledge_relations
WHERE org_id = @org_id AND from_id = @from_id AND type = @type AND to_id = @to_id AND valid_to IS NOT NULL
ORDER BY valid_to DESC
LIMIT 1;

-- name: ListRelations :many
-- list_relations: an entry's relations, newest first, keyset-paged on
-- (valid_from, key). Stored relations are read from either end (out: the
-- entry is from_id; in: to_id); supersession gives the derived, read-only
-- SUPERSEDES (the entry replaced other_id) and SUPERSEDED_BY rows. A
-- symmetric type (@sym_types) is read in any direction.
--
-- Each branch reads its end's index in valid_from order from the cursor
-- on and stops after @max_rows rows (and those tied with the last: the
-- page's order breaks ties by key), so the first page of an entry with
-- 1,000 relations reads about a page of rows, not 1,000; the branches'
-- rows are then ordered and cut, and only the page's other entries are
-- joined.
WITH rel AS (
    (SELECT 'r' || r.id::text AS key, r.type, 'out'::text AS dir, r.to_id AS other_id, r.note,
            r.created_by_agent_id, r.valid_from, r.valid_to
     FROM knowledge_relations r
     WHERE r.org_id = @org_id AND r.from_id = @id
       AND r.valid_from <= coalesce(sqlc.narg(after_time)::timestamptz, 'infinity')
       AND (sqlc.narg(after_time)::timestamptz IS NULL OR (r.valid_from, 'r' || r.id::text) < (sqlc.narg(after_time)::timestamptz, @after_key::text))
       AND (@want_out::bool OR r.type = ANY(@sym_types::text[]))
       AND (sqlc.narg(out_types)::text[] IS NULL OR r.type = ANY(sqlc.narg(out_types)::text[]))
       AND (sqlc.narg(as_of)::timestamptz IS NULL OR r.valid_from <= sqlc.narg(as_of)::timestamptz)
       AND (@include_closed::bool OR r.valid_to IS NULL OR r.valid_to > coalesce(sqlc.narg(as_of)::timestamptz, 'infinity'))
     ORDER BY r.valid_from DESC
     FETCH FIRST (@max_rows::int) ROWS WITH TIES)
    UNION ALL
    (SELECT 'r' || r.id::text, r.type, 'in'::text, r.from_id, r.note,
            r.created_by_agent_id, r.valid_from, r.valid_to
     FROM knowledge_relations r
     WHERE r.org_id = @org_id AND r.to_id = @id
       AND r.valid_from <= coalesce(sqlc.narg(after_time)::timestamptz, 'infinity')
       AND (sqlc.narg(after_time)::timestamptz IS NULL OR (r.valid_from, 'r' || r.id::text) < (sqlc.narg(after_time)::timestamptz, @after_key::text))
       AND (@want_in::bool OR r.type = ANY(@sym_types::text[]))
       AND (sqlc.narg(in_types)::text[] IS NULL OR r.type = ANY(sqlc.narg(in_types)::text[]))
       AND (sqlc.narg(as_of)::timestamptz IS NULL OR r.valid_from <= sqlc.narg(as_of)::timestamptz)
       AND (@include_closed::bool OR r.valid_to IS NULL OR r.valid_to > coalesce(sqlc.narg(as_of)::timestamptz, 'infinity'))
     ORDER BY r.valid_from DESC
     FETCH FIRST (@max_rows::int) ROWS WITH TIES)
    UNION ALL
    SELECT 's' || s.old_id::text, 'SUPERSEDES'::text, 'out'::text, s.old_id, NULL::text,
           s.agent_id, s.created_at, NULL::timestamptz
    FROM knowledge_supersessions s
    WHERE s.org_id = @org_id AND s.new_id = @id AND @want_supersedes::bool
      AND (sqlc.narg(as_of)::timestamptz IS NULL OR s.created_at <= sqlc.narg(as_of)::timestamptz)
    UNION ALL
    SELECT 's' || s.old_id::text, 'SUPERSEDES'::text, 'in'::text, s.new_id, NULL::text,
           s.agent_id, s.created_at, NULL::timestamptz
    FROM knowledge_supersessions s
    WHERE s.org_id = @org_id AND s.old_id = @id AND @want_superseded_by::bool
      AND (sqlc.narg(as_of)::timestamptz IS NULL OR s.created_at <= sqlc.narg(as_of)::timestamptz)
),
page AS (
    SELECT * FROM rel
    WHERE sqlc.narg(after_time)::timestamptz IS NULL
       OR (rel.valid_from, rel.key) < (sqlc.narg(after_time)::timestamptz, @after_key::text)
    ORDER BY rel.valid_from DESC, rel.key DESC
    LIMIT @max_rows
)
SELECT p.key::text AS key, p.type::text AS type, p.dir::text AS dir, p.other_id::uuid AS other_id,
       p.valid_from::timestamptz AS valid_from, p.note, p.created_by_agent_id, p.valid_to,
       k.title, k.superseded_by, k.expires_at
FROM page p
-- Each by the primary key: as a join, the planner, believing an org's rows
-- few on tables never analyzed, read the org's entries for the page.
CROSS JOIN LATERAL (SELECT k.title, k.superseded_by, k.expires_at FROM knowledge k
                    WHERE k.org_id = @org_id AND k.id = p.other_id LIMIT 1) k
ORDER BY p.valid_from DESC, p.key DESC;

-- name: RelationCounts :many
-- get_knowledge's summary: the entry's open relations by stored type and
-- end, and its supersession edges.
SELECT x.type::text AS type, x.dir::text AS dir, count(*)::bigint AS n
FROM (
    SELECT r.type, 'out' AS dir FROM knowledge_relations r
    WHERE r.org_id = @org_id AND r.from_id = @id AND r.valid_to IS NULL
    UNION ALL
    SELECT r.type, 'in' FROM knowledge_relations r
    WHERE r.org_id = @org_id AND r.to_id = @id AND r.valid_to IS NULL
    UNION ALL
    SELECT 'SUPERSEDES', 'out' FROM knowledge_supersessions s
    WHERE s.org_id = @org_id AND s.new_id = @id
    UNION ALL
    SELECT 'SUPERSEDES', 'in' FROM knowledge_supersessions s
    WHERE s.org_id = @org_id AND s.old_id = @id
) x
GROUP BY x.type, x.dir
ORDER BY 1, 2;

-- name: PurgeDeleteRelations :one
-- Erasure (forget, purge) takes every relation the erased entries are an
-- end of, open or closed; open counts what a tombstone keeps.
WITH d AS (
    DELETE FROM knowledge_relations r
    WHERE r.org_id = @org_id AND (r.from_id = ANY(@ids::uuid[]) OR r.to_id = ANY(@ids::uuid[]))
    RETURNING r.valid_to
)
SELECT count(*)::bigint AS total, (count(*) FILTER (WHERE d.valid_to IS NULL))::bigint AS open FROM d;

-- name: PurgeCountRelations :one
-- Dry run: the relations the erased entries take along.
SELECT count(*)::bigint
FROM knowledge_relations r
WHERE r.org_id = @org_id AND (r.from_id = ANY(@ids::uuid[]) OR r.to_id = ANY(@ids::uuid[]));

-- name: SearchHop :many
-- One hop of a search that follows relations (search_knowledge hops > 0):
-- from the frontier entries, their relations valid now (or at @as_of) of
-- the allowed types (@out_types read from the frontier as from_id,
-- @in_types as to_id; NULL: every type), at most @per_entry of each
-- direction per frontier entry (newest first): the bound on edges read.
-- A reached entry that was superseded (by @as_of) stands for its chain's
-- head unless @include_superseded; what is answered passes the search's
-- filters (tags, created by @as_of, superseded, expired, the entry fields',
-- the document's). Every look-up is
-- by equality on (org_id, from_id | to_id | id), so the indexes serve
-- knowledge_app under row-level security. The entries reached, then the
-- ones they stand for, are each one probe of the primary key (a LATERAL
-- under LIMIT 1): joined to the org's entries, the planner (believing an
-- org's rows few on tables never analyzed) read the org once for each of
-- them, and as "id = ANY(ARRAY(...))" the plan a connection keeps read the
-- org's entries through another index of the org and kept those
-- (TestSearchHopsReadOnlyTheEntriesReached, which counts the rows a scan's
-- filter removed).
WITH f AS (
    SELECT DISTINCT unnest(@ids::uuid[]) AS id
),
e AS MATERIALIZED (
    SELECT f.id AS src, o.type, 'out'::text AS dir, o.to_id AS reached
    FROM f CROSS JOIN LATERAL (
        SELECT r.type, r.to_id FROM knowledge_relations r
        WHERE r.org_id = @org_id AND r.from_id = f.id
          AND (sqlc.narg(out_types)::text[] IS NULL OR r.type = ANY(sqlc.narg(out_types)::text[]))
          AND (sqlc.narg(as_of)::timestamptz IS NULL OR r.valid_from <= sqlc.narg(as_of)::timestamptz)
          AND (r.valid_to IS NULL OR r.valid_to > coalesce(sqlc.narg(as_of)::timestamptz, 'infinity'))
        ORDER BY r.valid_from DESC
        LIMIT @per_entry
    ) o
    UNION ALL
    SELECT f.id, i.type, 'in'::text, i.from_id
    FROM f CROSS JOIN LATERAL (
        SELECT r.type, r.from_id FROM knowledge_relations r
        WHERE r.org_id = @org_id AND r.to_id = f.id
          AND (sqlc.narg(in_types)::text[] IS NULL OR r.type = ANY(sqlc.narg(in_types)::text[]))
          AND (sqlc.narg(as_of)::timestamptz IS NULL OR r.valid_from <= sqlc.narg(as_of)::timestamptz)
          AND (r.valid_to IS NULL OR r.valid_to > coalesce(sqlc.narg(as_of)::timestamptz, 'infinity'))
        ORDER BY r.valid_from DESC
        LIMIT @per_entry
    ) i
),
reached AS MATERIALIZED (
    SELECT k.id,
           CASE WHEN NOT @include_superseded::bool AND k.head_id IS NOT NULL
                     AND k.superseded_at <= coalesce(sqlc.narg(as_of)::timestamptz, 'infinity')
                THEN k.head_id ELSE k.id END AS target
    FROM (SELECT DISTINCT e.reached FROM e) r
    CROSS JOIN LATERAL (
        SELECT k.id, k.head_id, k.superseded_at FROM knowledge k
        WHERE k.org_id = @org_id AND k.id = r.reached
        LIMIT 1
    ) k
),
targets AS MATERIALIZED (
    SELECT t.id, t.title, t.tags, t.confidence, t.created_at, t.expires_at, t.head_id, t.embedding_status,
           t.superseded_at, t.kind, t.source, t.metadata
    FROM (SELECT DISTINCT reached.target FROM reached) r
    CROSS JOIN LATERAL (
        SELECT t.id, t.title, t.tags, t.confidence, t.created_at, t.expires_at, t.head_id, t.embedding_status,
               t.superseded_at, t.kind, t.source, t.metadata
        FROM knowledge t
        WHERE t.org_id = @org_id AND t.id = r.target
        LIMIT 1
    ) t
)
SELECT e.src::uuid AS src, e.type::text AS type, e.dir::text AS dir, e.reached::uuid AS reached,
       t.id, t.title, t.tags, t.confidence, t.created_at, t.expires_at, t.head_id, t.embedding_status
FROM e
JOIN reached k ON k.id = e.reached
JOIN targets t ON t.id = k.target
WHERE (cardinality(@tags::text[]) = 0 OR t.tags @> @tags::text[])
  AND (sqlc.narg(as_of)::timestamptz IS NULL OR t.created_at <= sqlc.narg(as_of)::timestamptz)
  AND (@include_superseded::bool OR t.superseded_at IS NULL OR t.superseded_at > coalesce(sqlc.narg(as_of)::timestamptz, 'infinity'))
  AND (@include_expired::bool OR t.expires_at IS NULL OR t.expires_at > coalesce(sqlc.narg(as_of)::timestamptz, now()))
  AND (sqlc.narg(kind)::text IS NULL OR t.kind = sqlc.narg(kind)::text)
  AND (sqlc.narg(source)::text IS NULL OR t.source = sqlc.narg(source)::text)
  AND (sqlc.narg(source_prefix)::text IS NULL OR starts_with(t.source, sqlc.narg(source_prefix)::text))
  AND (sqlc.narg(metadata)::jsonb IS NULL OR t.metadata @> sqlc.narg(metadata)::jsonb)
  -- The search's match set (a document's sections, a selective filter's
  -- matches: packages/knowledge/search/filtersearch.go); NULL: none.
  AND (sqlc.narg(within)::uuid[] IS NULL OR t.id = ANY(sqlc.narg(within)::uuid[]));

-- name: ExportRelationTypes :many
SELECT name, inverse FROM knowledge_relation_types WHERE org_id = @org_id ORDER BY name;

-- name: ExportRelations :many
-- Every relation of the org, open and closed (the history), by id.
SELECT id, from_id, to_id, type, note, created_by_agent_id, valid_from, valid_to, closed_by_agent_id
FROM knowledge_relations
WHERE org_id = @org_id AND id > @after
ORDER BY id
LIMIT @max_rows;

-- name: ImportRelations :many
-- What the org has already (the same id, or the same relation open) is
-- skipped. Empty strings and the nil UUID stand for NULL in the arrays.
-- Returns what it wrote (ImportSupersessions).
INSERT INTO knowledge_relations AS ins (org_id, id, from_id, to_id, type, note, created_by_agent_id, valid_from, valid_to, closed_by_agent_id)
SELECT @org_id, unnest(@ids::uuid[]), unnest(@from_ids::uuid[]), unnest(@to_ids::uuid[]), unnest(@types::text[]),
       nullif(unnest(@notes::text[]), ''),
       nullif(unnest(@authors::uuid[]), '00000000-0000-0000-0000-000000000000'::uuid),
       unnest(@valid_froms::timestamptz[]),
       nullif(unnest(@valid_tos::text[]), '')::timestamptz,
       nullif(unnest(@closers::uuid[]), '00000000-0000-0000-0000-000000000000'::uuid)
ON CONFLICT DO NOTHING
RETURNING ins.id;

-- name: InsertPartOfRelations :exec
-- A document's sections, each PART_OF the document (documents.go): one
-- statement for all of them, in the same transaction as the entries. No
-- per-entry cap here: a document's sections are bounded by
-- MaxDocumentSections, which is at most the cap. Joined to the sections'
-- entries, with the relations' ids given: routed whole on a Citus cluster
-- (InsertRelationCapped). Each starts no earlier than its relation's last
-- interval ended (InsertRelationCapped).
-- A probe of the primary key each (PutSections).
INSERT INTO knowledge_relations (org_id, id, from_id, to_id, type, created_by_agent_id, valid_from)
SELECT k.org_id, v.rel_id, v.id, @document_id, 'PART_OF', sqlc.narg(agent_id)::uuid,
       greatest(now(), (SELECT max(p.valid_to) FROM knowledge_relations p
                        WHERE p.org_id = @org_id AND p.from_id = v.id AND p.type = 'PART_OF' AND p.to_id = @document_id))
FROM (SELECT unnest(@section_ids::uuid[]) AS id, unnest(@relation_ids::uuid[]) AS rel_id) v
CROSS JOIN LATERAL (SELECT k.org_id FROM knowledge k WHERE k.org_id = @org_id AND k.id = v.id LIMIT 1) k
ON CONFLICT (org_id, from_id, type, to_id) WHERE valid_to IS NULL DO NOTHING;

-- name: ClosePartOfRelations :exec
-- The open PART_OF relations of sections that left a document (changed,
-- retired, or moved to the document's new entry) end now.
UPDATE knowledge_relations
SET valid_to = greatest(now(), valid_from), closed_by_agent_id = sqlc.narg(agent_id)::uuid
WHERE org_id = @org_id AND from_id = ANY(@section_ids::uuid[]) AND to_id = @document_id
  AND type = 'PART_OF' AND valid_to IS NULL;
