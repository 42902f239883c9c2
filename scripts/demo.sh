#!/usr/bin/env bash
# README command one: set up, then start the embedded demo (local control plane, 64 fake
# HyperPod p5.48xlarge nodes in a 3-layer topology, team queues, toposched). Stop it with
# `toposched dev down`. Extra arguments go to `toposched dev up`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec "${PYTHON:-python3}" -m scheduler.cli dev up "$@"
