"""The webhook's HTTPS front (``webfront/``, Go): where its binary is, and running it.

The front terminates TLS and keeps every bound of docs/security.md "Servers and network"
(connection caps per client and in total, handshake/head/body/write/idle deadlines, head and
body caps); the decider (``admission/decider.py``) answers it over a Unix socket. The binary is
``$TOPOSCHED_WEBFRONT``, else ``toposched-webfront`` on PATH (the image), else built from
``webfront/`` into the cache (``scripts/setup.sh`` does it; here once on first use, with Go).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import threading
from pathlib import Path

from scheduler.http.limits import ConnectionLimits

log = logging.getLogger(__name__)

BINARY = "toposched-webfront"
SOURCE = Path(__file__).resolve().parents[1] / "webfront"
START_TIMEOUT_S = 10.0


class FrontUnavailable(RuntimeError):
    pass


def _source_digest() -> str:
    h = hashlib.sha256()
    for path in sorted(SOURCE.glob("*.go")) + [SOURCE / "go.mod"]:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def binary() -> Path:
    """The front's executable; builds it into the cache when only the source is here."""
    explicit = os.environ.get("TOPOSCHED_WEBFRONT")
    if explicit:
        return Path(explicit)
    if not SOURCE.is_dir():
        found = shutil.which(BINARY)
        if found is None:
            raise FrontUnavailable(f"{BINARY} is not on PATH (the image installs it in /usr/local/bin)")
        return Path(found)
    cache = Path(os.environ.get("TOPOSCHED_CACHE", Path.home() / ".cache" / "toposched"))
    target = cache / f"webfront-{_source_digest()}" / BINARY
    if target.is_file():
        return target
    go = shutil.which("go")
    if go is None:
        found = shutil.which(BINARY)
        if found is not None:
            return Path(found)
        raise FrontUnavailable(f"the Go toolchain is not on PATH: it builds {BINARY} from {SOURCE} once")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    proc = subprocess.run([go, "build", "-trimpath", "-o", str(tmp), "."], cwd=SOURCE, capture_output=True,
                          text=True, check=False, env={**os.environ, "CGO_ENABLED": "0"})
    if proc.returncode != 0:
        raise FrontUnavailable(f"building {BINARY} failed: {proc.stderr.strip()[-500:]}")
    tmp.replace(target)
    return target


def front_args(bind: str, port: int, socket_path: Path, limits: ConnectionLimits) -> list[str]:
    host = f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind
    return [f"--listen={host}:{port}", f"--decider={socket_path}",
            f"--max-connections={limits.max_connections}",
            f"--max-connections-per-client={limits.max_per_client}",
            f"--max-body-bytes={limits.max_body_bytes}", f"--max-head-bytes={limits.max_head_bytes}",
            f"--handshake-timeout={limits.handshake_timeout_s}s", f"--header-timeout={limits.header_timeout_s}s",
            f"--body-timeout={limits.body_timeout_s}s", f"--write-timeout={limits.write_timeout_s}s",
            f"--idle-timeout={limits.idle_timeout_s}s",
            # Where the reviews' time goes, logged every N seconds when asked (benchmarks).
            f"--stats-every={os.environ.get('TOPOSCHED_WEBFRONT_STATS_S', '0')}s"]


class Front:
    """The running front process; ``port`` is the one it listens on (``0`` picks one)."""

    def __init__(self, bind: str, port: int, socket_path: Path, limits: ConnectionLimits) -> None:
        self._proc = subprocess.Popen([str(binary()), *front_args(bind, port, socket_path, limits)],
                                      stdout=subprocess.PIPE, stderr=None, text=True)
        assert self._proc.stdout is not None
        line = self._first_line(self._proc.stdout)
        if not line.startswith("listening on "):
            self._proc.kill()
            raise FrontUnavailable(f"{BINARY} did not start (exit {self._proc.wait()}): {line.strip()}")
        self.port = int(line.rsplit(":", 1)[1])

    def _first_line(self, stream: object) -> str:
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)  # type: ignore[attr-defined]
        reader.start()
        reader.join(START_TIMEOUT_S)
        return got[0] if got else ""

    @property
    def pid(self) -> int:
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc.poll() is None

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
