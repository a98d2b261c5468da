#!/usr/bin/env bash
# conformance/python/setup.sh — create conformance/python/.venv and install
# requirements.txt into it. Idempotent: when the venv already holds exactly
# these requirements (a stamp of the file's hash) it does nothing.
set -euo pipefail
cd "$(dirname "$0")"
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
  echo "setup.sh: no $python on PATH" >&2
  exit 1
fi
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ "$(cat .venv/.requirements-sha256 2>/dev/null)" = "$want" ]; then
  exit 0
fi
if ! "$python" -m venv --help >/dev/null 2>&1 || ! "$python" -c 'import ensurepip' 2>/dev/null; then
  # Debian's python3 lacks venv and ensurepip until python3-venv is installed.
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi
rm -rf .venv
"$python" -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check --no-input -r requirements.txt
echo "$want" > .venv/.requirements-sha256
