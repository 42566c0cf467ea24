#!/usr/bin/env bash
# conformance.sh runs the MCP conformance suite (the protocol maintainers'
# @modelcontextprotocol/conformance, pinned with every dependency in
# tools/conformance/package-lock.json) against the server over HTTP: every
# scenario that applies to it must pass (apps/mcp/conformance_test.go lists
# them; docs/mcp.md, "Conformance", says why the others do not apply).
#
# The suite is installed once into a cache folder named by the lock file's
# checksum (CONFORMANCE_CACHE_DIR, default ~/.cache/knowledge-conformance),
# with npm's own cache preferred to the registry: a second run installs
# nothing. Prints the time of each part.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH="/usr/local/go/bin:$PATH"
command -v npm >/dev/null || {
  echo "conformance: npm not found: install Node.js 20 or newer with npm (Debian: apt-get install nodejs npm)" >&2
  exit 1
}

start=$(date +%s)
lock=tools/conformance/package-lock.json
sum=$(cat tools/conformance/package.json "$lock" | sha256sum | cut -c1-16)
dir=${CONFORMANCE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/knowledge-conformance}/$sum
bin=$dir/node_modules/.bin/conformance
if [ ! -x "$bin" ]; then
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  cp tools/conformance/package.json "$lock" "$dir.tmp/"
  (cd "$dir.tmp" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null)
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
fi
installed=$(date +%s)
echo "conformance: suite $(node -p 'require(process.argv[1]).version' "$dir/node_modules/@modelcontextprotocol/conformance/package.json") ready in $((installed - start)) s" >&2

MCP_CONFORMANCE=$bin go test -count=1 -run '^TestConformance$' -v ./apps/mcp
echo "conformance: scenarios passed in $(($(date +%s) - installed)) s (total $(($(date +%s) - start)) s)" >&2
