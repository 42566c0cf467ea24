#!/usr/bin/env bash
# test.sh is `go tool task test`, the README's test command: every test of
# the workspace against the real PostgreSQL and Redis.
#
# On a fresh machine setup waits on apt and on pgvector's C build while the
# Go packages and their tests wait to be compiled: the compile runs beside
# setup (`go list -export` compiles every package, test packages included,
# without linking), so that the tests start about as soon as setup is done.
# Its failure is the tests' to report: go test compiles whatever is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || export PATH="/usr/local/go/bin:$PATH"

go list -export -deps -test work >/dev/null 2>&1 &
compile=$!
trap 'kill "$compile" 2>/dev/null || true' EXIT
bash scripts/setup.sh
wait "$compile" || true
# -vet=off: verify runs the whole of go vet (CI runs both); go test's own
# subset of it, on a cold build cache, analyses every dependency first (a
# third of a fresh clone's test time on a 2-core machine).
go test -count=1 -vet=off -timeout 15m work
