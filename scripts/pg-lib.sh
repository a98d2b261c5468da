# scripts/pg-lib.sh — shell functions shared by scripts/postgres.sh and
# scripts/pg-standby.sh (sourced, not run).

# pgbin prints the directory of the newest PostgreSQL server binaries, or
# nothing when none is installed.
pgbin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$d" ] && command -v pg_ctl >/dev/null 2>&1; then
    d=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
  fi
  echo "$d"
}

# as_owner runs a command as the clusters' owner: PostgreSQL refuses to run
# as root, so as root that is the postgres user.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}
