"""toposched's MultiKueue dispatcher on the manager: ask the workers, write the nominations
(issue 43 item 2; docs/multicluster.md).

One pass: read the manager's MultiKueue AdmissionChecks, MultiKueueConfigs, MultiKueueClusters
and Workloads; for each Workload that needs a nomination (Kueue's Incremental guards) and whose
round has ended, ask every toposched worker of its MultiKueueConfig its gRPC ``Place`` (read-only)
and ``GetTopology`` (free capacity); choose with the pure ``core.beyond.dispatch``; write
``status.nominatedClusterNames`` as Kueue's own dispatchers do: server-side apply under Kueue's
``kueue-admission`` field manager with the fields Kueue's admission patch carries
(``adapter/mk_dispatch.nomination_apply``), with the resourceVersion read, so a Workload Kueue
changed in between is left to the next pass. MultiKueue then copies the Workload to the nominated
workers. Kueue keeps Incremental's round starts in memory; so does this, held by the leader
only (``dispatch_leading.py``): a new term gives the nominations it finds a round from its start
(``Dispatcher.new_term``).
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.adapter.mk_dispatch import (
    ADMISSION_FIELD_MANAGER,
    WorkerEndpoint,
    answer,
    config_clusters,
    demand,
    manager_workload,
    multikueue_checks,
    nomination_apply,
    requested_level,
    with_whole_capacity,
    worker_endpoints,
)
from scheduler.core.beyond.dispatch import DispatchInput, WorkerAnswer, dispatch_pass
from scheduler.core.kueue.mk_dispatch import ROUND_TIMEOUT_S, needs_nomination
from scheduler.core.resources import GPU
from scheduler.core.workload import WorkloadFormatError, workload_from_object
from scheduler.k8s.informer import KUEUE_GROUP, KUEUE_VERSION, WORKLOADS, KubeApi, Obj, Resource

log = logging.getLogger(__name__)
ADMISSION_CHECKS = Resource(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", namespaced=False)
MULTIKUEUE_CONFIGS = Resource(KUEUE_GROUP, KUEUE_VERSION, "multikueueconfigs", namespaced=False)
MULTIKUEUE_CLUSTERS = Resource(KUEUE_GROUP, KUEUE_VERSION, "multikueueclusters", namespaced=False)


@dataclass(frozen=True)
class PlaceAnswer:
    """What the dispatcher keeps of one worker's Place: fits, the domains each pod set touches
    per level, the levels."""

    fits: bool
    pod_set_domains: tuple[Mapping[str, tuple[str, ...]], ...]
    levels: tuple[str, ...]
    # the worker's own queued demand (PlaceResponse backlog_*); None: a worker that does not report it
    backlog_gpus: int | None = None
    backlog_pods: int | None = None


@dataclass(frozen=True)
class Capacity:
    gpus_free: int
    nodes_free: int  # healthy nodes (the unit of a job without GPUs: one pod a node, at most)
    gpus_total: int = 0  # healthy GPUs, used or not (0: not known)


class Worker:
    """One toposched worker's questions; None when it cannot answer this pass."""

    def place(self, manifest: bytes, whole_capacity: bool = False) -> PlaceAnswer | None:
        """``whole_capacity``: as if nothing were admitted on the worker."""
        raise NotImplementedError

    def capacity(self) -> Capacity | None:
        raise NotImplementedError


Workers = Callable[[WorkerEndpoint], Worker | None]


def workload_manifest(wl: Obj) -> bytes:
    """What a worker is asked to place: the Workload's spec (its pod sets and topology
    requests), without the manager's status or owner."""
    meta = wl.get("metadata") or {}
    return json.dumps({"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "Workload",
                       "metadata": {"name": meta.get("name", ""), "namespace": meta.get("namespace", "")},
                       "spec": wl.get("spec") or {}}).encode()


