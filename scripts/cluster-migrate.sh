#!/usr/bin/env bash
# cluster-migrate.sh copies the data of a single-node knowledge database into
# a Citus cluster whose coordinator was migrated by the same build
# (docs/scale-out.md, "Migrating a single node into a cluster").
#
#   bash scripts/cluster-migrate.sh SOURCE_URL TARGET_URL
#
# SOURCE_URL: the single node's database, as its owner (the schema owner,
#   e.g. postgres://postgres@10.0.0.5:5432/knowledge). Stop the apps that
#   write to it first (mcp, worker): rows written during the copy are not
#   copied.
# TARGET_URL: the coordinator's database, as the schema owner, made with
#   citus, vector and pg_trgm on every node and migrated with
#   `ctl migrate up` (OWNER_DATABASE_URL=TARGET_URL). It must hold no org.
#
# The schema comes from the migrations (on Citus they distribute every table
# by org_id: 00027), so only data moves: pg_dump --data-only of the source,
# loaded through the coordinator in one transaction (all or nothing) behind
# SET LOCAL session_replication_role = replica, which Citus passes on to the
# workers (citus.propagate_set_commands = local): the triggers (the org
# counters, the index queue, the audit trail's guard) and the foreign keys'
# checks do not fire, so every counter, statistic, queue row and audit
# record arrives as it was, once. Rows the target's migrations made (the
# secrets that sign tokens, for one) are replaced by the source's: tokens
# keep working. The audit trail's day partitions are made first; the
# sequences are set by the dump. Then every table is vacuumed and analyzed,
# and the script compares every table's row count on both sides.
#
# Not copied: Redis (idempotence keys and rate limits start afresh: calls
# retried across the move may be applied twice) and the HNSW indexes, which
# the embeddings worker builds at start and Upkeep for big orgs.
set -euo pipefail

log() { printf 'cluster-migrate: %s\n' "$*" >&2; }
die() { printf 'cluster-migrate: error: %s\n' "$*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 SOURCE_URL TARGET_URL (the single node's database and the migrated coordinator's, both as the schema owner)"
SRC=$1
DST=$2
q() { psql "$1" -v ON_ERROR_STOP=1 -Atq -c "$2"; }

command -v pg_dump >/dev/null || die "pg_dump not found (postgresql-client)"
[ "$(q "$DST" "SELECT count(*) FROM pg_extension WHERE extname = 'citus'")" = 1 ] \
  || die "the target has no citus extension: it must be a Citus coordinator (scripts/cluster.sh prepares one)"
ver() { q "$1" "SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied"; }
sv=$(ver "$SRC") || die "cannot read the source's migrations (is it a knowledge database?)"
dv=$(ver "$DST") || die "cannot read the target's migrations: run ctl migrate up on it first"
[ "$sv" = "$dv" ] || die "the source is at migration $sv and the target at $dv: migrate both with the same build (ctl migrate up) first"
[ "$(q "$DST" "SELECT count(*) FROM orgs")" = 0 ] || die "the target already holds orgs: migrate into a fresh, migrated database"

# Every table of the schema but goose's, on the target (the ones the load
# replaces).
tables=$(q "$DST" "SELECT string_agg(format('%I.%I', n.nspname, c.relname), ', ' ORDER BY c.relname)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> 'goose_db_version'")

# The audit trail's day partitions of the source's records, both ends
# included (audit_ensure_partitions: UTC days, at most 400 a call).
range=$(q "$SRC" "SELECT coalesce(min(at)::text || '|' || max(at)::text, '') FROM audit_events")
if [ -n "$range" ]; then
  q "$DST" "SELECT sum(audit_ensure_partitions(g, least(g + interval '399 days', '${range#*|}'::timestamptz)))
    FROM generate_series('${range%|*}'::timestamptz, '${range#*|}'::timestamptz, interval '400 days') g" >/dev/null
  log "audit partitions made on the target for ${range%|*} .. ${range#*|}"
fi

# What the target's migrations wrote (no org: the secrets, the audit
# keys) goes first, committed on its own: Citus's COPY into a reference
# table did not see a TRUNCATE of the same transaction on its placements.
q "$DST" "TRUNCATE $tables CASCADE" >/dev/null
log "copying (migration $sv) in one transaction"
start=$(date +%s)
{
  echo "BEGIN;"
  echo "SET LOCAL session_replication_role = replica;"
  pg_dump --data-only --no-owner --no-privileges --load-via-partition-root \
    --exclude-table=public.goose_db_version "$SRC" 2> >(grep -v 'circular foreign-key\|detail: knowledge$\|hint: ' >&2)
  echo "COMMIT;"
} | psql "$DST" -v ON_ERROR_STOP=1 -q >/dev/null
log "copied in $(( $(date +%s) - start )) s; vacuuming and analyzing every table (each shard, on its worker)"
for t in ${tables//,/ }; do
  q "$DST" "VACUUM (ANALYZE) $t" >/dev/null
done

# Row counts, table by table.
counts() {
  local url=$1 t sql=""
  for t in ${tables//,/ }; do sql="${sql:+$sql UNION ALL }SELECT '$t', count(*) FROM $t"; done
  q "$url" "$sql ORDER BY 1"
}
if ! diff <(counts "$SRC") <(counts "$DST") >/dev/null; then
  diff <(counts "$SRC") <(counts "$DST") >&2 || true
  die "row counts differ (above: < source, > target)"
fi
log "every table has as many rows on both sides ($(counts "$DST" | awk -F'|' '{n += $2} END {print n}') rows)"
