"""Start and stop the control-plane processes by pid, and never signal a stranger.

Each started process is recorded as (pid, executable). Before signalling a recorded pid we
check that /proc/<pid>/cmdline still names that executable, so a recycled pid is left alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Started:
    name: str
    pid: int
    executable: str
    log: str
    argv: tuple[str, ...] = ()
    # Where it says it is healthy (http[s]://127.0.0.1:PORT/PATH), "" when it has no such
    # endpoint: `toposched dev status` asks it, not only whether the pid lives.
    health: str = ""


def start(name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None, health: str = "") -> Started:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group: a Ctrl-C in the caller does not reach it
        )
    return Started(name, proc.pid, argv[0], str(log_path), tuple(argv), health)


def is_ours(pid: int, executable: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if not cmdline or not cmdline[0]:
        return False
    first = cmdline[0].decode(errors="replace")
    return first == executable or os.path.basename(first) == os.path.basename(executable)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child counts as dead.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _wait_gone(pid: int, timeout_s: float) -> bool:
    """Reap and poll until ``pid`` is gone; True if it went within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        _reap(pid)
        if not alive(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _sigkill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _wait_gone(pid, 5.0)


def stop(proc: Started, grace_s: float = 10.0) -> None:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL. Only if the pid is still ours."""
    if not is_ours(proc.pid, proc.executable):
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not _wait_gone(proc.pid, grace_s):
        _sigkill(proc.pid)


def kill(proc: Started) -> None:
    """SIGKILL at once (fault tests: a component that dies without cleaning up)."""
    if is_ours(proc.pid, proc.executable):
        _sigkill(proc.pid)
