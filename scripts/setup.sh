#!/usr/bin/env bash
# Idempotent set-up shared by scripts/demo.sh and scripts/test.sh: Python packages (editable
# install with dev extras, skipped when pyproject.toml is unchanged), and Debian's chromium
# for the topology page screenshot test when we are root and it is missing. The Kubernetes
# binaries and KWOK are built on first use into ~/.cache/toposched (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if ! command -v "$PYTHON" >/dev/null; then
  echo "setup: $PYTHON not found: install Python 3.11 or newer" >&2; exit 2
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: $("$PYTHON" --version) is too old: toposched needs Python 3.11 or newer" >&2; exit 2
fi
if ! command -v go >/dev/null; then
  echo "setup: the Go toolchain is not on PATH: install Go 1.26 or newer (used once to build the local control plane)" >&2
  exit 2
fi

stamp_dir=${TOPOSCHED_CACHE:-$HOME/.cache/toposched}
mkdir -p "$stamp_dir"
want="$(sha256sum pyproject.toml | cut -c1-16) $(pwd)"
if [ "$(cat "$stamp_dir/pip.stamp" 2>/dev/null)" != "$want" ] || ! "$PYTHON" -c 'import scheduler, ortools, kubernetes, hypothesis' 2>/dev/null; then
  echo "setup: installing Python dependencies (pip install -e '.[dev]') ..." >&2
  "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[dev]'
  echo "$want" > "$stamp_dir/pip.stamp"
fi

if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing Debian's chromium (headless screenshot test of the topology page) ..." >&2
  (apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; }) \
    || echo "setup: chromium could not be installed; the screenshot test will be skipped" >&2
fi

if ! command -v prometheus >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing Debian's prometheus (e2e: the real server scrapes the controller's /metrics) ..." >&2
  (apt-get install -y -qq prometheus >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq prometheus >/dev/null; }) \
    || echo "setup: prometheus could not be installed; tests/e2e/test_prometheus_metrics.py will be skipped" >&2
fi

# Opt-in image build test (tests/integration/test_image.py): buildah and mmdebstrap are large,
# so they are installed only when asked for with TOPOSCHED_IMAGE_TEST=1 (else the test skips).
if [ "${TOPOSCHED_IMAGE_TEST:-}" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
    && ! { command -v buildah >/dev/null && command -v mmdebstrap >/dev/null; }; then
  echo "setup: installing Debian's buildah and mmdebstrap (TOPOSCHED_IMAGE_TEST=1) ..." >&2
  (apt-get install -y -qq buildah mmdebstrap >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq buildah mmdebstrap >/dev/null; }) \
    || echo "setup: buildah/mmdebstrap could not be installed; the image test will be skipped" >&2
fi
