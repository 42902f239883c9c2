"""KWOK's node lease and the node monitor grace move together (LocalCluster(node_lease_s=...))."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.devcluster import binaries
from scheduler.devcluster.controlplane import DEFAULT_NODE_LEASE_S, LocalCluster


def _flag(argv: list[str], name: str) -> str:
    values = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    assert len(values) == 1, (name, argv)
    return values[0]


@pytest.mark.parametrize(("lease", "grace"), [(DEFAULT_NODE_LEASE_S, "120s"), (120, "120s"), (3600, "3600s")])
def test_a_long_lease_lengthens_the_grace_so_nodes_stay_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lease: int, grace: str
) -> None:
    # KWOK renews at a quarter of the lease; a grace shorter than the renewal interval would
    # turn every node NotReady between renewals.
    monkeypatch.setattr(binaries, "ensure_kwok", lambda: tmp_path / "kwok")
    tmp_path.joinpath("c").mkdir()
    cluster = LocalCluster(tmp_path / "c", node_lease_s=lease)
    assert _flag(cluster._kwok_argv(), "node-lease-duration-seconds") == str(lease)
    assert _flag(cluster._controller_manager_argv(), "node-monitor-grace-period") == grace


def test_the_default_lease_is_a_kubelets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binaries, "ensure_kwok", lambda: tmp_path / "kwok")
    tmp_path.joinpath("c").mkdir()
    assert _flag(LocalCluster(tmp_path / "c")._kwok_argv(), "node-lease-duration-seconds") == "40"


def test_a_lease_under_a_second_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="node_lease_s must be at least 1 second, not 0"):
        LocalCluster(tmp_path, node_lease_s=0)
