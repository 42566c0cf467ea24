#!/usr/bin/env bash
# cluster-redis-fault.sh: one master of the loopback Redis Cluster (7002)
# stopped under the MCP server and the worker (run by hand: not yet an
# automated test). Stores (with client tokens) and searches go on
# while it is down; it is started again and the script waits until every
# entry of the run is embedded (the reconciler re-enqueues what could not be
# enqueued), then prints the counts and the server's warnings.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash scripts/cluster.sh urls | sed 's/^/export /')"
MCP=127.0.0.1:18483
work=$(mktemp -d /tmp/redis-fault.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/" ./apps/ctl ./apps/mcp ./apps/worker
boot=$(DATABASE_URL=$OPERATOR_DATABASE_URL "$work/ctl" dev bootstrap); token=$(sed -n 's/^token //p' <<<"$boot"); org=$(sed -n 's/^org //p' <<<"$boot")
MCP_ADDR=$MCP "$work/mcp" >"$work/mcp.log" 2>&1 & pids+=($!)
DATABASE_URL=$OWNER_DATABASE_URL WORKER_METRICS_ADDR=127.0.0.1:19493 WORKER_RECONCILE_INTERVAL=2s WORKER_RECONCILE_GRACE=2s "$work/worker" >"$work/worker.log" 2>&1 & pids+=($!)
for _ in $(seq 1 100); do curl -fs "http://$MCP/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
call() {
  out=$(curl -sS -w '\n%{time_total}' --max-time 30 "http://$MCP/mcp" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":$2}}" || true)
  t=$(tail -1 <<<"$out"); code=$(grep -o '"code":"[a-z_]*"' <<<"$out" | head -1)
  if grep -q '"isError":true' <<<"$out"; then echo "$t ${code:-error}"; elif grep -q '"result"' <<<"$out"; then echo "$t ok"; else echo "$t http-error"; fi
}
run=$RANDOM
echo "before store: $(call store_knowledge "{\"title\":\"Redis fault $run before\",\"body\":\"before\",\"clientToken\":\"$(cat /proc/sys/kernel/random/uuid)\"}")"
pid=$(cat /var/tmp/knowledge-cluster/redis/7002/redis.pid)
kill "$pid"; echo "stopped redis master 7002"
sleep 1
for k in 1 2 3 4 5; do
  echo "down store $k: $(call store_knowledge "{\"title\":\"Redis fault $run down $k\",\"body\":\"stored while a Redis master is down\",\"clientToken\":\"$(cat /proc/sys/kernel/random/uuid)\"}")"
  echo "down search $k: $(call search_knowledge "{\"query\":\"redis fault $run\"}")"
done
redis-server --daemonize yes --bind 127.0.0.1 --port 7002 --cluster-enabled yes --cluster-config-file /var/tmp/knowledge-cluster/redis/7002/nodes.conf --cluster-node-timeout 2000 --appendonly yes --dir /var/tmp/knowledge-cluster/redis/7002 --pidfile /var/tmp/knowledge-cluster/redis/7002/redis.pid --logfile /var/tmp/knowledge-cluster/redis/7002/redis.log --save ""
for _ in $(seq 1 50); do redis-cli -p 7001 cluster info | grep -q cluster_state:ok && break; sleep 0.2; done
echo "redis back: $(redis-cli -p 7001 cluster info | grep cluster_state)"
echo "after store: $(call store_knowledge "{\"title\":\"Redis fault $run after\",\"body\":\"after\",\"clientToken\":\"$(cat /proc/sys/kernel/random/uuid)\"}")"
for _ in $(seq 1 60); do
  p=$(psql "$OWNER_DATABASE_URL" -Atc "select count(*) filter (where embedding_status <> 'ready'), count(*) from knowledge where org_id = '$org' and title like 'Redis fault $run%'")
  [ "${p%%|*}" = 0 ] && break; sleep 1
done
echo "entries of the run (not ready|all): $p"
grep -c '"level":"WARN"' "$work/mcp.log" || true
grep '"level":"WARN"\|ERROR' "$work/mcp.log" | head -3 | cut -c1-250
