#!/usr/bin/env bash
# README command two: set up, then run the whole test suite. With no arguments it runs in two
# lanes: the fast lane first (lint, types, the house rules and the unit tests: about a minute
# on 2 cores, stopping at the first failure, before any control plane is built or started),
# then the rest (integration, the conformance scenarios against the real Kueue, e2e on the real
# local control plane). Extra arguments go to one pytest run instead.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
PY=${PYTHON:-python3}
if [ $# -gt 0 ]; then
  exec "$PY" -m pytest -q "$@"
fi
echo "test: fast lane (tests/unit: ruff, mypy, layers, unit tests; stops at the first failure)" >&2
"$PY" -m pytest -q -x tests/unit
echo "test: the rest (integration, conformance, e2e on the local control plane)" >&2
exec "$PY" -m pytest -q tests --ignore=tests/unit
