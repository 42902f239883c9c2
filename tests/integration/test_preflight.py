"""Issue 40: ``toposched preflight`` against the local control plane (Kubernetes v1.37.2 with Kueue
v0.17.0's CRDs, as ``toposched dev up --bare`` applies them): go for v0.17, one no-go line naming
the values to use for v0.19, through the real CLI process."""

from __future__ import annotations

import subprocess
import sys
from typing import Any


def preflight(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scheduler.cli", "preflight", "--kubeconfig", str(cluster.kubeconfig),
                           *args], capture_output=True, text=True, timeout=120, check=False)


def test_preflight_on_the_local_control_plane(local_cluster: Any) -> None:
    go = preflight(local_cluster)
    assert go.returncode == 0, go.stdout + go.stderr
    lines = go.stdout.splitlines()
    assert lines[0].startswith("go: Kubernetes v1.37.2 (1.28 or later; tested on v1.37.2): the chart runs "
                               "kube-scheduler v1.37.2"), lines
    assert "go: Kueue's CRDs are v0.17's (v0.17.0), as toposched will behave (--kueue-version v0.17)" in lines
    assert lines[-1] == "go: install toposched (docs/install.md)"
    hyperpod = preflight(local_cluster, "--kueue-version", "v0.19")
    assert hyperpod.returncode == 1, hyperpod.stdout + hyperpod.stderr
    assert ("no-go: Kueue's CRDs are v0.17's but toposched would behave as v0.19: install with --set "
            "kueueVersion=v0.17 and run toposched preflight --kueue-version v0.17") in hyperpod.stdout.splitlines()
