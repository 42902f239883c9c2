#!/usr/bin/env bash
# Regenerate the gRPC/protobuf Python stubs: proto/**/*.proto -> scheduler/api/gen/ (committed).
# Needs the dev extras (grpcio-tools, mypy-protobuf): pip install -e '.[dev]'.
# tests/unit/api/test_generated_stubs.py fails when the committed stubs are stale.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/gen_proto.py "$@"
