#!/usr/bin/env bash
# upload-rss.sh: a 10 MB Markdown document stored in parts through the MCP
# server (document_upload_start, _append, _finish), end to end over HTTP,
# and how much the server's peak resident memory (VmHWM of
# /proc/PID/status) grew for it (docs/benchmarks.md, "Documents in parts").
#
# It builds ctl and mcp, makes a scratch database (dropped at the end) on
# the local PostgreSQL, migrates it, makes an org, agent and token (ctl dev
# bootstrap), starts the server, warms it up with a small upload, then
# reads VmHWM, uploads the document and reads VmHWM again.
#
#   bash scripts/upload-rss.sh [MB]     (default 10: 10,000,000 bytes)
#
# UPLOAD_WHOLE=n instead times n store_document calls of MB each (one call,
# no parts; no worker runs, so this is the answer's time, not embedding):
#
#   UPLOAD_WHOLE=5 bash scripts/upload-rss.sh 1.048576
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${1:-10}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
DBNAME=knowledge_uploadrss_$$
MCP=127.0.0.1:$((18600 + $$ % 300))
work=$(mktemp -d /tmp/upload-rss.XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  psql "$PG/postgres?sslmode=disable" -qc "DROP DATABASE IF EXISTS $DBNAME WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./apps/ctl ./apps/mcp
psql "$PG/postgres?sslmode=disable" -qc "CREATE DATABASE $DBNAME" >/dev/null
export OWNER_DATABASE_URL="$PG/$DBNAME?sslmode=disable"
"$work/ctl" migrate up >/dev/null
app_url=${OWNER_DATABASE_URL/postgres@/knowledge_app@}
op_url=${OWNER_DATABASE_URL/postgres@/knowledge_operator@}
token=$(DATABASE_URL=$op_url "$work/ctl" dev bootstrap | sed -n 's/^token //p')
DATABASE_URL=$app_url MCP_ADDR=$MCP "$work/mcp" >"$work/mcp.log" 2>&1 &
pid=$!
for _ in $(seq 1 150); do curl -fs "http://$MCP/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$pid/status"; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
upload() { python3 scripts/upload-rss.py "http://$MCP/mcp" "$token" "$1" "$pid"; }
echo "upload-rss: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
if [ -n "${UPLOAD_WHOLE:-}" ]; then
  upload "$MB"
  echo "upload-rss: done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
upload 0.05 >/dev/null # warm-up: the server's pools, caches and code paths
before=$(hwm)
echo "before: VmHWM ${before} kB, VmRSS $(rss) kB"
upload "$MB"
after=$(hwm)
echo "after:  VmHWM ${after} kB, VmRSS $(rss) kB"
echo "peak RSS growth: $(( (after - before) / 1024 )) MiB ($(( after - before )) kB)"
echo "upload-rss: done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
