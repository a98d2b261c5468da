#!/usr/bin/env bash
# scripts/test.sh — run every Busbar test that needs only this repository and the
# machine's toolchains. It installs what the tests need (Node peers from npm,
# the Java suite's artifacts from Maven Central, the Python suite's venv from PyPI,
# Debian's chromium for the console's browser test, staticcheck from the Go
# module proxy) and then runs, in order:
#   gofmt check, go vet, staticcheck, a throwaway PostgreSQL (for the saga
#   store), go test -race ./..., and the bench/ module's tests.
# Usage: scripts/test.sh [extra go test flags, e.g. -run TestX]
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

STATICCHECK_VERSION=v0.8.2 # staticcheck 2026.2.2

log "toolchain"
go version
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  log "installing nodejs and npm (Debian)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
node --version

if ! [ -x /usr/bin/chromium ]; then
  log "installing chromium (Debian), for the console's browser test"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version

log "node test peers (test/node; playwright-core drives chromium, never downloads a browser)"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
(cd test/node && npm ci --no-audit --no-fund --loglevel=error)

if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  log "installing a JDK and Maven (Debian)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless maven >/dev/null
fi
log "java test peers (conformance/java: Maven Central into ~/.m2, compiled, no test run)"
(cd conformance/java && mvn -B -q -ntp -Dtest=NONE -Dsurefire.failIfNoSpecifiedTests=false test)
log "python conformance suite (conformance/python/.venv)"
if ! command -v python3 >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
fi
python3 --version
conformance/python/setup.sh
# With the peers installed, interop tests (Node, Java, Python) must run rather than skip.
export BUSBAR_REQUIRE_INTEROP=1

log "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './test/node/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

log "go vet"
go vet ./...

log "staticcheck"
GOBIN="$(go env GOPATH)/bin"
if ! "$GOBIN/staticcheck" -version 2>/dev/null | grep -q "(${STATICCHECK_VERSION#v})"; then
  go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
fi
"$GOBIN/staticcheck" ./...

log "postgres (for saga/sagapg)"
eval "$(scripts/postgres.sh start)" # exports BUSBAR_TEST_POSTGRES_DSN
export BUSBAR_REQUIRE_POSTGRES=1
trap 'scripts/postgres.sh stop >/dev/null 2>&1 || true' EXIT

log "go test -race"
go test -race -count=1 -timeout 15m "$@" ./...

log "go test (bench/, a separate module)"
(cd bench && go vet ./... && go test -count=1 ./...)

log "go test (schedule/croneval, a separate module: cron libraries checked on the hard cases)"
(cd schedule/croneval && go vet ./... && go test -count=1 ./...)
