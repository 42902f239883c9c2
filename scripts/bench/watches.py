"""Watches the peer benchmarks time with: when each pod of a job was first seen bound, and to
which node (a watch of pods, so a burst of binds is timed as it happens, not at the next poll)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from scheduler.k8s.informer import PODS, Informer, wait_synced

JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")


def job_of(pod: dict[str, Any]) -> str | None:
    """The Job a pod belongs to, from the labels the Job controller puts on its pods."""
    labels = pod["metadata"].get("labels") or {}
    return next((labels[k] for k in JOB_NAME_LABELS if k in labels), None)


class BindWatch:
    """Per job, (driver time, node) of each of its pods the first time it was seen bound.
    ``wanted``: which job names count (others, e.g. a previous scenario's, are ignored)."""

    def __init__(self, api: Any, wanted: Callable[[str], bool]) -> None:
        self.wanted = wanted
        self.lock = threading.Lock()
        self.binds: dict[str, list[tuple[float, str]]] = {}
        self._seen: set[str] = set()
        self.informer = Informer(api, PODS)
        self.informer.add_handler(self._on_pod)

    def _on_pod(self, _kind: str, pod: dict[str, Any], _old: dict[str, Any] | None) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        job = job_of(pod)
        if job is None or not self.wanted(job):
            return
        uid = pod["metadata"]["uid"]
        with self.lock:
            if uid in self._seen:
                return
            self._seen.add(uid)
            self.binds.setdefault(job, []).append((time.monotonic(), node))

    def bound(self) -> int:
        with self.lock:
            return len(self._seen)

    def snapshot(self) -> dict[str, list[tuple[float, str]]]:
        with self.lock:
            return {job: list(v) for job, v in self.binds.items()}

    def start(self) -> BindWatch:
        self.informer.start()
        wait_synced([self.informer])
        return self

    def stop(self) -> None:
        self.informer.stop()
