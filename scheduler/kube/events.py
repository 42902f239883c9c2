"""Kubernetes Events (core/v1) about our objects, deduplicated like client-go's recorder:
the same (object, reason, message) bumps the count instead of creating another Event.

Events are best effort and written by a background thread from a bounded queue, as
client-go's broadcaster does: the reconcile loop never waits for one (profiling the
end-to-end admission bench showed half of the loop's time spent creating Events)."""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.informer import KubeApi, Resource
from scheduler.kube.status import utcnow

log = logging.getLogger(__name__)
EVENTS = Resource("", "v1", "events")
COMPONENT = "toposched-controller"


class EventRecorder:
    def __init__(self, api: KubeApi, component: str = COMPONENT, max_queued: int = 10000,
                 clock: Callable[[], dt.datetime] = utcnow) -> None:
        self.api = api
        self.clock = clock
        self.component = component
        self._seen: dict[tuple[str, str, str, str], tuple[str, int]] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[dict[str, Any], str, str, str]] = queue.Queue(maxsize=max_queued)
        self.dropped = 0
        threading.Thread(target=self._drain, name="events", daemon=True).start()

    def record(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        """Queue an Event; drops it (counted in ``dropped``) rather than block when full."""
        try:
            self._queue.put_nowait(({"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                                     "metadata": dict(obj.get("metadata") or {})}, event_type, reason, message))
        except queue.Full:
            self.dropped += 1

    def _drain(self) -> None:
        while True:
            obj, event_type, reason, message = self._queue.get()
            try:
                self._write(obj, event_type, reason, message)
            except Exception:  # never let one bad Event stop the writer
                log.exception("writing event %s failed", reason)
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Block until every queued Event has been written (tests, clean shutdown)."""
        self._queue.join()

    def _write(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        key = (namespace, str(meta.get("uid")), reason, message)
        now = self.clock().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._lock:
            previous = self._seen.get(key)
        try:
            if previous:
                name, count = previous
                self.api.merge_patch(EVENTS, name, {"count": count + 1, "lastTimestamp": now}, namespace)
                with self._lock:
                    self._seen[key] = (name, count + 1)
                return
            name = f"{meta.get('name', 'object')}.{uuid.uuid4().hex[:12]}"
            body = {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                                   "name": meta.get("name"), "namespace": meta.get("namespace"),
                                   "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
                "type": event_type, "reason": reason, "message": message[:1024],
                "source": {"component": self.component}, "reportingComponent": self.component,
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            }
            self.api.create(EVENTS, body, namespace)
            with self._lock:
                if len(self._seen) > 10000:
                    self._seen.clear()
                self._seen[key] = (name, 1)
        except ApiException as exc:  # events are best effort; never fail a reconcile for one
            log.debug("event %s on %s/%s not recorded: %s", reason, namespace, meta.get("name"), exc.status)
