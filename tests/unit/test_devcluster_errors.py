"""Bad environments get one clear line and leave nothing running."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.devcluster import binaries
from scheduler.devcluster.controlplane import LOOPBACK, LocalCluster, Ports
from scheduler.errors import UserError


def test_missing_go_toolchain_is_one_actionable_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `go` anywhere
    monkeypatch.setenv("TOPOSCHED_CACHE", str(tmp_path / "cache"))  # nothing cached either
    with pytest.raises(UserError) as err:
        binaries.ensure_k8s_binaries()
    message = str(err.value)
    assert "\n" not in message
    assert "Go toolchain is not on PATH" in message and "install Go 1.26" in message


def test_port_in_use_is_reported_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binaries, "ensure_k8s_binaries", lambda: tmp_path)
    monkeypatch.setattr(binaries, "ensure_kwok", lambda: tmp_path / "kwok")
    holder = socket.socket()
    holder.bind((LOOPBACK, 0))
    holder.listen()
    busy = holder.getsockname()[1]
    try:
        ports = Ports.dynamic()
        ports.apiserver = busy
        cluster = LocalCluster(tmp_path / "c", ports)
        with pytest.raises(UserError) as err:
            cluster.start()
    finally:
        holder.close()
    assert f"port {busy} (apiserver)" in str(err.value) and "in use" in str(err.value)
    assert cluster.state.processes == {}


def test_failed_build_names_the_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    with pytest.raises(UserError) as err:
        binaries._run_build([sys.executable, "-c", "import sys; print('boom: no such module'); sys.exit(1)"],
                            tmp_path, log, "the thing")
    assert "building the thing failed (boom: no such module)" in str(err.value)
    assert str(log) in str(err.value)


def test_cli_prints_one_line_and_exit_code_2_for_missing_cluster(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "scheduler.cli", "dev", "down", "--dir", str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0
    assert "no dev cluster in" in proc.stderr and "toposched dev up" in proc.stderr
