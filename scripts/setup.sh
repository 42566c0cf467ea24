#!/usr/bin/env bash
# setup.sh makes sure the services the module needs are installed, running and
# reachable: PostgreSQL (15+) with pgvector >= 0.8.0 and pg_trgm, and Redis 7.
# It is idempotent: on a machine that already has everything it only checks.
#
# On Debian as root it installs what is missing and starts what is stopped.
# pgvector is not packaged for Debian 12, so it is built from Debian trixie's
# source package against postgresql-server-dev-<major>. The trixie deb-src line
# lives in a private sources list, so the machine's own apt setup is untouched.
# Elsewhere it stops with a message that says what to install.
#
# --browser also installs Debian's Chromium, which the dashboard's browser
# tests drive (they skip without it; CI passes the flag so they run there).
# Installed, it costs one `command -v`.
set -euo pipefail

browser=0
for arg in "$@"; do
  case $arg in
    --browser) browser=1 ;;
    *) printf 'setup: unknown argument %s (known: --browser)\n' "$arg" >&2; exit 2 ;;
  esac
done

# The schema owner's connection: the database is made with it; the
# application's and the operator's roles are made by `ctl migrate up`.
DATABASE_URL=${OWNER_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/knowledge?sslmode=disable}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
PGVECTOR_MIN=0.8.0

log() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

