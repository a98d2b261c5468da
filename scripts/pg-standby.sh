#!/usr/bin/env bash
# scripts/pg-standby.sh — a PostgreSQL primary and a streaming-replication
# standby on this machine, for the namespace failover test (geo,
# TestNamespaceFailover) and for trying failover by hand. Test data only:
# trust authentication, fsync off (a killed server process loses nothing the
# OS has; the test kills processes, not the machine).
#
#   eval "$(scripts/pg-standby.sh start)"  # exports BUSBAR_PG_PRIMARY_DSN, BUSBAR_PG_STANDBY_DSN
#   scripts/pg-standby.sh sync             # the standby confirms every commit (synchronous_standby_names)
#   scripts/pg-standby.sh async            # commits do not wait for the standby (the default)
#   scripts/pg-standby.sh crash-primary    # stop the primary at once (pg_ctl stop -m immediate)
#   scripts/pg-standby.sh promote          # make the standby a primary (pg_ctl promote)
#   scripts/pg-standby.sh stop             # stop both and remove their files
#
# BUSBAR_PG_STANDBY_DIR (default /tmp/busbar-test-pg-standby) holds both
# clusters; BUSBAR_PG_PRIMARY_PORT (default 55435) and BUSBAR_PG_STANDBY_PORT
# (default 55436) are their ports. It uses the server scripts/postgres.sh
# installs. As root, the clusters belong to the postgres user.
set -euo pipefail
# shellcheck source=scripts/pg-lib.sh
source "$(dirname "$0")/pg-lib.sh"

dir=${BUSBAR_PG_STANDBY_DIR:-/tmp/busbar-test-pg-standby}
pport=${BUSBAR_PG_PRIMARY_PORT:-55435}
sport=${BUSBAR_PG_STANDBY_PORT:-55436}
user=busbar
name=geo_standby

# serverbin is pgbin, or an error when no server is installed.
serverbin() {
  local d
  d=$(pgbin)
  if [ -z "$d" ] || [ ! -x "$d/initdb" ]; then
    echo "no PostgreSQL server binaries: run scripts/postgres.sh start once to install them" >&2
    exit 1
  fi
  echo "$d"
}


psql_primary() {
  as_owner "$(serverbin)/psql" -X -q -h 127.0.0.1 -p "$pport" -U "$user" -d postgres -v ON_ERROR_STOP=1 -c "$1" >&2
}

start() {
  local bin
  bin=$(serverbin)
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$dir"
  fi
  if [ ! -f "$dir/primary/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/primary" -U "$user" --auth=trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  if ! as_owner "$bin/pg_ctl" -D "$dir/primary" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$dir/primary" -l "$dir/primary.log" -w -t 60 \
      -o "-p $pport -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c wal_level=replica -c max_wal_senders=4 -c max_connections=100" \
      start >&2 || { cat "$dir/primary.log" >&2; exit 1; }
  fi
  if [ ! -f "$dir/standby/PG_VERSION" ]; then
    as_owner "$bin/pg_basebackup" -h 127.0.0.1 -p "$pport" -U "$user" -D "$dir/standby" -X stream \
      >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    as_owner touch "$dir/standby/standby.signal"
    echo "primary_conninfo = 'host=127.0.0.1 port=$pport user=$user application_name=$name'" |
      as_owner tee -a "$dir/standby/postgresql.auto.conf" >/dev/null
  fi
  if ! as_owner "$bin/pg_ctl" -D "$dir/standby" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$dir/standby" -l "$dir/standby.log" -w -t 60 \
      -o "-p $sport -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c hot_standby=on -c max_connections=100" \
      start >&2 || { cat "$dir/standby.log" >&2; exit 1; }
  fi
  echo "export BUSBAR_PG_PRIMARY_DSN='postgres://$user@127.0.0.1:$pport/postgres?sslmode=disable'"
  echo "export BUSBAR_PG_STANDBY_DSN='postgres://$user@127.0.0.1:$sport/postgres?sslmode=disable'"
}

stop() {
  local bin
  bin=$(serverbin)
  for c in standby primary; do
    if [ -f "$dir/$c/PG_VERSION" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/$c" -m immediate -w stop >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$dir"
}

case "${1:-start}" in
  start) start ;;
  sync) psql_primary "ALTER SYSTEM SET synchronous_standby_names = '$name'"; psql_primary "SELECT pg_reload_conf()" ;;
  async) psql_primary "ALTER SYSTEM RESET synchronous_standby_names"; psql_primary "SELECT pg_reload_conf()" ;;
  crash-primary) as_owner "$(serverbin)/pg_ctl" -D "$dir/primary" -m immediate -w stop >&2 ;;
  promote) as_owner "$(serverbin)/pg_ctl" -D "$dir/standby" -w promote >&2 ;;
  stop) stop ;;
  *) echo "usage: $0 start|sync|async|crash-primary|promote|stop" >&2; exit 2 ;;
esac
