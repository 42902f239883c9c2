"""A job that names its Workload (``kueue.x-k8s.io/prebuilt-workload-name``): Kueue's
``ensureOneWorkload`` prebuilt path (v0.17.0 pkg/controller/jobframework/reconciler.go).

This is what a MultiKueue manager relies on when toposched is its worker: the manager first
creates the Workload on the worker (a copy of its own, labelled
``kueue.x-k8s.io/multikueue-origin``; admitted here as any ownerless Workload), then, once it is
admitted, the job with the label naming it. The job must run under that Workload, not under a
second one toposched would build: the manager watches the Workload it created, and a second
one would take the quota twice.

- the named Workload does not exist (yet): no Workload is created; the job stays suspended
  (Kueue: ``ErrPrebuiltWorkloadNotFound``, retried);
- it is controlled by another object: left alone, and nothing is created (Kueue logs
  "The workload is already controlled by another object");
- otherwise the job adopts it (Kueue's ``EnsurePrebuiltWorkloadOwnership``): a controller
  owner reference to the job and the ``kueue.x-k8s.io/job-uid`` label; from then on it is the
  job's Workload for every phase (admission, start, status, finish, eviction, deletion).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.identifiers import Identifiers
from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.k8s.informer import WORKLOADS, object_key
from scheduler.kube.phase import Shared

log = logging.getLogger(__name__)
Obj = dict[str, Any]
LABEL_VALUE_MAX = 63


def _controller_ref(wl: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs = (wl.get("metadata") or {}).get("ownerReferences") or ()
    return next((r for r in refs if isinstance(r, Mapping) and r.get("controller")), None)


def owner_reference(kind: JobKind, job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {"apiVersion": kind.api_version, "kind": kind.kind, "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def adoption_patch(kind: JobKind, job: Mapping[str, Any], wl: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload's metadata once ``job`` adopts it (other owner references kept)."""
    refs = [r for r in (wl.get("metadata") or {}).get("ownerReferences") or () if not r.get("controller")]
    uid = str(job["metadata"]["uid"])
    meta: dict[str, Any] = {"ownerReferences": [*refs, owner_reference(kind, job)]}
    if len(uid) <= LABEL_VALUE_MAX:  # Kueue sets the label only when the uid is a valid label value
        meta["labels"] = {LABEL_JOB_UID: uid}
    return {"metadata": meta}


class Prebuilt:
    def __init__(self, shared: Shared, ids: Identifiers) -> None:
        self.s = shared
        self.ids = ids

    def handles(self, kind: JobKind, job: Obj) -> bool:
        """True when ``job`` names a prebuilt Workload (then no Workload is built for it):
        adopts the Workload when it exists and nobody else controls it."""
        name = self.ids.prebuilt_workload(job)
        if not name:
            return False
        namespace = job["metadata"].get("namespace")
        wl = self.s.cache.workloads.get(f"{namespace}/{name}")
        if wl is None:
            log.debug("%s %s waits for its prebuilt Workload %s/%s", kind.kind, object_key(job), namespace, name)
            return True
        ref = _controller_ref(wl)
        if ref is not None:
            if ref.get("uid") != job["metadata"].get("uid"):
                log.info("WARNING: The workload is already controlled by another object: %s (%s %s)",
                         object_key(wl), ref.get("kind"), ref.get("name"))
            return True
        if self.s.writer.patch(WORKLOADS, wl, adoption_patch(kind, job, wl), self.s.cache.workloads):
            log.info("%s %s adopted its prebuilt Workload %s", kind.kind, object_key(job), object_key(wl))
        return True
