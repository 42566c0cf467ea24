#!/usr/bin/env bash
# test-cluster-smoke.sh proves the Citus path on the loopback cluster of
# scripts/cluster.sh (started here, Citus built or taken from its build
# cache if need be), quickly enough for CI to run on every change:
#
#   1. router plans: every per-org statement of the product, EXPLAINed on
#      the coordinator, is one task on the org's worker
#      (TestClusterRouterPlans, packages/knowledge/jobs);
#   2. MCP round trip: two orgs whose shards are on different workers
#      store, search, stay apart and forget over MCP, with the Redis
#      Cluster (TestClusterMCPRoundTrip, apps/mcp);
#   3. a fault: one worker stopped, the org on the other keeps storing and
#      searching, the worker started again (TestClusterWorkerStopped,
#      packages/knowledge);
#   4. the apps as built (scripts/cluster-smoke.sh): ctl, the MCP server,
#      the worker and the dashboard on the cluster.
#
# Each test must have run and passed: one that skips (a missing variable,
# a renamed test) fails the smoke. It ends by checking the cluster is
# healthy again (scripts/cluster.sh check) and prints each part's time.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
log() { printf 'test:cluster:smoke: %s\n' "$*" >&2; }
fail() { printf 'test:cluster:smoke: FAIL: %s\n' "$*" >&2; exit 1; }
times=()
t0=$(date +%s)
since() { echo "$(( $(date +%s) - $1 )) s"; }

# A cluster of its own, made from nothing and removed at the end: a
# cluster left by an earlier run (a data directory in /var/tmp outlives a
# reboot, migrated perhaps by another build, its Redis nodes.conf naming
# an older cluster) must not decide whether this change passes, and a
# developer's cluster on the default ports (cluster:up) is left alone.
export CLUSTER_DIR=${SMOKE_CLUSTER_DIR:-/var/tmp/knowledge-cluster-smoke}
export CLUSTER_PG_PORTS=${SMOKE_PG_PORTS:-5450 5451 5452}
export CLUSTER_REDIS_PORTS=${SMOKE_REDIS_PORTS:-7011 7012 7013}
bash scripts/cluster.sh down --purge >/dev/null 2>&1 || true
cleanup() { rm -f "${out:-}"; bash scripts/cluster.sh down --purge >/dev/null 2>&1 || true; }
trap cleanup EXIT

s=$(date +%s)
bash scripts/cluster.sh up >/dev/null
times+=("cluster up $(since "$s")")
urls=$(bash scripts/cluster.sh urls)
owner=$(sed -n 's/^OWNER_DATABASE_URL=//p' <<<"$urls")
coord=$(sed -n 's#^OWNER_DATABASE_URL=postgres://postgres@\([^/]*\)/.*#\1#p' <<<"$urls")
# testenv's cluster mode, as in scripts/test-cluster.sh.
export TEST_DATABASE_URL="postgres://postgres@$coord/postgres?sslmode=disable"
export TEST_CITUS_WORKERS=${TEST_CITUS_WORKERS:-$(bash scripts/cluster.sh workers)}
export TEST_REDIS_CLUSTER_URL=${TEST_REDIS_CLUSTER_URL:-$(sed -n 's/^REDIS_URL=//p' <<<"$urls")}

out=$(mktemp /tmp/cluster-smoke-test.XXXXXX)
# one name test pkg [env...]: runs test alone in pkg, verbosely, and fails
# unless it passed.
one() {
  local name=$1 test=$2 pkg=$3 s
  shift 3
  s=$(date +%s)
  log "$name: $test ($pkg)"
  env "$@" go test -count=1 -timeout 10m -v -run "^$test\$" "$pkg" 2>&1 | tee "$out" >&2 || fail "$name: $test failed"
  grep -q -- "^--- PASS: $test " "$out" || fail "$name: $test did not run (skipped or not found in $pkg)"
  times+=("$name $(since "$s")")
}
one "router plans" TestClusterRouterPlans ./packages/knowledge/jobs CLUSTER_DATABASE_URL="$owner"
one "MCP round trip" TestClusterMCPRoundTrip ./apps/mcp
one "worker stopped" TestClusterWorkerStopped ./packages/knowledge TEST_CLUSTER_FAULTS=1
s=$(date +%s)
bash scripts/cluster-smoke.sh || fail "the apps' smoke (scripts/cluster-smoke.sh) failed"
times+=("apps $(since "$s")")
bash scripts/cluster.sh check || fail "the cluster is not healthy after the smoke"
log "PASS in $(since "$t0"): $(IFS=,; echo "${times[*]}" | sed 's/,/, /g')"
