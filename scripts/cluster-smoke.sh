#!/usr/bin/env bash
# cluster-smoke.sh runs the apps on the loopback cluster of scripts/cluster.sh
# (go tool task cluster:up first) and checks the product end to end through
# them: ctl bootstraps an org, agent and token on the Citus coordinator; the
# MCP server (as knowledge_app) and the worker (as the owner) run with the
# Redis Cluster; stores over MCP are embedded by the worker and found by a
# search; the dashboard answers. Ports of its own (18480, 19491, 18490; SMOKE_PORT_OFFSET), so
# it runs beside go tool task dev. Exit status 0: every check passed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# SMOKE_URLS_FROM_ENV=1: the DATABASE_URL, OPERATOR_DATABASE_URL,
# OWNER_DATABASE_URL and REDIS_URL already set; SMOKE_TARGET=single: the
# single node beside the cluster (scripts/cluster.sh single-up). Either
# gives the same figures of a single node to compare.
if [ "${SMOKE_TARGET:-}" = single ]; then
  eval "$(bash scripts/cluster.sh single-urls | sed 's/^/export /')"
elif [ -z "${SMOKE_URLS_FROM_ENV:-}" ]; then
  eval "$(bash scripts/cluster.sh urls | sed 's/^/export /')"
fi
# SMOKE_PORT_OFFSET=n moves the three ports by n (two runs at once: a
# cluster's and a single node's).
off=${SMOKE_PORT_OFFSET:-0}
MCP=127.0.0.1:$((18480 + off))
work=$(mktemp -d /tmp/cluster-smoke.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
log() { printf 'smoke: %s\n' "$*" >&2; }
fail() { printf 'smoke: FAIL: %s\n' "$*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done; exit 1; }

go build -o "$work/" ./apps/ctl ./apps/mcp ./apps/worker ./apps/dashboard
[ "${SMOKE_LOAD:-bash}" = bash ] || go build -o "$work/" ./tools/mcpload
boot=$(DATABASE_URL=$OPERATOR_DATABASE_URL "$work/ctl" dev bootstrap)
token=$(sed -n 's/^token //p' <<<"$boot")
[ -n "$token" ] || fail "ctl dev bootstrap gave no token: $boot"
log "org $(sed -n 's/^org //p' <<<"$boot") on the cluster"

MCP_ADDR=$MCP "$work/mcp" >"$work/mcp.log" 2>&1 & pids+=($!)
DATABASE_URL=$OWNER_DATABASE_URL WORKER_METRICS_ADDR=127.0.0.1:$((19491 + off)) "$work/worker" >"$work/worker.log" 2>&1 & pids+=($!)
DASHBOARD_ADDR=127.0.0.1:$((18490 + off)) DASHBOARD_PASSWORD=smoke "$work/dashboard" >"$work/dashboard.log" 2>&1 & pids+=($!)
for _ in $(seq 1 100); do curl -fs "http://$MCP/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
curl -fs "http://$MCP/readyz" >/dev/null || fail "mcp not ready"

call() { # tool, arguments JSON
  curl -fsS "http://$MCP/mcp" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":$2}}"
}
run=$RANDOM$RANDOM
for i in 1 2 3; do
  out=$(call store_knowledge "{\"title\":\"Cluster smoke $run note $i\",\"body\":\"Citus shards by org and the worker embeds note $i of run $run.\",\"tags\":[\"smoke\"]}")
  grep -q '"isError":true' <<<"$out" && fail "store $i: $out"
  grep -q '"id"' <<<"$out" || fail "store $i: $out"
done
log "3 stores answered"
found=0
for _ in $(seq 1 50); do
  out=$(call search_knowledge "{\"query\":\"cluster smoke $run\",\"limit\":10}")
  grep -q '"isError":true' <<<"$out" && fail "search: $out"
  found=$(grep -o "Cluster smoke $run note" <<<"$out" | sort -u | wc -l)
  vec=$(grep -o '\\\?"vectorSearch\\\?":true' <<<"$out" | head -1 || true)
  [ "$found" -ge 1 ] && [ -n "$vec" ] && break
  sleep 0.2
done
[ "$found" -ge 1 ] || fail "search found none of the stored notes"
pending=$(psql "$OWNER_DATABASE_URL" -Atc "select count(*) from knowledge where title like 'Cluster smoke $run%' and embedding_status <> 'ready'")
for _ in $(seq 1 50); do [ "$pending" = 0 ] && break; sleep 0.2
  pending=$(psql "$OWNER_DATABASE_URL" -Atc "select count(*) from knowledge where title like 'Cluster smoke $run%' and embedding_status <> 'ready'"); done
[ "$pending" = 0 ] || fail "$pending entries still not embedded by the worker"
log "search found the notes; the worker embedded all three (Redis Cluster queue)"
curl -fs -u admin:smoke http://127.0.0.1:$((18490 + off))/ >/dev/null || fail "dashboard"
log "dashboard answers"

pct() { sort -n | awk '{a[NR]=$1} END {printf "p50 %.1f ms, p95 %.1f ms (n=%d)", a[int(NR*0.5)+1]*1000, a[int(NR*0.95)+1]*1000, NR}'; }

# SMOKE_ORG_ENTRIES=n: first import n generated entries into the org
# (ctl import; words drawn from a 2,000-word vocabulary, 40-80 words a
# body) and wait until the worker has embedded and indexed them all, so the
# searches below run over an org of that size.
if [ "${SMOKE_ORG_ENTRIES:-0}" -gt 0 ]; then
  org=$(sed -n 's/^org //p' <<<"$boot")
  awk -v n="$SMOKE_ORG_ENTRIES" -v run="$run" 'BEGIN {
    srand(29); split("a e i o u", v, " "); split("b c d f g k l m n p r s t v z", c, " ");
    for (w = 1; w <= 2000; w++) { x = ""; for (j = 0; j < 2 + w % 3; j++) x = x c[int(rand()*15)+1] v[int(rand()*5)+1]; voc[w] = x }
    print "{\"kind\":\"header\",\"format\":\"agentfleet-knowledge\",\"version\":1,\"vectors\":false}"
    for (i = 1; i <= n; i++) {
      t = "Preload " run " " voc[int(rand()*2000)+1] " " voc[int(rand()*2000)+1] " " i; b = ""
      for (j = 0; j < 40 + int(rand()*40); j++) b = b voc[int(rand()*2000)+1] " "
      printf "{\"kind\":\"entry\",\"id\":\"%08x-0000-4000-8000-%012x\",\"title\":\"%s\",\"body\":\"%s\",\"tags\":[],\"confidence\":50,\"source\":\"import\",\"authorAgentId\":null,\"expiresAt\":null,\"supersededBy\":null,\"headId\":null,\"supersededAt\":null,\"createdAt\":\"2026-11-01T00:00:00Z\",\"updatedAt\":\"2026-11-01T00:00:00Z\"}\n", int(run % 2147483647), i, t, b
    }
  }' >"$work/preload.jsonl"
  DATABASE_URL=$OPERATOR_DATABASE_URL "$work/ctl" import --org "$org" --ignore-quota "$work/preload.jsonl" >/dev/null \
    || fail "ctl import of $SMOKE_ORG_ENTRIES entries"
  for _ in $(seq 1 900); do
    left=$(psql "$OWNER_DATABASE_URL" -Atc "select (select count(*) from knowledge where org_id = '$org' and embedding_status <> 'ready') + (select count(*) from knowledge_index_queue where org_id = '$org')")
    [ "$left" = 0 ] && break; sleep 1
  done
  [ "$left" = 0 ] || fail "$left entries of the preload not embedded and indexed after 15 minutes"
  log "org holds $(psql "$OWNER_DATABASE_URL" -Atc "select count(*) from knowledge where org_id = '$org'") entries, all embedded and indexed"
fi

# SMOKE_N=n: time n stores and n searches through MCP, one at a time
# (curl's time_total: the HTTP call, not curl's start-up), and print p50/p95.
if [ "${SMOKE_N:-0}" -gt 0 ] && [ "${SMOKE_ORGS:-0}" = 0 ]; then
  timed() { # tool, arguments JSON
    curl -fsS -o /dev/null -w '%{time_total}\n' "http://$MCP/mcp" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
      -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
      -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":$2}}"
  }
  for i in $(seq 1 "$SMOKE_N"); do
    timed store_knowledge "{\"title\":\"Timing $run entry $i\",\"body\":\"Measured store $i of run $run: shard routing, row security, the Redis Cluster idempotence key.\",\"tags\":[\"timing\"]}"
  done >"$work/store.t"
  sleep 2
  for i in $(seq 1 "$SMOKE_N"); do
    timed search_knowledge "{\"query\":\"measured store $i shard routing\",\"limit\":10}"
  done >"$work/search.t"
  log "store over MCP: $(pct <"$work/store.t")"
  log "search over MCP: $(pct <"$work/search.t")"
fi

# SMOKE_CLIENTS=c (with SMOKE_N=n): c clients store n entries each at once
# (one org: the token's); prints stores per second over the whole run.
if [ "${SMOKE_CLIENTS:-0}" -gt 0 ] && [ "${SMOKE_N:-0}" -gt 0 ] && [ "${SMOKE_ORGS:-0}" = 0 ]; then
  export -f timed; export MCP token run
  start=$(date +%s.%N)
  seq 1 "$SMOKE_CLIENTS" | xargs -P "$SMOKE_CLIENTS" -I{} bash -c '
    for i in $(seq 1 '"$SMOKE_N"'); do
      timed store_knowledge "{\"title\":\"Load $run client {} entry $i\",\"body\":\"Client {} stores entry $i of run $run at once with the others.\"}"
    done' >"$work/load.t"
  end=$(date +%s.%N)
  n=$(wc -l <"$work/load.t")
  log "$SMOKE_CLIENTS clients: $n stores in $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b-a}') s, $(awk -v a="$start" -v b="$end" -v n="$n" 'BEGIN {printf "%.0f", n/(b-a)}') stores/s; per store $(pct <"$work/load.t")"
fi
# SMOKE_ORGS=o (with SMOKE_CLIENTS=c and SMOKE_N=n): the end-to-end run of
# many orgs at once. o orgs (an agent and token each: ctl dev bootstrap),
# then c clients at once, client k storing n entries into orgs k, k+c,
# k+2c... in turn, each store followed by a search of that org; prints the
# stores per second over the whole run, the calls that failed, and on a
# Citus cluster how the orgs and their rows spread over the workers.
# SMOKE_E2E_ROUNDS=r runs it r times on the same servers, each round
# printed: the first starts from the apps' new connections (on a cluster
# each worker session prepares the statements of each shard group on its
# first call), the next ones find them warm, as long-running apps do.
# SMOKE_LOAD=go sends the same calls from one Go process with keep-alive
# connections (tools/mcpload) instead of bash and curl, which take about
# half of a two-core box at 64 clients (docs/benchmarks.md, "Cluster").
if [ "${SMOKE_ORGS:-0}" -gt 0 ] && [ "${SMOKE_CLIENTS:-0}" -gt 0 ] && [ "${SMOKE_N:-0}" -gt 0 ]; then
  for o in $(seq 1 "$SMOKE_ORGS"); do
    DATABASE_URL=$OPERATOR_DATABASE_URL "$work/ctl" dev bootstrap --org-name "e2e-$run-$o" --agent-name e2e | sed -n 's/^token //p'
  done >"$work/tokens"
  [ "$(wc -l <"$work/tokens")" = "$SMOKE_ORGS" ] || fail "bootstrapped $(wc -l <"$work/tokens") of $SMOKE_ORGS orgs"
  log "$SMOKE_ORGS orgs bootstrapped"
  e2e() { # client number: its stores and searches, one line per call: tool status seconds
    local k=$1 i=0 tok body
    mapfile -t toks <"$work/tokens"
    for j in $(seq 1 "$SMOKE_N"); do
      tok=${toks[$(( (k - 1 + (j - 1) * SMOKE_CLIENTS) % SMOKE_ORGS ))]}
      for tool in store_knowledge search_knowledge; do
        if [ $tool = store_knowledge ]; then
          args="{\"title\":\"E2E $run client $k entry $j round $round\",\"body\":\"Client $k stores entry $j of run $run, round $round, beside every other org at once.\"}"
        else
          args="{\"query\":\"client $k entry $j run $run round $round\",\"limit\":5}"
        fi
        body=$(curl -sS -m 30 -w '\n%{http_code} %{time_total}' "http://$MCP/mcp" -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
          -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
          -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$tool\",\"arguments\":$args}}" 2>&1) || true
        st=ok; grep -q '"isError":true' <<<"$body" && st=error; tail -1 <<<"$body" | grep -q '^200 ' || st=error
        [ $st = ok ] || printf '%s client %s: %s\n' "$tool" "$k" "$(tr '\n' ' ' <<<"$body" | cut -c1-400)" >>"$work/e2e.errors"
        echo "$tool $st $(tail -1 <<<"$body" | cut -d' ' -f2)"
      done
    done
  }
  export -f e2e; export MCP run work SMOKE_N SMOKE_CLIENTS SMOKE_ORGS
  rounds=${SMOKE_E2E_ROUNDS:-1}
  for round in $(seq 1 "$rounds"); do
    export round
    rm -f "$work/e2e.errors"
    start=$(date +%s.%N)
    if [ "${SMOKE_LOAD:-bash}" = bash ]; then
      seq 1 "$SMOKE_CLIENTS" | xargs -P "$SMOKE_CLIENTS" -I{} bash -c 'e2e {}' >"$work/e2e.t"
    else
      "$work/mcpload" -url "http://$MCP/mcp" -tokens "$work/tokens" -clients "$SMOKE_CLIENTS" -n "$SMOKE_N" \
        -run "$run" -round "$round" -errors "$work/e2e.errors" >"$work/e2e.t"
    fi
    end=$(date +%s.%N)
    stores=$(grep -c '^store_knowledge ok' "$work/e2e.t" || true)
    [ "$rounds" = 1 ] || log "e2e: round $round of $rounds"
    log "e2e: $SMOKE_ORGS orgs, $SMOKE_CLIENTS clients (${SMOKE_LOAD:-bash}): $stores stores and $(grep -c '^search_knowledge ok' "$work/e2e.t" || true) searches answered in $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b-a}') s ($(awk -v a="$start" -v b="$end" -v n="$stores" 'BEGIN {printf "%.1f", n/(b-a)}') stores/s, a search after each); $(grep -c ' error' "$work/e2e.t" || true) calls failed"
    log "e2e: store $(grep '^store_knowledge ok' "$work/e2e.t" | cut -d' ' -f3 | pct); search $(grep '^search_knowledge ok' "$work/e2e.t" | cut -d' ' -f3 | pct)"
    if [ -s "$work/e2e.errors" ]; then
      log "e2e: the first calls that failed (of $(wc -l <"$work/e2e.errors")):"
      head -5 "$work/e2e.errors" >&2
    fi
  done
  if [ "$(psql "$OWNER_DATABASE_URL" -Atc "select count(*) from pg_extension where extname = 'citus'")" = 1 ]; then
    log "e2e: the e2e orgs over the workers (node: orgs, entries, the entries' rows' bytes):"
    psql "$OWNER_DATABASE_URL" -Atc "
      SELECT n.nodename || ':' || n.nodeport || ': ' || count(*) || ' orgs, ' || sum(x.entries) || ' entries, '
             || sum(x.bytes) || ' bytes'
      FROM (SELECT k.org_id, count(*) AS entries, sum(pg_column_size(k.*)) AS bytes FROM knowledge k JOIN orgs o ON o.id = k.org_id
            WHERE o.name LIKE 'e2e-$run-%' GROUP BY k.org_id) x
      JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('knowledge', x.org_id)
      JOIN pg_dist_node n ON n.groupid = p.groupid
      GROUP BY n.nodename, n.nodeport ORDER BY n.nodeport" | sed 's/^/smoke:   /' >&2
    log "e2e: every shard of the database on each worker (node: shards, bytes with their indexes):"
    psql "$OWNER_DATABASE_URL" -Atc "
      SELECT nodename || ':' || nodeport || ': ' || count(*) || ' shards, ' || sum(shard_size) || ' bytes ('
             || pg_size_pretty(sum(shard_size)::bigint) || ')'
      FROM citus_shards GROUP BY nodename, nodeport ORDER BY nodeport" | sed 's/^/smoke:   /' >&2
  fi
fi
log "PASS"
