#!/usr/bin/env bash
# README command two: set up, then run the whole test suite (unit, integration against the
# real local control plane, e2e). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
exec "${PYTHON:-python3}" -m pytest -q "$@"
