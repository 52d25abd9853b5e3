#!/usr/bin/env bash
# Throwaway PostgreSQL clusters for the tests (Debian's postgresql package; nothing system-wide
# is touched: the cluster lives in a temporary folder, listens on 127.0.0.1 only, and trusts
# local connections because it holds test data only).
#
#   scripts/postgres.sh start DIR PORT   create (if needed) and start a cluster in DIR on PORT
#   scripts/postgres.sh stop DIR         stop it (fast shutdown, or POSTGRES_STOP_MODE=immediate: a
#                                        crash; the folder stays)
#   scripts/postgres.sh run CMD...       start one on a free port, export KEYFOB_TEST_POSTGRES
#                                        (postgres://keyfob@127.0.0.1:PORT/keyfob_test), run CMD,
#                                        stop and delete the cluster. When KEYFOB_TEST_POSTGRES is
#                                        set already, just runs CMD.
set -euo pipefail

bindir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$dir" ] || { echo "postgres.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
  echo "$dir"
}

# initdb and postgres refuse to run as root: run them as the postgres user then.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local dir=$1 port=$2 bin
  bin=$(bindir)
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/data" -U keyfob --auth=trust --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  # fsync off: test data, and it makes the suite several times faster. POSTGRES_FSYNC=on (the
  # load harness's comparison) syncs like a production server, with synchronous_commit off: the
  # durability of SQLite's synchronous=NORMAL (a crash may lose the last commits, never corrupt).
  # POSTGRES_FSYNC=full: PostgreSQL's own defaults (fsync, synchronous_commit, full_page_writes on),
  # for the crash tests: an acknowledged write must survive `pg_ctl stop -m immediate`.
  local durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  [ "${POSTGRES_FSYNC:-off}" = "on" ] && durability="-c synchronous_commit=off"
  [ "${POSTGRES_FSYNC:-off}" = "full" ] && durability=""
  # POSTGRES_SSL=on: TLS with a throwaway self-signed certificate (the sslmode tests).
  local tls=""
  if [ "${POSTGRES_SSL:-off}" = "on" ]; then
    if [ ! -f "$dir/server.key" ]; then
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 \
        -keyout "$dir/server.key" -out "$dir/server.crt" >/dev/null 2>&1
      chmod 600 "$dir/server.key"
      [ "$(id -u)" -eq 0 ] && chown postgres: "$dir/server.key" "$dir/server.crt"
    fi
    tls="-c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key"
  fi
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir $durability $tls -c max_connections=400" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  PGSSLMODE=disable as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U keyfob -d postgres -qAtc \
    "SELECT 1 FROM pg_database WHERE datname = 'keyfob_test'" | grep -q 1 \
    || PGSSLMODE=disable as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U keyfob keyfob_test
}

stop() {
  local dir=$1
  [ -f "$dir/data/postmaster.pid" ] || return 0
  as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m "${POSTGRES_STOP_MODE:-fast}" -w stop >/dev/null 2>&1 || true
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

case "${1:-}" in
  start) start "$2" "$3" ;;
  stop) stop "$2" ;;
  run)
    shift
    if [ -n "${KEYFOB_TEST_POSTGRES:-}" ]; then exec "$@"; fi
    dir=$(mktemp -d /tmp/keyfob-pg.XXXXXX)
    port=$(free_port)
    trap 'stop "$dir"; rm -rf "$dir"' EXIT
    start "$dir" "$port"
    export KEYFOB_TEST_POSTGRES="postgres://keyfob@127.0.0.1:$port/keyfob_test"
    echo "postgres.sh: throwaway cluster on 127.0.0.1:$port ($dir)"
    "$@"
    ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
esac
