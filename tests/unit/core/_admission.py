"""Builders for quota / queueing / preemption / cycle tests (compact, table friendly)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.core.kueue.admitted import AdmittedWorkload, TASUsage
from scheduler.core.kueue.decisions import Admit, Decision, Pending, Preempt
from scheduler.core.kueue.queueing import LocalQueueSpec, PendingWorkload
from scheduler.core.kueue.quota import (
    ClusterQueueSpec,
    FlavorQuotas,
    PreemptionPolicy,
    ResourceGroup,
    ResourceQuota,
)
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec, WorkloadSpec

NS = "team"


def rq(nominal: int, borrow: int | None = None, lend: int | None = None) -> ResourceQuota:
    return ResourceQuota(nominal, borrow, lend)


def cq(
    name: str,
    quotas: Mapping[str, Mapping[str, ResourceQuota]] | None = None,
    *,
    cohort: str | None = None,
    strategy: str = "BestEffortFIFO",
    within: str = "Never",
    reclaim: str = "Never",
    borrow_within: str = "Never",
    threshold: int | None = None,
    stop: str = "None",
) -> ClusterQueueSpec:
    """``quotas``: flavor -> resource -> quota (flavors in order); default 10 cpu in flavor 'f'."""
    quotas = quotas if quotas is not None else {"f": {"cpu": rq(10)}}
    covered = tuple(sorted({r for res in quotas.values() for r in res}))
    flavors = tuple(FlavorQuotas(f, {r: _scaled(r, q) for r, q in res.items()}) for f, res in quotas.items())
    return ClusterQueueSpec(
        name,
        (ResourceGroup(covered, flavors),),
        cohort,
        strategy,
        preemption=PreemptionPolicy(within, reclaim, borrow_within, threshold),
        stop_policy=stop,
    )


def _scaled(resource: str, q: ResourceQuota) -> ResourceQuota:
    """Quotas in tables are whole CPUs; the core counts millicores."""
    if resource != "cpu":
        return q

    def k(v: int | None) -> int | None:
        return None if v is None else v * 1000

    return ResourceQuota(q.nominal * 1000, k(q.borrowing_limit), k(q.lending_limit))


def wl(
    name: str,
    cpu: int = 1,
    count: int = 1,
    *,
    queue: str = "lq",
    prio: int = 0,
    created: float = 0.0,
    required: str | None = None,
    preferred: str | None = None,
    namespace: str = NS,
    extra: Mapping[str, int] | None = None,
) -> WorkloadSpec:
    topo = TopologyRequest(required=required, preferred=preferred) if (required or preferred) else None
    requests = {"cpu": cpu * 1000, **(extra or {})} if cpu else dict(extra or {})
    return WorkloadSpec(
        namespace,
        name,
        (PodSetSpec("main", count, requests, topo),),
        uid=f"uid-{name}",
        queue_name=queue,
        priority=prio,
        created_at=created,
    )


def pending(spec: WorkloadSpec, **kw: object) -> PendingWorkload:
    return PendingWorkload(spec, **kw)  # type: ignore[arg-type]


def admitted(
    spec: WorkloadSpec,
    cluster_queue: str,
    flavor: str = "f",
    *,
    at: float = 0.0,
    evicted: bool = False,
    hosts: Mapping[str, int] | None = None,
) -> AdmittedWorkload:
    usage = {}
    for ps in spec.pod_sets:
        for res, v in ps.requests.items():
            usage[(flavor, res)] = usage.get((flavor, res), 0) + v * ps.count
    tas: tuple[TASUsage, ...] = ()
    if hosts:
        doms = tuple(DomainAssignment((h,), n) for h, n in sorted(hosts.items()))
        placement = PodSetPlacement("main", sum(hosts.values()), ("kubernetes.io/hostname",), doms)
        tas = (TASUsage(flavor, placement, spec.pod_sets[0].requests),)
    return AdmittedWorkload(spec, cluster_queue, usage, reserved_at=at, evicted=evicted, tas=tas)


def lqs(*pairs: tuple[str, str]) -> dict[str, LocalQueueSpec]:
    """(local queue name, cluster queue) in namespace NS."""
    return {f"{NS}/{name}": LocalQueueSpec(NS, name, target) for name, target in pairs}


def summary(decisions: Sequence[Decision]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for d in decisions:
        name = d.workload.split("/", 1)[1]
        if isinstance(d, Admit):
            out.append(("admit", name, d.cluster_queue))
        elif isinstance(d, Preempt):
            out.append(("preempt", name, d.reason))
        elif isinstance(d, Pending):
            out.append(("pending", name, d.reason))
        else:
            out.append(("evict", name, d.reason))
    return out


def snapshot(**kw: object) -> Snapshot:
    from scheduler.core.kueue.quota import FlavorSpec

    kw.setdefault("now", 100.0)
    flavors = kw.pop("flavors", None)
    if flavors is None:
        names = {f for c in kw["cluster_queues"].values() for f in c.flavor_names()}  # type: ignore[attr-defined]
        flavors = {n: FlavorSpec(n) for n in names}
    return Snapshot(flavors=flavors, **kw)  # type: ignore[arg-type]
