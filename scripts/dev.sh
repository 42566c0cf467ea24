#!/usr/bin/env bash
# dev.sh runs the whole product on this machine: services, migrations, a dev
# org/agent/token, then the MCP server, the embeddings worker and the asynq
# dashboard, until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$EPOCHREALTIME
# Each app connects as its own role (docs/operators.md, "Roles"): the MCP
# server as knowledge_app, the worker and ctl migrate as the schema owner,
# ctl as knowledge_operator; their defaults are these loopback URLs.
export OWNER_DATABASE_URL=${OWNER_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/knowledge?sslmode=disable}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
export MCP_ADDR=${MCP_ADDR:-127.0.0.1:8080}
export DASHBOARD_ADDR=${DASHBOARD_ADDR:-127.0.0.1:8090}
export DASHBOARD_USER=${DASHBOARD_USER:-admin}
export DASHBOARD_PASSWORD=${DASHBOARD_PASSWORD:-dev-only-password}
export WORKER_METRICS_ADDR=${WORKER_METRICS_ADDR:-127.0.0.1:9091}

# The ports first, before anything is built or a token is made: a second
# `task dev`, or anything else on a port, would otherwise print a fresh
# token and then fail on the busy port.
busy=0
for var in MCP_ADDR DASHBOARD_ADDR WORKER_METRICS_ADDR; do
  addr=${!var}
  host=${addr%:*}
  port=${addr##*:}
  [ -n "$host" ] && [ "$host" != "0.0.0.0" ] || host=127.0.0.1
  if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    echo "dev: $var=$addr is in use (another \`task dev\` running?): stop it, or set $var to a free address, e.g. $var=$host:$((port + 100))" >&2
    busy=1
  fi
done
[ "$busy" = 0 ] || exit 1

# Each step's time, printed once the worker and the dashboard run too
# (README.md, "The two commands").
last=$EPOCHREALTIME
times=()
step() { # name: the time since the previous step
  local now=$EPOCHREALTIME d
  d=$(((${now/[.,]/} - ${last/[.,]/}) / 1000))
  times+=("$1 $((d / 1000)).$((d % 1000 / 100)) s")
  last=$now
}

pids=()
cleanup() {
  trap - INT TERM EXIT
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT

bash scripts/setup.sh
step setup
# ctl and the MCP server first, the worker and the dashboard while the
# server starts: /mcp answers once two binaries are linked, not four.
# Without debug information (-s -w) a link takes half the time; panics
# still print their stacks (dlv debug ./apps/mcp for a debugger). go
# build leaves a binary that is up to date alone.
mkdir -p bin
ldflags='-s -w'
go build -ldflags="$ldflags" -o bin/ ./apps/ctl ./apps/mcp
step "build ctl, mcp"
build_log=$(mktemp /tmp/dev-build.XXXXXX)
go build -ldflags="$ldflags" -o bin/ ./apps/worker ./apps/dashboard >"$build_log" 2>&1 &
build=$!
pids+=("$build")
# Applies what is pending; on a migrated database it only checks the
# roles (about 0.1 s).
bin/ctl migrate up
step migrate

# The dev org and agent are made once and reused; a fresh token each run.
boot=$(bin/ctl dev bootstrap)
org=$(sed -n 's/^org //p' <<<"$boot")
agent=$(sed -n 's/^agent //p' <<<"$boot")
token=$(sed -n 's/^token //p' <<<"$boot")
step bootstrap

# Say plainly what search understands: the default embedder matches words,
# not meanings (docs/embeddings.md).
if [ -z "${EMBEDDER:-}${EMBEDDINGS_PRESET:-}" ] || [ "${EMBEDDER:-}" = local ]; then
  embedder="local: LEXICAL (a hashing embedder: finds shared words, not paraphrases).
               For meaning, one line with a local Ollama:
               EMBEDDINGS_PRESET=ollama EMBEDDINGS_MODEL=nomic-embed-text go tool task dev
               (presets: openai, ollama, vllm, tei, litellm; docs/embeddings.md)"
else
  embedder="${EMBEDDINGS_PRESET:-openai} ${EMBEDDINGS_MODEL:-}"
fi

cat <<INFO

  MCP server   http://$MCP_ADDR/mcp   (Streamable HTTP)
  dev org      $org
  dev agent    $agent
  dev token    $token   (24h, every scope)
  dashboard    http://$DASHBOARD_ADDR/   (user $DASHBOARD_USER, password $DASHBOARD_PASSWORD)
  embedder     $embedder

  Client configuration (paste into your MCP client's mcpServers):
  {"knowledge": {"type": "http", "url": "http://$MCP_ADDR/mcp",
                 "headers": {"Authorization": "Bearer $token"}}}

INFO

bin/mcp & pids+=($!)
mcp=$!
host=${MCP_ADDR%:*}
[ -n "$host" ] && [ "$host" != "0.0.0.0" ] || host=127.0.0.1
until (exec 3<>"/dev/tcp/$host/${MCP_ADDR##*:}") 2>/dev/null; do
  kill -0 "$mcp" 2>/dev/null || break
  sleep 0.05
done
step "mcp answering"
answered=$(((${EPOCHREALTIME/[.,]/} - ${start/[.,]/}) / 100000))
if ! wait "$build"; then
  cat "$build_log" >&2
  rm -f "$build_log"
  echo "dev: building the worker and the dashboard failed" >&2
  exit 1
fi
rm -f "$build_log"
step "build worker, dashboard (beside mcp's start)"
bin/worker & pids+=($!)
bin/dashboard & pids+=($!)
summary=$(printf '%s, ' "${times[@]}")
echo "dev: /mcp answered $((answered / 10)).$((answered % 10)) s after the start: ${summary%, }" >&2
# Stop everything as soon as one of them exits.
wait -n
