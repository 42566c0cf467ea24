#!/usr/bin/env bash
# dev.sh runs the whole product on this machine: services, migrations, a dev
# org/agent/token, then the MCP server, the embeddings worker and the asynq
# dashboard, until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
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

bash scripts/setup.sh
mkdir -p bin
go build -o bin/ ./apps/ctl ./apps/mcp ./apps/worker ./apps/dashboard
bin/ctl migrate up

# The dev org and agent are made once and reused; a fresh token each run.
boot=$(bin/ctl dev bootstrap)
org=$(sed -n 's/^org //p' <<<"$boot")
agent=$(sed -n 's/^agent //p' <<<"$boot")
token=$(sed -n 's/^token //p' <<<"$boot")

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

pids=()
cleanup() {
  trap - INT TERM EXIT
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT
bin/mcp & pids+=($!)
bin/worker & pids+=($!)
bin/dashboard & pids+=($!)
# Stop everything as soon as one of them exits.
wait -n
