#!/usr/bin/env bash
# test-cluster.sh runs the knowledge, tenancy, MCP and worker test suites
# against the loopback Citus cluster of scripts/cluster.sh (started here if
# it is not running): testenv's cluster mode (TEST_CITUS_WORKERS) gives each
# test a Citus database of its own, cloned on every node from a migrated
# template. Redis stays the machine's single Redis (testenv leases its
# logical databases); the Redis Cluster is named to the fault tests
# (TEST_REDIS_CLUSTER_URL), and the product's Redis Cluster support is also
# tested by the smoke script. Tests that cannot hold on Citus skip with the
# reason (docs/operators.md, "The test suites on the cluster").
# TEST_CLUSTER_RUN=regexp narrows the tests; TEST_CLUSTER_PKGS the packages;
# arguments go to go test.
#
# Two settings make the suites several times faster than Citus's and go
# test's defaults, and change no rule they check: the test databases'
# tables have 4 shards each (TEST_CITUS_SHARD_COUNT; Citus's default of 32
# makes every test's clone of the template on three nodes 2.5 times
# bigger), and 8 tests of a package run at once (TEST_CLUSTER_PARALLEL; go
# test's default is the number of cores, and a test on the cluster mostly
# waits for its nodes). The cluster is scripts/cluster.sh's, so its
# CLUSTER_DIR, CLUSTER_PG_PORTS and CLUSTER_REDIS_PORTS choose it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
bash scripts/cluster.sh up >/dev/null
urls=$(bash scripts/cluster.sh urls)
coord=$(sed -n 's#^OWNER_DATABASE_URL=postgres://postgres@\([^/]*\)/.*#\1#p' <<<"$urls")
export TEST_DATABASE_URL="postgres://postgres@$coord/postgres?sslmode=disable"
export TEST_CITUS_WORKERS=${TEST_CITUS_WORKERS:-$(bash scripts/cluster.sh workers)}
export TEST_REDIS_CLUSTER_URL=${TEST_REDIS_CLUSTER_URL:-$(sed -n 's/^REDIS_URL=//p' <<<"$urls")}
export TEST_CITUS_SHARD_COUNT=${TEST_CITUS_SHARD_COUNT-4}
pkgs=${TEST_CLUSTER_PKGS:-./packages/knowledge/... ./packages/tenancy/... ./apps/mcp/... ./apps/worker/...}
start=$(date +%s)
status=0
# One go test per package, in turn: a go test of many packages holds the
# output of every package but the one it prints, which grew past 20 GB on
# a cluster run; one at a time, each package's output streams and its
# time is printed as it ends.
# shellcheck disable=SC2086
for pkg in $(go list $pkgs); do
  go test -count=1 -timeout 40m -parallel "${TEST_CLUSTER_PARALLEL:-8}" ${TEST_CLUSTER_RUN:+-run "$TEST_CLUSTER_RUN"} "$@" "$pkg" || status=1
done
echo "test:cluster: $(( $(date +%s) - start )) s wall, exit $status" >&2
exit $status
