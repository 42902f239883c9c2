"""A benchmark's or a test run's control-plane processes never outlive it (issue 44 item 7): a
real child process (``sleep``, started as the control plane's are, by
``scheduler.devcluster.processes.start``) is gone after its owner is stopped by SIGTERM or
SIGINT (its ``finally`` stops it), by a timeout, and by SIGKILL (the kernel ends it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.devcluster.processes import alive

ROOT = Path(__file__).resolve().parents[2]
OWNER = """
import sys, time
from pathlib import Path
from scheduler.devcluster import processes

def main() -> int:
    child = processes.start("sleeper", ["sleep", "300"], Path(sys.argv[1]))
    try:
        Path(sys.argv[1], "pid.tmp").write_text(str(child.pid))
        Path(sys.argv[1], "pid.tmp").rename(Path(sys.argv[1], "pid"))  # whole, never read half-written
        time.sleep(300)
    finally:
        processes.stop(child, grace_s=2)
    return 0

sys.exit(processes.run_owning_processes(main))
"""


def _owner(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)], cwd=ROOT, start_new_session=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "pid").exists():
        assert owner.poll() is None and time.monotonic() < deadline, "the owner did not start its child"
        time.sleep(0.05)
    return owner, int((tmp_path / "pid").read_text())


def _gone(pid: int, within_s: float = 10) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL])
def test_the_processes_a_run_started_end_with_it(tmp_path: Path, sig: signal.Signals) -> None:
    owner, child = _owner(tmp_path)
    try:
        assert alive(child)
        os.kill(owner.pid, sig)
        owner.wait(timeout=20)
        assert _gone(child), f"the child {child} outlived its owner stopped by {sig.name}"
        if sig != signal.SIGKILL:
            assert owner.returncode == 130  # unwound through its finally blocks
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_timeout_ends_them_too(tmp_path: Path) -> None:
    """`timeout 3 python bench.py`: SIGTERM after 3 s, as a CI step's or a shell's timeout."""
    owner = subprocess.Popen(["timeout", "-s", "KILL", "3", sys.executable, "-c", OWNER, str(tmp_path)], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int((tmp_path / "pid").read_text())
    owner.wait(timeout=30)
    try:
        assert _gone(child)
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
