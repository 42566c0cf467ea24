#!/usr/bin/env bash
# cluster-fault.sh: one Citus worker stopped under the MCP server (run by
# hand: not yet an automated test). On the loopback cluster of
# scripts/cluster.sh: two orgs whose shards are on different workers store
# and search over MCP; the worker of the second is stopped (pg_ctl, fast);
# both orgs are called again and the answers and their times printed; the
# worker is started again and the second org called until it answers.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
eval "$(bash scripts/cluster.sh urls | sed 's/^/export /')"
CLUSTER_DIR=${CLUSTER_DIR:-/var/tmp/knowledge-cluster}
MCP=127.0.0.1:18482
work=$(mktemp -d /tmp/cluster-fault.XXXXXX)
pids=()
stopped=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$stopped" ]; then runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$CLUSTER_DIR/pg/$stopped" -l "$CLUSTER_DIR/pg/$stopped/server.log" -w start >/dev/null || true; fi
  wait 2>/dev/null || true; rm -rf "$work"
}
trap cleanup EXIT
log() { printf 'fault: %s\n' "$*" >&2; }
go build -o "$work/" ./apps/ctl ./apps/mcp
ctl() { DATABASE_URL=$OPERATOR_DATABASE_URL "$work/ctl" "$@"; }
port_of() { psql "$OWNER_DATABASE_URL" -Atc "select nodeport from pg_dist_shard_placement where shardid = get_shard_id_for_distribution_column('knowledge', '$1')"; }
declare -A org_on tok_on
run=$RANDOM
for i in $(seq 1 20); do
  org=$(ctl org create --name "fault-$run-$i" --json | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -1)
  p=$(port_of "$org")
  [ -n "${org_on[$p]:-}" ] && continue
  agent=$(ctl agent create --org "$org" --name a --json | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -1)
  tok=$(ctl token create --org "$org" --agent "$agent" --scopes knowledge:read,knowledge:write --json | sed -n 's/.*"token": *"\([^"]*\)".*/\1/p' | head -1)
  org_on[$p]=$org; tok_on[$p]=$tok
  [ "${#org_on[@]}" = 2 ] && break
done
ports=("${!org_on[@]}")
[ "${#ports[@]}" = 2 ] || { log "could not place two orgs on two workers"; exit 1; }
up=${ports[0]}; down=${ports[1]}
log "org ${org_on[$up]} on worker $up, org ${org_on[$down]} on worker $down"

MCP_ADDR=$MCP "$work/mcp" >"$work/mcp.log" 2>&1 & pids+=($!)
for _ in $(seq 1 100); do curl -fs "http://$MCP/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
call() { # port-of-org tool args -> prints "<seconds> <code or ok>"
  out=$(curl -sS -w '\n%{time_total}' --max-time 30 "http://$MCP/mcp" -H "Authorization: Bearer ${tok_on[$1]}" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$2\",\"arguments\":$3}}" || true)
  t=$(tail -1 <<<"$out")
  code=$(grep -o '"code":"[a-z_]*"' <<<"$out" | head -1 | sed 's/"code":"\(.*\)"/\1/')
  if grep -q '"isError":true' <<<"$out"; then echo "$t ${code:-error}"; elif grep -q '"result"' <<<"$out"; then echo "$t ok"; else echo "$t http-error"; fi
}
for p in $up $down; do
  log "before: org on $p store: $(call $p store_knowledge '{"title":"Fault note","body":"Stored before the worker stops."}')"
  log "before: org on $p search: $(call $p search_knowledge '{"query":"fault note"}')"
done
log "stopping worker $down"
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$CLUSTER_DIR/pg/$down" -m fast -w stop >/dev/null
stopped=$down
for k in 1 2 3; do
  log "down: org on $up store: $(call $up store_knowledge "{\"title\":\"Still here $k\",\"body\":\"The other worker is down.\"}")"
  log "down: org on $up search: $(call $up search_knowledge '{"query":"still here"}')"
  log "down: org on $down store: $(call $down store_knowledge "{\"title\":\"Lost worker $k\",\"body\":\"This worker is down.\"}")"
  log "down: org on $down search: $(call $down search_knowledge '{"query":"fault note"}')"
done
log "starting worker $down"
runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$CLUSTER_DIR/pg/$down" -l "$CLUSTER_DIR/pg/$down/server.log" -w start >/dev/null
stopped=""
start=$(date +%s.%N)
for k in $(seq 1 60); do
  r=$(call $down store_knowledge "{\"title\":\"Back $k\",\"body\":\"The worker is back.\"}")
  if [ "${r#* }" = ok ]; then log "back: org on $down store ok after $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b-a}') s ($k calls)"; break; fi
  sleep 0.5
done
log "after: org on $down search: $(call $down search_knowledge '{"query":"fault note"}')"
log "stores of the org on $down in the database: $(psql "$OWNER_DATABASE_URL" -Atc "select count(*) from knowledge where org_id = '${org_on[$down]}'")"
