"""Every API write the controller makes, in one place.

The controller's phases decide; the :class:`Writer` sends. It owns:

- the leadership check (:meth:`Writer.may_write`): asked right before every write, so a
  write is sent only while the lease is known held. In ``toposched controller`` the check is
  :class:`~scheduler.k8s.leader.WriteFence`: the lease's term must be the one the reconcile
  pass started in, and the local monotonic clock must be before the last renewal + the renew
  deadline (fencing by time: a leader that lost contact stops writing before anyone else can
  acquire). A refused write is skipped and counted, never queued for later;
- optimistic concurrency: patches carry the copy's ``resourceVersion``, so a stale copy gets
  409 and the next reconcile retries from fresh state instead of overwriting a newer one;
- the one 404/409 policy: gone or stale -> skipped (``None``), debug-logged; any other
  failure is raised, or reported through ``on_error`` by the writes whose callers carry on;
- cache write-through of the API server's answer, so the next cycle sees its own results;
- Events (deduplicated, asynchronous: :class:`~scheduler.kube.events.EventRecorder`);
- decision observers (the gRPC WatchDecisions stream, metrics): ``fn(kind, workload, detail)``;
- how many writes run at once (:meth:`Writer.run_each`): the writes of one phase touch one
  object each, so they are sent side by side, as Kueue's scheduler writes its admissions in
  goroutines; a pass waits for all of them before its next phase.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.informer import PODS, WORKLOADS, Informer, KubeApi, Resource, object_key
from scheduler.kube.cache import ClusterCache
from scheduler.kube.defaults import DEFAULT_CONCURRENT_WRITES
from scheduler.kube.events import EventRecorder
from scheduler.kube.jobs import JobIntegration

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Observer = Callable[[str, Obj, Mapping[str, Any]], None]
ErrorReport = Callable[[ApiException], None]
T = TypeVar("T")
SKIPPED_STATUSES = (404, 409)  # gone, or a newer copy exists: the next reconcile looks again


class Writer:
    def __init__(self, api: KubeApi, cache: ClusterCache, is_leader: Callable[[], bool],
                 events: EventRecorder | None = None, concurrency: int = DEFAULT_CONCURRENT_WRITES) -> None:
        self.api = api
        self.cache = cache
        self.is_leader = is_leader
        self.events = events if events is not None else EventRecorder(api)
        self.observers: list[Observer] = []
        self.skipped_not_leading = 0  # writes refused because this replica was not leading
        self._refusing = False  # the first refusal after a write is logged loudly, the rest quietly
        self._lock = threading.Lock()  # the refusal count and flag, updated from the write threads
        self.concurrency = concurrency
        self._pool: ThreadPoolExecutor | None = None
        self._worker = threading.local()  # set in the pool's threads: nested runs go serially

    # ------------------------------------------------------------------ policy
    def may_write(self, what: str, target: str) -> bool:
        """The one leadership check before every write: asked at the moment of sending (not
        once per pass), so leadership lost in the middle of a pass stops the very next write."""
        if self.is_leader():
            self._refusing = False
            return True
        with self._lock:
            self.skipped_not_leading += 1
            first, self._refusing = not self._refusing, True
        if first:
            log.warning("not leading (lease not held): %s of %s and every further write skipped", what, target)
        else:
            log.debug("not leading: %s of %s skipped", what, target)
        return False

    def run_each(self, items: Sequence[T], step: Callable[[T], object], *,
                 concurrent: bool = True) -> list[tuple[T, Exception]]:
        """Run ``step`` (the writes about one object) on every item, with ``concurrent`` up to
        ``concurrency`` at once, and wait for all; returns the items whose step raised, in item
        order (nothing from one item escapes). Concurrent steps must not depend on each other's
        writes (each is about a different object); a step that runs another ``run_each`` runs it
        serially (a bounded pool waiting on itself would stall)."""
        def guarded(item: T) -> Exception | None:
            try:
                step(item)
            except Exception as exc:  # noqa: BLE001 - handed back to the caller, which reports it
                return exc
            return None

        if not concurrent or self.concurrency <= 1 or len(items) <= 1 or getattr(self._worker, "active", False):
            outcomes = [guarded(item) for item in items]
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="writes",
                                                initializer=lambda: setattr(self._worker, "active", True))
            outcomes = list(self._pool.map(guarded, items))
        return [(item, exc) for item, exc in zip(items, outcomes, strict=True) if exc is not None]

    def _send(self, what: str, target: str, call: Callable[[], Obj], on_error: ErrorReport | None = None,
              skipped: tuple[int, ...] = SKIPPED_STATUSES) -> Obj | None:
        if not self.may_write(what, target):
            return None
        try:
            return call()
        except ApiException as exc:
            if exc.status in skipped:
                log.debug("%s of %s skipped: HTTP %s", what, target, exc.status)
                return None
            if on_error is None:
                raise
            on_error(exc)
            return None

    # ------------------------------------------------------------------ generic writes
    def create(self, resource: Resource, body: Mapping[str, Any], namespace: str | None, into: Informer,
               on_error: ErrorReport | None = None) -> Obj | None:
        """Create; ``None`` when it already exists (409) or the write was skipped."""
        target = f"{resource.plural} {namespace}/{body['metadata']['name']}"
        created = self._send("create", target, lambda: self.api.create(resource, body, namespace), on_error,
                             skipped=(409,))
        self.cache.write_through(into, created)
        return created

    def patch(self, resource: Resource, obj: Mapping[str, Any], patch: Mapping[str, Any], into: Informer, *,
              subresource: str | None = None, versioned: bool = True,
              on_error: ErrorReport | None = None) -> Obj | None:
        """Merge-patch ``obj``; ``versioned`` adds its resourceVersion (409 if it is stale)."""
        meta = obj["metadata"]
        body = dict(patch)
        if versioned:
            body["metadata"] = {**(body.get("metadata") or {}), "resourceVersion": meta.get("resourceVersion")}
        updated = self._send(f"patch{'/' + subresource if subresource else ''}", f"{resource.plural} {object_key(obj)}",
                             lambda: self.api.merge_patch(resource, meta["name"], body, meta.get("namespace"),
                                                          subresource=subresource), on_error)
        if updated and (updated.get("metadata") or {}).get("deletionTimestamp") \
                and not updated["metadata"].get("finalizers"):
            self.cache.forget(into, updated)  # the last finalizer is gone: the API server deletes it now
        else:
            self.cache.write_through(into, updated)
        return updated

    def delete(self, resource: Resource, name: str, namespace: str | None, **query: Any) -> bool:
        """Delete; True when it is gone (404 counts as gone)."""
        if not self.may_write("delete", f"{resource.plural} {namespace}/{name}"):
            return False
        try:
            self.api.delete(resource, name, namespace, **query)
        except ApiException as exc:
            if exc.status != 404:
                raise
        return True

    # ------------------------------------------------------------------ workloads, jobs, pods
    def patch_workload_status(self, workload: Obj, status: Mapping[str, Any]) -> Obj | None:
        return self.patch(WORKLOADS, workload, {"status": dict(status)}, self.cache.workloads, subresource="status")

    def annotate_workload(self, workload: Obj, annotations: Mapping[str, str]) -> Obj | None:
        return self.patch(WORKLOADS, workload, {"metadata": {"annotations": dict(annotations)}},
                          self.cache.workloads)

    def patch_job(self, integration: JobIntegration, job: Obj, patch: Mapping[str, Any]) -> Obj | None:
        """A job's suspend / start / restore patch (sent as the integration builds it)."""
        def failed(exc: ApiException) -> None:
            log.warning("patching %s failed: HTTP %s %s", object_key(job), exc.status, str(exc.body)[:300])
            self.event(job, "Warning", "UpdateFailed", str(exc.body)[:500])

        return self.patch(integration.resource, job, patch, self.cache.jobs[f"{integration.group}/{integration.kind}"],
                          versioned=False, on_error=failed)

    def delete_pod(self, name: str, namespace: str) -> bool:
        """Graceful deletion (the pod's own terminationGracePeriodSeconds): a pod on a node that
        cannot be reached stays Terminating until the kubelet confirms or the node object goes,
        which is what the callers wait for before its replacement may run."""
        return self.delete(PODS, name, namespace)

    # ------------------------------------------------------------------ events, observers
    def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        if self.may_write(f"event {reason}", object_key(obj)):
            self.events.record(obj, event_type, reason, message)

    def notify(self, kind: str, workload: Obj, detail: Mapping[str, Any]) -> None:
        """Tell every observer about a decision that was written (never raises)."""
        for observer in self.observers:
            try:
                observer(kind, workload, detail)
            except Exception:
                log.exception("decision observer failed")
