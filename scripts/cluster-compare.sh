#!/usr/bin/env bash
# cluster-compare.sh: search (and store) latency over MCP, the Citus cluster
# against a single node, measured interleaved so both see the same machine
# load. Needs the loopback cluster (scripts/cluster.sh up) and the single
# node beside it (scripts/cluster.sh single-up), each with an org "dev"
# loaded first, e.g.
#   SMOKE_ORG_ENTRIES=5000 bash scripts/cluster-smoke.sh
#   eval "$(bash scripts/cluster.sh single-urls | sed 's/^/export /')"; \
#     SMOKE_URLS_FROM_ENV=1 SMOKE_ORG_ENTRIES=5000 bash scripts/cluster-smoke.sh
# COMPARE_ROUNDS rounds (default 5) of COMPARE_N calls (default 20) to each
# in turn; COMPARE_MCP_BIN_<name>=path runs another build of apps/mcp as one
# more target on the cluster (e.g. an older commit's, for a before/after),
# COMPARE_SINGLE_MCP_BIN_<name>=path one more on the single node.
# Each database gets a worker (apps/worker), as in production: without one
# the stores stay queued for the lexical index, and every search analyses
# that growing tail itself (docs/knowledge.md, "Search"), on both sides.
# Timing starts once neither database has entries waiting for vectors
# (COMPARE_SETTLE seconds at most, default 120).
# Prints p50/p95 of curl's time_total and of the server's own duration_ms.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
work=$(mktemp -d /tmp/cluster-compare.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
log() { printf 'compare: %s\n' "$*" >&2; }
go build -o "$work/" ./apps/ctl ./apps/mcp ./apps/worker
declare -A url tok
port=18520
start_target() { # name, mcp binary, env file
  local name=$1 bin=$2 envf=$3
  ( set -a; . "$envf"; set +a
    DATABASE_URL=$OPERATOR_DATABASE_URL "$work/ctl" dev bootstrap | sed -n 's/^token //p' >"$work/$name.token"
    MCP_ADDR=127.0.0.1:$port exec "$bin" >"$work/$name.log" 2>&1 ) & pids+=($!)
  url[$name]=http://127.0.0.1:$port/mcp
  port=$((port + 1))
}
bash scripts/cluster.sh urls >"$work/cluster.env"
bash scripts/cluster.sh single-urls >"$work/single.env"
metrics=19530
for envf in "$work/cluster.env" "$work/single.env"; do
  ( set -a; . "$envf"; set +a
    DATABASE_URL=$OWNER_DATABASE_URL WORKER_METRICS_ADDR=127.0.0.1:$metrics exec "$work/worker" >"$envf.worker.log" 2>&1 ) & pids+=($!)
  metrics=$((metrics + 1))
done
start_target cluster "$work/mcp" "$work/cluster.env"
start_target single "$work/mcp" "$work/single.env"
for v in $(compgen -v COMPARE_MCP_BIN_ || true); do start_target "cluster-${v#COMPARE_MCP_BIN_}" "${!v}" "$work/cluster.env"; done
for v in $(compgen -v COMPARE_SINGLE_MCP_BIN_ || true); do start_target "single-${v#COMPARE_SINGLE_MCP_BIN_}" "${!v}" "$work/single.env"; done
for name in "${!url[@]}"; do
  for _ in $(seq 1 150); do curl -fs "${url[$name]%/mcp}/readyz" >/dev/null 2>&1 && [ -s "$work/$name.token" ] && break; sleep 0.2; done
  tok[$name]=$(cat "$work/$name.token")
done
call() { # name tool args
  curl -fsS -o /dev/null -w '%{time_total}\n' "${url[$1]}" -H "Authorization: Bearer ${tok[$1]}" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$2\",\"arguments\":$3}}"
}
pct() { sort -n | awk '{a[NR]=$1} END {printf "p50 %.1f ms, p95 %.1f ms (n=%d)", a[int(NR*0.5)+1]*1000, a[int(NR*0.95)+1]*1000, NR}'; }
words=(shard worker router plan vector index tenant coordinator replica lease queue budget)
# The workers start with the run: entries left pending (a run stopped
# before its workers caught up, rows written by hand) would be embedded
# while the calls are timed. Wait for none, up to COMPARE_SETTLE seconds.
for envf in cluster single; do
  owner=$(sed -n 's/^OWNER_DATABASE_URL=//p' "$work/$envf.env")
  for _ in $(seq 1 "${COMPARE_SETTLE:-120}"); do
    pending=$(psql "$owner" -XqAtc "SELECT count(*) FROM knowledge WHERE embedding_status = 'pending'")
    [ "$pending" = 0 ] && break
    sleep 1
  done
  [ "$pending" = 0 ] || log "$envf: still $pending entries pending after ${COMPARE_SETTLE:-120} s; timing anyway"
done
for name in "${!url[@]}"; do call "$name" search_knowledge '{"query":"warm up the connections"}' >/dev/null; done
for r in $(seq 1 "${COMPARE_ROUNDS:-5}"); do
  for name in "${!url[@]}"; do
    for i in $(seq 1 "${COMPARE_N:-20}"); do
      q="${words[$(( (r * 7 + i) % 12 ))]} ${words[$(( (r + i * 5) % 12 ))]} note $r $i"
      call "$name" search_knowledge "{\"query\":\"$q\",\"limit\":10}" >>"$work/$name.search"
    done
    if [ "${COMPARE_STORES:-1}" = 1 ]; then
      for i in $(seq 1 "${COMPARE_N:-20}"); do
        call "$name" store_knowledge "{\"title\":\"Compare round $r store $i $RANDOM\",\"body\":\"Timed store $i of round $r: ${words[$(( i % 12 ))]} ${words[$(( (i + r) % 12 ))]} $RANDOM.\"}" >>"$work/$name.store"
      done
    fi
  done
done
log "load: $(uptime | sed 's/.*load average: //')"
for name in $(printf '%s\n' "${!url[@]}" | sort); do
  srv() { grep "\"tool\":\"$1\"" "$work/$name.log" | sed -n 's/.*"duration_ms":\([0-9.]*\).*/\1/p' | tail -n +2 | awk '{print $1/1000}' | pct; }
  log "$name: search $(pct <"$work/$name.search"), server $(srv search_knowledge)"
  [ -f "$work/$name.store" ] && log "$name: store $(pct <"$work/$name.store"), server $(srv store_knowledge)"
done
