#!/usr/bin/env bash
# cluster-statements.sh: what the write path's statements cost on the org's
# Citus worker, against the same statements on a single node: a store's
# transaction (its quota unit and the insert, with the insert's triggers)
# and the embeddings worker's vector write, each sent by pgbench
# (-M prepared, one client) to the worker itself, as the apps send an org's
# transaction there (docs/operators.md, "Search on a cluster"):
#
#   distributed  the statements as the product sends them, on the
#                distributed tables: Citus plans each and runs it on the
#                local shard;
#   shard        the same statements on the org's shards by name (what a
#                prepared plan on the worker would cost);
#   no triggers  the shard variant with the triggers off
#                (session_replication_role = replica): the triggers' share;
#   single       the same statements on the single node, with and without
#                its triggers.
#
# The vector write is the embeddings worker's MarkEmbeddingReady for an
# entry that is not pending (it matches no row): its planning and routing,
# not the HNSW index's insert, which costs the same everywhere.
#
# Needs the loopback cluster and the single node beside it (scripts/cluster.sh
# up, single-up). It makes an org of its own on each (STATEMENTS_ORG_NAME)
# and deletes what it stored at the end. STATEMENTS_N transactions a variant
# (default 3000), STATEMENTS_ROUNDS rounds of all variants in turn (default 2).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
COORD=${CLUSTER_COORDINATOR_PORT:-5440}
SINGLE=${SINGLE_PG_PORT:-5443}
N=${STATEMENTS_N:-3000}
ROUNDS=${STATEMENTS_ROUNDS:-2}
NAME=${STATEMENTS_ORG_NAME:-cluster-statements}
log() { printf 'statements: %s\n' "$*" >&2; }
q() { psql -X -h 127.0.0.1 -p "$1" -U postgres knowledge -qAtc "$2"; }
work=$(mktemp -d /tmp/cluster-statements.XXXXXX)
org=$(q "$COORD" "INSERT INTO orgs (name) VALUES ('$NAME') ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id")
q "$SINGLE" "INSERT INTO orgs (id, name) VALUES ('$org', '$NAME') ON CONFLICT (id) DO NOTHING"
cleanup() {
  local del="DELETE FROM knowledge_index_queue WHERE org_id = '$org'; DELETE FROM knowledge WHERE org_id = '$org'; DELETE FROM org_quotas WHERE org_id = '$org'"
  q "$COORD" "$del" || true
  q "$SINGLE" "$del" || true
  rm -rf "$work"
}
trap cleanup EXIT
# The worker holding the org's shard group, and its shards' names.
read -r port shard_k shard_q shard_c < <(q "$COORD" "
  SELECT n.nodeport,
         shard_name('knowledge', get_shard_id_for_distribution_column('knowledge', '$org'::uuid)),
         shard_name('org_quotas', get_shard_id_for_distribution_column('org_quotas', '$org'::uuid)),
         shard_name('knowledge_chunks', get_shard_id_for_distribution_column('knowledge_chunks', '$org'::uuid))
  FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
  WHERE p.shardid = get_shard_id_for_distribution_column('knowledge', '$org'::uuid)" | tr '|' ' ')
log "org $org on the worker at $port (shards $shard_k, $shard_q, $shard_c)"
# One entry of the org to point the vector write at.
entry=$(q "$COORD" "INSERT INTO knowledge (org_id, title, body) VALUES ('$org', 'statements', 'the vector write points at this entry') RETURNING id")
q "$SINGLE" "INSERT INTO knowledge (org_id, id, title, body) VALUES ('$org', '$entry', 'statements', 'the vector write points at this entry')"
vec="[$(seq -s, 1 768 | sed 's/[0-9]\+/0.05/g')]"
# The statements of queries/tenancy.sql (ConsumeQuota), queries/knowledge.sql
# (InsertEntry) and queries/embeddings.sql (MarkEmbeddingReady), with
# pgbench's variables for their arguments.
cat >"$work/store.sql" <<EOF
BEGIN;
INSERT INTO org_quotas AS q (org_id, resource, used, updated_at) VALUES (:org, 'knowledge_stored', 1, now())
  ON CONFLICT (org_id, resource) DO UPDATE SET used = q.used + 1, updated_at = excluded.updated_at
  WHERE q.limit_value IS NULL OR q.used < q.limit_value RETURNING used, limit_value;
INSERT INTO knowledge (org_id, title, body, tags, confidence, origin, source, kind, metadata, created_by_agent_id, expires_at, client_token, similar_keys)
  VALUES (:org, 'A note of the statements script', 'Its body, a sentence of a few words.', '{}'::text[], 80, 'agent', NULL, 'semantic', '{}'::jsonb, NULL, NULL, NULL, '{11,12,13}'::bigint[])
  ON CONFLICT (org_id, created_by_agent_id, client_token) DO NOTHING RETURNING id, embedding_status, embedding_generation, created_at;
COMMIT;
EOF
cat >"$work/vector.sql" <<EOF
WITH ready AS (
  UPDATE knowledge k SET embedding = '$vec', embedding_status = 'ready', embedding_model = 'statements', embedding_error = NULL, embedded_at = now()
  WHERE k.org_id = :org AND k.id = '$entry' AND k.embedding_generation = -1 AND k.embedding_status IS NOT DISTINCT FROM 'pending'
  RETURNING k.embedding_requested_at, k.embedded_at
), cleared AS (
  DELETE FROM knowledge_chunks c WHERE c.org_id = :org AND c.entry_id = '$entry' AND c.embedding_model IS NOT DISTINCT FROM 'statements' AND EXISTS (SELECT 1 FROM ready)
)
SELECT embedding_requested_at, embedded_at FROM ready;
EOF
for f in store vector; do
  sed -e "s/INTO org_quotas /INTO $shard_q /" -e "s/INTO knowledge /INTO $shard_k /" \
      -e "s/UPDATE knowledge k/UPDATE $shard_k k/" -e "s/FROM knowledge_chunks c/FROM $shard_c c/" \
      "$work/$f.sql" >"$work/$f-shard.sql"
done
bench() { # port script [PGOPTIONS]: the mean latency in ms
  PGOPTIONS=${3:-} pgbench -h 127.0.0.1 -p "$1" -U postgres -n -M prepared -D "org=$org" -f "$2" -t "$N" knowledge 2>&1 |
    sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p'
}
off="-c session_replication_role=replica"
log "load: $(uptime | sed 's/.*load average: //')"
printf '%-8s %-12s %10s %10s %12s %10s %14s\n' round statement distributed shard "no triggers" single "single, none"
for r in $(seq 1 "$ROUNDS"); do
  for f in store vector; do
    printf '%-8s %-12s %10s %10s %12s %10s %14s\n' "$r" "$f" \
      "$(bench "$port" "$work/$f.sql")" "$(bench "$port" "$work/$f-shard.sql")" "$(bench "$port" "$work/$f-shard.sql" "$off")" \
      "$(bench "$SINGLE" "$work/$f.sql")" "$(bench "$SINGLE" "$work/$f.sql" "$off")"
  done
done
log "load: $(uptime | sed 's/.*load average: //'); mean ms a transaction (store) or statement (vector), $N each, one client"
