"""Start and stop the control-plane processes by pid, and never signal a stranger.

Each started process is recorded as (pid, executable). Before signalling a recorded pid we
check that /proc/<pid>/cmdline still names that executable, so a recycled pid is left alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType


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


_PR_SET_PDEATHSIG = 1
# The caller's pid when its processes die with it (tie_to_caller), else None: the dev cluster of
# `toposched dev up` outlives the command that started it; a benchmark's or a test's must not.
_tied_to: int | None = None


def tie_to_caller() -> None:
    """Every process started from now on gets SIGTERM when this process ends, however it ends:
    a SIGKILL or a timeout's kill included, which no handler can catch (Linux PR_SET_PDEATHSIG).
    For benchmarks and tests, whose control planes must never outlive them."""
    global _tied_to
    if sys.platform == "linux":
        _tied_to = os.getpid()


def _in_main_thread() -> bool:
    """The kernel sends the signal when the *thread* that started the child ends: only a process
    started by the main thread (which ends with the process) is tied; a test's helper thread
    that restarts a component is not, or the component would die with that thread."""
    return threading.current_thread() is threading.main_thread()


def _die_with(parent: int) -> Callable[[], None]:
    def tie() -> None:  # runs in the child between fork and exec
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the caller ended before the tie was made
            os._exit(1)
    return tie


@contextlib.contextmanager
def stopped_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt (as SIGINT does) inside the block, so the
    caller's ``finally`` stops the control plane it started before the process ends."""
    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_owning_processes(main: Callable[[], int | None]) -> int:
    """Run a benchmark's ``main`` so that no control plane it starts outlives it: SIGTERM, SIGHUP
    and SIGINT (a timeout, a closed terminal, Ctrl-C) unwind it through its ``finally`` blocks,
    which stop what it started; a SIGKILL ends every process it started (``tie_to_caller``).
    Exit status 130 when interrupted."""
    tie_to_caller()
    with stopped_on_signals():
        try:
            return main() or 0
        except KeyboardInterrupt:
            print("interrupted: the processes this run started are stopped", file=sys.stderr)
            return 130


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
            preexec_fn=_die_with(_tied_to) if _tied_to == os.getpid() and _in_main_thread() else None,
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
