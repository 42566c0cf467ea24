#!/usr/bin/env bash
# cluster.sh starts (up) or stops (down) a Citus cluster and a Redis Cluster on
# loopback for running and testing the product beyond one machine:
#
#   PostgreSQL 15 + Citus: a coordinator (port 5440) and two workers (5441, 5442),
#     each its own data directory under $CLUSTER_DIR/pg/<port>, with pgvector and
#     pg_trgm, shared_preload_libraries = citus;
#   Redis Cluster: three masters (7001-7003) under $CLUSTER_DIR/redis/<port>.
#
# The machine's own PostgreSQL (5432) and Redis (6379) are never touched.
# Citus is built from ../shared/vendor/citus (the release tarball and a patch for
# PostgreSQL 15.20) only when it is not installed yet, and installed from
# the build cache ($CITUS_CACHE_DIR, below) when that holds the same build.
# `up` is idempotent: what
# runs is left running. It migrates the coordinator and ends by printing the
# environment lines the apps run with.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-/var/tmp/knowledge-cluster}
# ../shared beside the repository; from a git worktree elsewhere, beside
# the main checkout; from a clone of a checkout on this machine (CI's
# clean clone), beside the checkout it was cloned from.
if [ -z "${CITUS_VENDOR:-}" ]; then
  CITUS_VENDOR=$ROOT/../shared/vendor/citus
  if [ ! -d "$CITUS_VENDOR" ] && common=$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null); then
    CITUS_VENDOR=$(dirname "$common")/../shared/vendor/citus
  fi
  if [ ! -d "$CITUS_VENDOR" ] && origin=$(git -C "$ROOT" remote get-url origin 2>/dev/null) && [ -d "$origin" ]; then
    CITUS_VENDOR=$(cd "$origin" && pwd)/../shared/vendor/citus
  fi
fi
CITUS_VERSION=13.2.2
PG_MAJOR=${PG_MAJOR:-15}
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PG_PORTS=(${CLUSTER_PG_PORTS:-5440 5441 5442})   # coordinator first
REDIS_PORTS=(${CLUSTER_REDIS_PORTS:-7001 7002 7003})
DB=knowledge

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }

citus_installed() { [ -f "$PG_BIN/../lib/citus.so" ] || [ -f "/usr/lib/postgresql/$PG_MAJOR/lib/citus.so" ]; }

# The build is cached outside the repository, as a tarball of the files
# `make install` writes, keyed by the source's and the patch's checksums,
# the PostgreSQL release it was built against and the architecture: a
# machine that keeps $CITUS_CACHE_DIR (CI's cache) installs Citus in
# seconds instead of building it again. CITUS_CACHE_DIR= (empty) turns
# the cache off.
CITUS_CACHE_DIR=${CITUS_CACHE_DIR-/var/cache/knowledge-citus}
citus_cache_file() {
  local pg sums
  pg=$("$PG_BIN/postgres" --version | awk '{print $3}')
  sums=$(cd "$CITUS_VENDOR" && sha256sum "citus-$CITUS_VERSION.tar.gz" "citus-$CITUS_VERSION-pg15.20.patch" | sha256sum | cut -c1-16)
  echo "$CITUS_CACHE_DIR/citus-$CITUS_VERSION-pg$pg-$(uname -m)-$sums.tar.gz"
}

# The shared libraries citus.so needs at run time (its build needs their
# -dev packages; a machine installing from the cache may lack them).
citus_runtime_libs() {
  local so=/usr/lib/postgresql/$PG_MAJOR/lib/citus.so
  if ldd "$so" | grep -q 'not found'; then
    log "installing the libraries citus.so needs: $(ldd "$so" | awk '/not found/ {print $1}' | tr '\n' ' ')"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libcurl4 liblz4-1 libzstd1 libkrb5-3 >/dev/null \
      || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libcurl4 liblz4-1 libzstd1 libkrb5-3 >/dev/null; }
    ! ldd "$so" | grep 'not found' || die "citus.so still misses libraries"
  fi
}

