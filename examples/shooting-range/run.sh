#!/usr/bin/env bash
# examples/shooting-range/run.sh — play the shooting range with one command:
# starts a throwaway PostgreSQL (scripts/postgres.sh), builds busbar and runs
# `busbar serve` with this directory's Config.json on free ports, runs the
# game against both, and stops everything. Extra arguments go to the game,
# e.g. run.sh --games 5 --shots 100.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
work=$(mktemp -d)
export BUSBAR_PG_DIR=${BUSBAR_PG_DIR:-/tmp/busbar-shooting-range-pg} BUSBAR_PG_PORT=${BUSBAR_PG_PORT:-55480}
serve_pid=
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
  scripts/postgres.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

pgenv=$(scripts/postgres.sh start)
eval "$pgenv" # exports BUSBAR_TEST_POSTGRES_DSN
go build -o "$work/busbar" ./cmd/busbar
amqp_port=${BUSBAR_EXAMPLE_AMQP_PORT:-5682}
"$work/busbar" serve --data "$work/data" --config examples/shooting-range/Config.json \
  --amqp "127.0.0.1:$amqp_port" --http - >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do # wait for the connection string (at most 10 s)
  conn=$(grep -o 'Endpoint=[^ ]*' "$work/serve.log" | head -n 1 || true)
  [ -n "$conn" ] && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.1
done
[ -n "$conn" ] || { echo "busbar serve printed no connection string"; cat "$work/serve.log"; exit 1; }
go run ./examples/shooting-range --connection-string "$conn" --postgres "$BUSBAR_TEST_POSTGRES_DSN" "$@"
