#!/usr/bin/env bash
# scripts/postgres.sh — a throwaway PostgreSQL for the tests that need one
# (saga/sagapg). It installs Debian's postgresql package if no server is
# found, initialises a cluster in a temporary directory, serves it on a
# loopback port (trust authentication, fsync off: test data only) and prints
# its DSN, which the tests read from BUSBAR_TEST_POSTGRES_DSN.
#
#   eval "$(scripts/postgres.sh start)"   # exports BUSBAR_TEST_POSTGRES_DSN
#   scripts/postgres.sh stop              # stops it and removes its files
#
# BUSBAR_PG_DIR (default /tmp/busbar-test-pg) and BUSBAR_PG_PORT (default
# 55432) choose where. PostgreSQL refuses to run as root: as root, the
# cluster belongs to the postgres user and commands run through runuser.
set -euo pipefail
# shellcheck source=scripts/pg-lib.sh
source "$(dirname "$0")/pg-lib.sh"

dir=${BUSBAR_PG_DIR:-/tmp/busbar-test-pg}
port=${BUSBAR_PG_PORT:-55432}
user=busbar



start() {
  local bin
  bin=$(pgbin)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "installing postgresql (Debian)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    bin=$(pgbin)
  fi
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$dir"
  fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/data" -U "$user" --auth=trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  if ! as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >&2 || { cat "$dir/server.log" >&2; exit 1; }
  fi
  echo "export BUSBAR_TEST_POSTGRES_DSN='postgres://$user@127.0.0.1:$port/postgres?sslmode=disable'"
}

stop() {
  local bin
  bin=$(pgbin)
  if [ -n "$bin" ] && [ -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  fi
  rm -rf "$dir"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