build_citus() {
  citus_installed && return 0
  local tarball=$CITUS_VENDOR/citus-$CITUS_VERSION.tar.gz
  local patchf=$CITUS_VENDOR/citus-$CITUS_VERSION-pg15.20.patch
  if [ ! -f "$tarball" ]; then
    die "Citus is not installed and its source is not at $tarball.
  Put the Citus $CITUS_VERSION release tarball (and its PostgreSQL 15.20 patch) there, set
  CITUS_VENDOR to the folder that holds them, or install Citus from its own packages
  (https://docs.citusdata.com/en/stable/installation/) for PostgreSQL $PG_MAJOR."
  fi
  [ "$(id -u)" = 0 ] || die "installing Citus needs root (make install into PostgreSQL $PG_MAJOR's directories)"
  (cd "$CITUS_VENDOR" && sha256sum -c --quiet SHA256SUMS) || die "checksums of $CITUS_VENDOR do not match SHA256SUMS"
  local cache=""
  [ -n "$CITUS_CACHE_DIR" ] && cache=$(citus_cache_file)
  # --no-overwrite-dir: the archive holds only files, and directories that
  # exist keep their owner and mode.
  if [ -n "$cache" ] && [ -f "$cache" ] && tar xzf "$cache" -C / --no-overwrite-dir && citus_installed; then
    citus_runtime_libs
    log "Citus $CITUS_VERSION installed from the build cache $cache"
    return 0
  fi
  log "building Citus $CITUS_VERSION for PostgreSQL $PG_MAJOR (once; about 4 minutes on two cores)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "postgresql-server-dev-$PG_MAJOR" build-essential liblz4-dev libzstd-dev libcurl4-openssl-dev libkrb5-dev >/dev/null \
    || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "postgresql-server-dev-$PG_MAJOR" build-essential liblz4-dev libzstd-dev libcurl4-openssl-dev libkrb5-dev >/dev/null; }
  local work
  work=$(mktemp -d /tmp/citus-build.XXXXXX)
  tar xzf "$tarball" -C "$work"
  # Installed into a staging tree first, which is what the cache keeps.
  (cd "$work/citus-$CITUS_VERSION" && patch -s -p1 <"$patchf" \
    && ./configure PG_CONFIG="$PG_BIN/pg_config" >"$work/configure.log" 2>&1 \
    && make -s -j"$(nproc)" >"$work/make.log" 2>&1 && make -s install DESTDIR="$work/stage" >"$work/install.log" 2>&1 \
    && cd "$work/stage" && find . -type f -o -type l | sort >"$work/files" \
    && tar czf "$work/citus.tar.gz" -T "$work/files" && tar xzf "$work/citus.tar.gz" -C / --no-overwrite-dir) \
    || die "the Citus build failed: logs in $work"
  citus_installed || die "the Citus build installed no citus.so"
  if [ -n "$cache" ]; then
    mkdir -p "$CITUS_CACHE_DIR" && cp "$work/citus.tar.gz" "$cache.tmp" && mv "$cache.tmp" "$cache" \
      && log "the build is cached in $cache" || log "could not write the build cache $cache (the build is installed)"
  fi
  rm -rf "$work"
  log "Citus $CITUS_VERSION installed"
}

# --- PostgreSQL instances ----------------------------------------------------
# Each instance runs as the postgres user from its own data directory, trusts
# loopback (like the machine's local setup) and listens on 127.0.0.1 only.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_dir() { echo "$CLUSTER_DIR/pg/$1"; }
pg_up() { as_pg "$PG_BIN/pg_ctl" -D "$(pg_dir "$1")" status >/dev/null 2>&1; }
psql_at() { local port=$1 db=$2; shift 2; psql "postgres://postgres@127.0.0.1:$port/$db?sslmode=disable" -v ON_ERROR_STOP=1 -Atq "$@"; }

start_pg() {
  local port=$1 dir
  dir=$(pg_dir "$port")
  if [ ! -f "$dir/PG_VERSION" ]; then
    log "initialising PostgreSQL $PG_MAJOR on 127.0.0.1:$port ($dir)"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$CLUSTER_DIR/pg"
    as_pg "$PG_BIN/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    cat >>"$dir/postgresql.conf" <<CONF
# knowledge cluster (scripts/cluster.sh)
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
shared_preload_libraries = 'citus'
max_connections = 300
shared_buffers = 128MB
wal_level = logical
max_prepared_transactions = 200
citus.max_client_connections = 250
CONF
  fi
  if ! pg_up "$port"; then
    log "starting PostgreSQL on 127.0.0.1:$port"
    as_pg "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null
  fi
}

setup_node() {
  local port=$1
  if [ "$(psql_at "$port" postgres -c "select count(*) from pg_database where datname = '$DB'")" = 0 ]; then
    psql_at "$port" postgres -c "create database $DB" >/dev/null
  fi
  # citus first (it must be the first extension of a database); vector and
  # pg_trgm are made on every node so shards and functions find them.
  # (Once a worker is in the cluster it refuses DDL, even a no-op: only what
  # is missing is made.)
  local ext
  for ext in citus vector pg_trgm; do
    if [ "$(psql_at "$port" "$DB" -c "select count(*) from pg_extension where extname = '$ext'")" = 0 ]; then
      psql_at "$port" "$DB" -c "create extension $ext" >/dev/null
    fi
  done
}

# --- Redis Cluster -------------------------------------------------------------
redis_dir() { echo "$CLUSTER_DIR/redis/$1"; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; }
start_redis() {
  local port=$1 dir
  dir=$(redis_dir "$port")
  mkdir -p "$dir"
  if ! redis_up "$port"; then
    log "starting Redis cluster node on 127.0.0.1:$port"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --cluster-enabled yes \
      --cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 2000 --appendonly yes \
      --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --save ""
    for _ in $(seq 1 50); do redis_up "$port" && break; sleep 0.1; done
    redis_up "$port" || die "Redis on port $port did not start: see $dir/redis.log"
  fi
}

urls() {
  local c=${PG_PORTS[0]} r="" p
  for p in "${REDIS_PORTS[@]}"; do r="${r:+$r,}127.0.0.1:$p"; done
  echo "DATABASE_URL=postgres://knowledge_app@127.0.0.1:$c/$DB?sslmode=disable"
  echo "OPERATOR_DATABASE_URL=postgres://knowledge_operator@127.0.0.1:$c/$DB?sslmode=disable"
  echo "OWNER_DATABASE_URL=postgres://postgres@127.0.0.1:$c/$DB?sslmode=disable"
  echo "REDIS_URL=redis+cluster://$r"
}

# The workers' host:port, comma-separated (testenv's TEST_CITUS_WORKERS).
workers() {
  local w="" p
  for p in "${PG_PORTS[@]:1}"; do w="${w:+$w,}127.0.0.1:$p"; done
  echo "$w"
}

up() {
  command -v redis-server >/dev/null || die "redis-server not found: apt-get install redis-server (or run go tool task setup)"
  [ -x "$PG_BIN/initdb" ] || die "PostgreSQL $PG_MAJOR's server binaries are not in $PG_BIN: run go tool task setup"
  build_citus
  local p coord=${PG_PORTS[0]}
  for p in "${PG_PORTS[@]}"; do start_pg "$p"; done
  for p in "${PG_PORTS[@]}"; do setup_node "$p"; done
  # The coordinator knows itself and its workers (idempotent: citus_add_node
  # returns the existing node's id).
  psql_at "$coord" "$DB" -c "select citus_set_coordinator_host('127.0.0.1', $coord)" >/dev/null
  for p in "${PG_PORTS[@]:1}"; do
    psql_at "$coord" "$DB" -c "select citus_add_node('127.0.0.1', $p)" >/dev/null
  done
  log "Citus coordinator 127.0.0.1:$coord, workers: $(psql_at "$coord" "$DB" -c "select string_agg(nodename || ':' || nodeport, ' ') from pg_dist_node where noderole = 'primary' and groupid <> 0")"

  for p in "${REDIS_PORTS[@]}"; do start_redis "$p"; done
  if ! redis-cli -h 127.0.0.1 -p "${REDIS_PORTS[0]}" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
    if [ "$(redis-cli -h 127.0.0.1 -p "${REDIS_PORTS[0]}" cluster info | sed -n 's/^cluster_known_nodes:\([0-9]*\).*/\1/p')" = 1 ]; then
      log "creating the Redis Cluster (${#REDIS_PORTS[@]} masters)"
      local nodes=() ; for p in "${REDIS_PORTS[@]}"; do nodes+=("127.0.0.1:$p"); done
      redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
    fi
    for _ in $(seq 1 100); do
      redis-cli -h 127.0.0.1 -p "${REDIS_PORTS[0]}" cluster info | grep -q 'cluster_state:ok' && break; sleep 0.1
    done
  fi
  redis-cli -h 127.0.0.1 -p "${REDIS_PORTS[0]}" cluster info | grep -q 'cluster_state:ok' || die "the Redis Cluster is not ok: redis-cli -p ${REDIS_PORTS[0]} cluster info"
  log "Redis Cluster ok on ports ${REDIS_PORTS[*]}"

  log "migrating the coordinator"
  (cd "$ROOT" && OWNER_DATABASE_URL="postgres://postgres@127.0.0.1:$coord/$DB?sslmode=disable" go run ./apps/ctl migrate up >&2)
  log "ready; run the apps with:"
  urls
}

# --- A single node beside the cluster, for figures to compare -------------
# (`single-up`): a plain PostgreSQL 15 (no Citus) on $SINGLE_PG_PORT and a
# plain Redis on $SINGLE_REDIS_PORT, under $CLUSTER_DIR/single, migrated
# the same way; stopped by `down` with the cluster.
SINGLE_PG_PORT=${SINGLE_PG_PORT:-5443}
SINGLE_REDIS_PORT=${SINGLE_REDIS_PORT:-7010}
single_urls() {
  local p=$SINGLE_PG_PORT
  echo "DATABASE_URL=postgres://knowledge_app@127.0.0.1:$p/$DB?sslmode=disable"
  echo "OPERATOR_DATABASE_URL=postgres://knowledge_operator@127.0.0.1:$p/$DB?sslmode=disable"
  echo "OWNER_DATABASE_URL=postgres://postgres@127.0.0.1:$p/$DB?sslmode=disable"
  echo "REDIS_URL=redis://127.0.0.1:$SINGLE_REDIS_PORT/0"
}
single_up() {
  local p=$SINGLE_PG_PORT dir=$CLUSTER_DIR/single/pg
  if [ ! -f "$dir/PG_VERSION" ]; then
    log "initialising a single PostgreSQL $PG_MAJOR on 127.0.0.1:$p ($dir)"
    mkdir -p "$dir"; [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$CLUSTER_DIR/single"
    as_pg "$PG_BIN/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\nmax_connections = 300\nshared_buffers = 128MB\n" "$p" "$dir" >>"$dir/postgresql.conf"
  fi
  as_pg "$PG_BIN/pg_ctl" -D "$dir" status >/dev/null 2>&1 || as_pg "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null
  [ "$(psql_at "$p" postgres -c "select count(*) from pg_database where datname = '$DB'")" = 1 ] || psql_at "$p" postgres -c "create database $DB" >/dev/null
  local rdir=$CLUSTER_DIR/single/redis
  mkdir -p "$rdir"
  redis_up "$SINGLE_REDIS_PORT" || redis-server --daemonize yes --bind 127.0.0.1 --port "$SINGLE_REDIS_PORT" --dir "$rdir" \
    --pidfile "$rdir/redis.pid" --logfile "$rdir/redis.log" --save "" --appendonly yes
  for _ in $(seq 1 50); do redis_up "$SINGLE_REDIS_PORT" && break; sleep 0.1; done
  (cd "$ROOT" && OWNER_DATABASE_URL="postgres://postgres@127.0.0.1:$p/$DB?sslmode=disable" go run ./apps/ctl migrate up >&2)
  single_urls
}

# check: every node of the Citus cluster reaches every other and is
# active, and the Redis Cluster serves every slot; non-zero otherwise.
check() {
  local coord=${PG_PORTS[0]} bad
  bad=$(psql_at "$coord" "$DB" -c "select count(*) from citus_check_cluster_node_health() where result is not true") \
    || die "the coordinator on $coord does not answer"
  [ "$bad" = 0 ] || die "$bad node pairs of the Citus cluster do not reach each other: select * from citus_check_cluster_node_health()"
  bad=$(psql_at "$coord" "$DB" -c "select count(*) from pg_dist_node where not isactive")
  [ "$bad" = 0 ] || die "$bad Citus nodes are not active: select * from pg_dist_node"
  redis-cli -h 127.0.0.1 -p "${REDIS_PORTS[0]}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' \
    || die "the Redis Cluster is not ok: redis-cli -p ${REDIS_PORTS[0]} cluster info"
  log "healthy: every Citus node reaches every other; the Redis Cluster serves every slot"
}

down() {
  local p dir
  for p in "${REDIS_PORTS[@]}"; do
    dir=$(redis_dir "$p")
    if [ -f "$dir/redis.pid" ] && kill -0 "$(cat "$dir/redis.pid")" 2>/dev/null; then
      log "stopping Redis on $p"; kill "$(cat "$dir/redis.pid")"
    fi
  done
  for p in "${PG_PORTS[@]}"; do
    if [ -f "$(pg_dir "$p")/PG_VERSION" ] && pg_up "$p"; then
      log "stopping PostgreSQL on $p"; as_pg "$PG_BIN/pg_ctl" -D "$(pg_dir "$p")" -m fast -w stop >/dev/null
    fi
  done
  dir=$CLUSTER_DIR/single/redis
  if [ -f "$dir/redis.pid" ] && kill -0 "$(cat "$dir/redis.pid")" 2>/dev/null; then
    log "stopping the single Redis on $SINGLE_REDIS_PORT"; kill "$(cat "$dir/redis.pid")"
  fi
  if [ -f "$CLUSTER_DIR/single/pg/PG_VERSION" ] && as_pg "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/single/pg" status >/dev/null 2>&1; then
    log "stopping the single PostgreSQL on $SINGLE_PG_PORT"; as_pg "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/single/pg" -m fast -w stop >/dev/null
  fi
  if [ "${1:-}" = --purge ]; then log "removing $CLUSTER_DIR"; rm -rf "$CLUSTER_DIR"; fi
}

case "${1:-}" in
  build) build_citus ;;
  check) check ;;
  up) up ;;
  down) shift; down "$@" ;;
  urls) urls ;;
  workers) workers ;;
  single-up) single_up ;;
  single-urls) single_urls ;;
  *) die "usage: $0 up | down [--purge] | check | urls | workers | build | single-up | single-urls" ;;
esac