is_root_debian() { [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null; }

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then
    apt-get update -qq >/dev/null
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Maintenance URL: same server, database "postgres".
admin_url() {
  local url=$1
  printf '%s' "$url" | sed -E 's#(postgres(ql)?://[^/]*)/[^?]*#\1/postgres#'
}
db_name() {
  printf '%s' "$1" | sed -E 's#postgres(ql)?://[^/]*/([^?]*).*#\2#'
}

# pg_admin runs psql's arguments on the maintenance database, unaligned and
# quiet, stopping at the first error.
pg_admin() { psql "$(admin_url "$DATABASE_URL")" -Atq -v ON_ERROR_STOP=1 "$@"; }
pg_ready() { pg_admin -c 'select 1' >/dev/null 2>&1; }

# --- PostgreSQL -------------------------------------------------------------
if ! command -v psql >/dev/null; then
  if is_root_debian; then
    log "installing PostgreSQL client and server"
    apt_install postgresql postgresql-contrib
  else
    die "psql not found: install PostgreSQL 15+ (with contrib) or set OWNER_DATABASE_URL to a reachable server"
  fi
fi
if ! pg_ready; then
  if is_root_debian && command -v pg_ctlcluster >/dev/null; then
    if [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
      log "installing PostgreSQL server"
      apt_install postgresql postgresql-contrib
    fi
    for v in $(ls /etc/postgresql); do
      log "starting PostgreSQL $v"
      pg_ctlcluster --skip-systemctl-redirect "$v" main start || true
    done
    for _ in $(seq 1 30); do pg_ready && break; sleep 1; done
  fi
  pg_ready || die "PostgreSQL is not reachable at $(admin_url "$DATABASE_URL"): start it or set OWNER_DATABASE_URL"
fi

server_num=$(pg_admin -c 'show server_version_num')
major=$((server_num / 10000))
[ "$major" -ge 15 ] || die "PostgreSQL $major is too old: 15 or newer is needed"

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

vector_version() {
  pg_admin -c "select default_version from pg_available_extensions where name = 'vector'" 2>/dev/null
}
trgm_available() {
  [ "$(pg_admin -c "select count(*) from pg_available_extensions where name = 'pg_trgm'")" = 1 ]
}

if ! trgm_available; then
  if is_root_debian; then
    log "installing postgresql-contrib for pg_trgm"
    apt_install postgresql-contrib
  fi
  trgm_available || die "extension pg_trgm is not available: install PostgreSQL contrib"
fi

have=$(vector_version || true)
if [ -z "$have" ] || ! version_ge "$have" "$PGVECTOR_MIN"; then
  is_root_debian || die "pgvector >= $PGVECTOR_MIN is not available (found '${have:-none}'): install it (https://github.com/pgvector/pgvector#installation)"
  log "building pgvector from Debian trixie's source package against PostgreSQL $major"
  apt_install "postgresql-server-dev-$major" build-essential dpkg-dev
  work=$(mktemp -d /tmp/pgvector-build.XXXXXX)
  chmod 755 "$work"
  mkdir -p "$work/lists/partial"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" >"$work/sources.list"
  apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$work/lists")
  apt-get "${apt_opts[@]}" update -qq >/dev/null
  (cd "$work" && apt-get "${apt_opts[@]}" source -qq --download-only pgvector >/dev/null && dpkg-source -x --no-check ./pgvector_*.dsc src >/dev/null)
  make -s -C "$work/src" PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" >/dev/null
  make -s -C "$work/src" PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" install >/dev/null
  rm -rf "$work"
  have=$(vector_version || true)
  [ -n "$have" ] && version_ge "$have" "$PGVECTOR_MIN" || die "pgvector build did not install a usable extension (found '${have:-none}')"
fi
log "PostgreSQL $major with pgvector $have and pg_trgm"

# The application database (extensions are created by the migrations).
name=$(db_name "$DATABASE_URL")
if [ -n "$name" ] && [ "$(pg_admin -c "select count(*) from pg_database where datname = '$name'")" = 0 ]; then
  log "creating database $name"
  pg_admin -c "create database \"$name\"" >/dev/null
fi

# The tests' databases in memory (packages/testenv, memoryTablespace): a
# tablespace on tmpfs, made when the server runs on this machine as the
# postgres user and setup runs as root. tmpfs is emptied by a reboot: a
# tablespace whose directory went is made again, with the test databases
# that were in it (their catalogue rows are all that is left of them).
TEST_TABLESPACE_DIR=${TEST_TABLESPACE_DIR:-/dev/shm/knowledge-test}
ts_name=knowledge_test # testenv.MemoryTablespace
if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1 && [ -d "$(dirname "$TEST_TABLESPACE_DIR")" ] &&
  [ -d "$(pg_admin -c 'show data_directory' 2>/dev/null)" ]; then
  ts_dir=$(pg_admin -c "select pg_tablespace_location(oid) from pg_tablespace where spcname = '$ts_name'")
  if [ -n "$ts_dir" ] && [ ! -d "$ts_dir" ]; then
    log "tablespace $ts_name lost its directory $ts_dir: making it again"
    for d in $(pg_admin -c "select d.datname from pg_database d join pg_tablespace t on t.oid = d.dattablespace where t.spcname = '$ts_name'"); do
      pg_admin -c "drop database \"$d\" with (force)" 2>/dev/null ||
        pg_admin -c "alter database \"$d\" is_template false" -c "drop database \"$d\"" >/dev/null 2>&1 || true
    done
    pg_admin -c "drop tablespace $ts_name" >/dev/null 2>&1 || true
    ts_dir=
  fi
  if [ -z "$ts_dir" ]; then
    install -d -o postgres -g postgres -m 700 "$TEST_TABLESPACE_DIR"
    if err=$(pg_admin -c "create tablespace $ts_name location '$TEST_TABLESPACE_DIR'" 2>&1); then
      log "test databases in memory: tablespace $ts_name at $TEST_TABLESPACE_DIR"
    else # e.g. the directory holds another server's tablespace: the tests run on disk
      log "no tablespace in memory for the tests' databases (they stay on disk): $err"
    fi
  fi
fi

# --- Redis ------------------------------------------------------------------
redis_host=$(printf '%s' "$REDIS_URL" | sed -E 's#redis://([^@]*@)?([^:/]+).*#\2#')
redis_port=$(printf '%s' "$REDIS_URL" | sed -nE 's#redis://([^@]*@)?[^:/]+:([0-9]+).*#\2#p')
redis_port=${redis_port:-6379}
redis_ready() {
  if command -v redis-cli >/dev/null; then
    [ "$(redis-cli -h "$redis_host" -p "$redis_port" ping 2>/dev/null)" = PONG ]
  else
    (exec 3<>"/dev/tcp/$redis_host/$redis_port" && printf 'PING\r\n' >&3 && head -c 5 <&3 | grep -q PONG) 2>/dev/null
  fi
}
if ! redis_ready; then
  if is_root_debian; then
    command -v redis-server >/dev/null || { log "installing Redis"; apt_install redis-server redis-tools; }
    log "starting Redis on $redis_host:$redis_port"
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$redis_port" --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/knowledge.log
    for _ in $(seq 1 30); do redis_ready && break; sleep 0.5; done
  fi
  redis_ready || die "Redis is not reachable at $REDIS_URL: start it or set REDIS_URL"
fi
log "Redis reachable at $redis_host:$redis_port"

# --- Chromium (--browser) -----------------------------------------------------
if [ "$browser" = 1 ]; then
  if ! command -v chromium >/dev/null; then
    is_root_debian || die "chromium not found: install Chromium (Debian: apt-get install chromium) for the dashboard's browser tests"
    log "installing Chromium for the dashboard's browser tests"
    apt_install chromium
  fi
  log "$(chromium --version 2>/dev/null || echo chromium)"
fi
log "ready"