class Dispatcher:
    """One pass at a time (the command loops); ``clock`` in seconds."""

    def __init__(self, api: KubeApi, workers: Workers, clock: Callable[[], float],
                 timeout_s: float = ROUND_TIMEOUT_S, may_write: Callable[[], bool] = lambda: True) -> None:
        """``may_write``: the leadership fence (``k8s.leader.WriteFence``), asked before the
        pass and before every write; a replica that does not hold the lease asks no worker and
        writes nothing."""
        self.api = api
        self.workers = workers
        self.clock = clock
        self.timeout_s = timeout_s
        self.may_write = may_write
        self.round_starts: dict[str, float] = {}
        self.term_start: float | None = None  # set by new_term
        self.refused_endpoints: dict[str, str] = {}

    def _items(self, resource: Resource) -> list[Obj]:
        return list(self.api.list(resource).get("items", []))

    def run_once(self) -> dict[str, tuple[str, ...]]:
        """One pass; the Workloads whose nominations it wrote, with them."""
        if not self.may_write():
            return {}
        now = self.clock()
        checks = multikueue_checks(self._items(ADMISSION_CHECKS))
        configs = config_clusters(self._items(MULTIKUEUE_CONFIGS))
        endpoints, self.refused_endpoints = worker_endpoints(self._items(MULTIKUEUE_CLUSTERS))
        for name, why in self.refused_endpoints.items():
            log.warning("MultiKueueCluster %s: %s; treated as a worker without a toposched endpoint", name, why)
        workloads = sorted(self._items(WORKLOADS), key=lambda w: ((w.get("metadata") or {}).get(
            "creationTimestamp", ""), (w.get("metadata") or {}).get("name", "")))
        asked: dict[str, Worker | None] = {}
        capacity: dict[str, Capacity | None] = {}
        inputs: list[DispatchInput] = []
        objects: dict[str, Obj] = {}
        live: set[str] = set()
        for wl in workloads:
            mw, check = manager_workload(wl, checks)
            if check is None or not needs_nomination(mw):
                continue
            live.add(mw.key)
            workers = configs.get(checks[check], ())
            start = self.round_starts.get(mw.key)
            if start is None and mw.nominated and self.term_start is not None:
                start = self.round_starts[mw.key] = self.term_start  # nominated in an earlier term
            answers: dict[str, WorkerAnswer] = {}
            size = 0
            try:
                spec = workload_from_object(dict(wl))
                size = demand(spec)
            except (WorkloadFormatError, ValueError) as exc:
                log.info("workload %s: not asked of the workers (%s)", mw.key, exc)
                spec = None
            if spec is not None and (start is None or now - start > self.timeout_s):
                manifest = workload_manifest(wl)
                for name in workers:
                    if name not in endpoints:
                        continue
                    if name not in asked:
                        asked[name] = self.workers(endpoints[name])
                        worker = asked[name]
                        capacity[name] = worker.capacity() if worker is not None else None
                    got = self._ask(asked[name], capacity[name], name, manifest, spec)
                    if got is not None:
                        answers[name] = got
            inputs.append(DispatchInput(mw.key, workers, answers, mw.nominated, start, size, self.timeout_s))
            objects[mw.key] = wl
        for key in set(self.round_starts) - live:
            del self.round_starts[key]  # admitted, finished or gone: Kueue's clearRoundStartTime
        written: dict[str, tuple[str, ...]] = {}
        for key, rnd in dispatch_pass(inputs, now).rounds.items():
            if not rnd.changed:
                continue
            if self._write(objects[key], rnd.nominated) and rnd.round_start is not None:
                self.round_starts[key] = rnd.round_start  # Kueue: only after a successful patch
                written[key] = rnd.nominated
        return written

    @staticmethod
    def _ask(worker: Worker | None, cap: Capacity | None, name: str, manifest: bytes,
             spec: Any) -> WorkerAnswer | None:
        if worker is None or cap is None:
            return None
        got = worker.place(manifest)
        if got is None:
            return None
        uses_gpu = any(GPU in ps.requests for ps in spec.pod_sets)
        free = cap.gpus_free if uses_gpu else cap.nodes_free
        queued = (got.backlog_gpus if uses_gpu else got.backlog_pods) or 0
        now = answer(name, got.fits, got.pod_set_domains, requested_level(spec, got.levels), free, queued)
        if now.fits:
            return now
        whole = worker.place(manifest, whole_capacity=True)  # could it ever fit there (core rule 4)
        if whole is None:
            return now
        return with_whole_capacity(now, answer(name, whole.fits, whole.pod_set_domains,
                                               requested_level(spec, whole.levels), free),
                                   cap.gpus_total if uses_gpu else cap.nodes_free)

    def new_term(self) -> None:
        """A new leadership term (or the first): forget an earlier term's round starts and give
        every nomination found on a Workload a round from now. The in-flight demand needs no
        reset: every pass counts it from the nominations on the Workloads it reads. Kueue's
        Incremental, whose round starts are in memory too, widens such a nomination at once
        after a restart; here that would add a copy to every pending Workload at each
        failover, so the nomination keeps its worker one more round."""
        self.round_starts.clear()
        self.term_start = self.clock()

    def _write(self, wl: Obj, nominated: tuple[str, ...]) -> bool:
        if not self.may_write():  # the lease was lost during the pass: write nothing more
            log.info("workload %s/%s: nomination not written, no longer leading",
                     (wl.get("metadata") or {}).get("namespace"), (wl.get("metadata") or {}).get("name"))
            return False
        return write_nominations(self.api, wl, nominated)


def write_nominations(api: KubeApi, wl: Obj, nominated: tuple[str, ...]) -> bool:
    """Write a Workload's nominations; False when it is gone or changed since it was read."""
    meta = wl.get("metadata") or {}
    try:
        request = getattr(api, "request", None)
        if request is not None:  # the API server: server-side apply as Kueue's dispatchers write
            request("PATCH", WORKLOADS.path(meta.get("namespace"), meta["name"], "status"),
                    query={"fieldManager": ADMISSION_FIELD_MANAGER, "force": "true"},
                    body=nomination_apply(wl, nominated), content_type="application/apply-patch+yaml")
        else:  # the in-memory API of the unit tests has no apply: the same field, merged
            patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                     "status": {"nominatedClusterNames": list(nominated)}}
            api.merge_patch(WORKLOADS, meta["name"], patch, meta.get("namespace"), subresource="status")
    except ApiException as exc:
        if exc.status in (404, 409):
            return False  # gone, or Kueue wrote it since: the next pass reads it again
        raise
    log.info("workload %s/%s: nominated %s", meta.get("namespace"), meta["name"], ", ".join(nominated))
    return True


def loopback(target: str) -> bool:
    """Is HOST:PORT on this machine (the only place a plaintext call may go)."""
    host = target.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
