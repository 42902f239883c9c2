#!/usr/bin/env bash
# Idempotent set-up shared by scripts/demo.sh and scripts/test.sh.
#
#   scripts/setup.sh          what the demo needs: Python packages (editable install with dev
#                             extras into $PYTHON, skipped when pyproject.toml and this checkout
#                             are unchanged). Nothing else is installed on the machine.
#   scripts/setup.sh --test   also what the tests use, when run as root with apt-get: Debian's
#                             chromium (topology page screenshot test) and prometheus (metrics
#                             e2e), buildah, mmdebstrap, podman and runc (the Helm install
#                             test; not with TOPOSCHED_INSTALL_TEST=0).
#
# The Kubernetes binaries and KWOK are built on first use into ~/.cache/toposched (see README).
# The editable install points `toposched` at THIS checkout: with several checkouts, the one
# that ran setup.sh last is what `toposched` runs (it warns when run from another checkout);
# `python3 -m scheduler.cli` inside a checkout runs that checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
tests=false
case "${1:-}" in
  --test) tests=true ;;
  "") ;;
  *) echo "setup: unknown argument $1 (usage: scripts/setup.sh [--test])" >&2; exit 2 ;;
esac

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

# The webhook's HTTPS front (webfront/, Go stdlib only) into the cache, keyed by its source's
# digest; `toposched webhook` runs it (admission/front.py), scripts/build-image.sh copies it in.
echo "setup: webhook front: $("$PYTHON" -c 'from admission.front import binary; print(binary())')" >&2

# Debian packages for the tests only (never for the demo), installed when we are root.
apt_install() {  # apt_install WHY PACKAGE...
  local why=$1; shift
  echo "setup: installing Debian's $* ($why) ..." >&2
  (apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq "$@" >/dev/null; }) \
    || echo "setup: $* could not be installed; the tests that need them will be skipped" >&2
}
if $tests && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  command -v chromium >/dev/null || apt_install "headless screenshot test of the topology page" chromium
  command -v prometheus >/dev/null || apt_install "e2e: the real server scrapes the controller's /metrics" prometheus
  # The Helm install test (tests/e2e/test_helm_install.py: the image built, the chart run by the
  # podman node) and the opt-in image test (tests/integration/test_image.py) need buildah and
  # mmdebstrap, the install test also podman and runc. TOPOSCHED_INSTALL_TEST=0 skips them.
  if [ "${TOPOSCHED_INSTALL_TEST:-}" != 0 ] || [ "${TOPOSCHED_IMAGE_TEST:-}" = 1 ]; then
    { command -v buildah >/dev/null && command -v mmdebstrap >/dev/null; } \
      || apt_install "image build and Helm install tests" buildah mmdebstrap
  fi
  if [ "${TOPOSCHED_INSTALL_TEST:-}" != 0 ]; then
    { command -v podman >/dev/null && command -v runc >/dev/null; } || apt_install "Helm install test" podman runc
  fi
fi

# The real HyperPod CLI (`hyp`, sagemaker-hyperpod 3.12.0) for the tests that drive it
# (tests/e2e/test_hyp_cli_refusal.py): in a venv of its own, since it pins its own kubernetes,
# pydantic and boto versions. Installed once into the cache; a failed install skips those tests.
if $tests; then
  hyp_venv="$stamp_dir/hyp-3.12.0"
  if [ ! -x "$hyp_venv/bin/hyp" ]; then
    echo "setup: installing the HyperPod CLI sagemaker-hyperpod 3.12.0 into $hyp_venv ..." >&2
    { "$PYTHON" -m venv "$hyp_venv" && "$hyp_venv/bin/pip" install -q --disable-pip-version-check \
        'sagemaker-hyperpod==3.12.0' >/dev/null; } \
      || { rm -rf "$hyp_venv"; echo "setup: the hyp CLI could not be installed; the tests that drive it will be skipped" >&2; }
  fi
fi
