"""Files -> :class:`World` and jobs; policy variants (``--compare``); the JSON summary."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.cluster import core_nodes
from scheduler.adapter.queues import (
    cluster_queue_spec,
    cohort_spec,
    compact_defaults,
    flavor_spec,
    following_health,
    local_queue_spec,
)
from scheduler.core.fakecluster import generate_nodes
from scheduler.core.kueue.failures import RequeueBackoff, StormPolicy
from scheduler.core.kueue.quota import BEST_EFFORT_FIFO, STRICT_FIFO, ResourceQuota
from scheduler.core.nodes import HOSTNAME_LABEL, NodeInfo
from scheduler.core.placement.options import POLICIES, PlacementOptions
from scheduler.core.resources import GPU
from scheduler.core.topology_request import TopologyRequest
from scheduler.core.workload import PodSetSpec, WorkloadSpec
from scheduler.sim.engine import Simulator
from scheduler.sim.model import SimFailure, SimJob, SimResult, World
from scheduler.sim.outcomes import (
    arrival_window,
    completed_gpu_hours_per_day,
    jct_by_class,
    mean_slowdown,
    percentile,
)
from scheduler.sim.runtime import PRESETS, RunTimeModel
from scheduler.sim.trace import Trace, TraceError

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
COMPARE = ("solver", "queueing", "borrowing", "placement")


class ClusterError(ValueError):
    """The cluster (description or Node objects) is wrong, not the queue objects: the doors
    (CLI, gRPC) name the cluster input for it and the queues input for any other ValueError."""


def cluster_nodes(cluster: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> tuple[NodeInfo, ...]:
    """The nodes of a fakecluster description or a list of Node objects; ClusterError says why not."""
    try:
        nodes = tuple(core_nodes(generate_nodes(cluster) if isinstance(cluster, Mapping) else list(cluster)))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ClusterError(str(exc)) from exc
    if not nodes:
        raise ClusterError("the cluster has no nodes")
    return nodes


def world_from_objects(cluster: Mapping[str, Any] | Sequence[Mapping[str, Any]],
                       queue_objects: Sequence[Mapping[str, Any]]) -> World:
    """``cluster``: a fakecluster description (dict) or a list of Node objects.
    ``queue_objects``: Kueue objects (+ Namespaces). ClusterError for the cluster, ValueError
    for the queue objects, naming what is wrong."""
    nodes = cluster_nodes(cluster)
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for obj in queue_objects:
        by_kind.setdefault(str(obj.get("kind") or ""), []).append(obj)
    known = {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "Cohort", "WorkloadPriorityClass",
             "Namespace", "PriorityClass"}
    other = sorted(set(by_kind) - known)
    unsimulated = [k for k in ("PreemptionConfig", "PreemptionLimit") if k in by_kind]
    if unsimulated:  # the controller honours them (domain clearing, defragmentation); no silent difference
        raise ValueError(f"kind: {unsimulated[0]} is not simulated (the controller honours it: "
                         "docs/quota-and-preemption.md); simulate without it")
    if other:
        what = f"{other[0]!r} is not a queue object" if other[0] else "missing"
        raise ValueError(f"kind: {what} (expected one of {', '.join(sorted(known))})")
    if not by_kind.get("ClusterQueue"):
        raise ValueError("no ClusterQueue defined")

    def name(o: Mapping[str, Any]) -> str:
        return str((o.get("metadata") or {}).get("name") or "")

    try:
        cqs = {name(o): cluster_queue_spec(o) for o in by_kind["ClusterQueue"]}
        lqs = {}
        for o in by_kind.get("LocalQueue", []):
            lq = local_queue_spec(o)
            lqs[lq.key] = lq
        flavors = {name(o): flavor_spec(o) for o in by_kind.get("ResourceFlavor", [])}
        cohorts = {name(o): cohort_spec(o) for o in by_kind.get("Cohort", [])}
    except Exception as exc:  # pydantic ValidationError and friends: one line
        raise ValueError(f"invalid Kueue object: {str(exc).splitlines()[0]}") from exc
    topologies: dict[str, tuple[str, ...]] = {}
    for o in by_kind.get("Topology", []):
        levels = [lv.get("nodeLabel") for lv in (o.get("spec") or {}).get("levels") or ()]
        if not levels or not all(isinstance(lv, str) and lv for lv in levels):
            raise ValueError(f"Topology {name(o)}: spec.levels[].nodeLabel missing")
        topologies[name(o)] = tuple(levels)
    labelled = {lv for n in nodes for lv in n.labels}
    for tname, tlevels in topologies.items():
        for lv in tlevels:
            if lv not in labelled:
                raise ValueError(f"Topology {tname}: level {lv!r} is not a label of any node in the cluster")
    wpcs = {name(o): int(o.get("value") or 0) for o in by_kind.get("WorkloadPriorityClass", [])}
    ns_labels: dict[str, dict[str, str]] = {}
    for o in by_kind.get("Namespace", []):
        ns_labels[name(o)] = {NAMESPACE_NAME_LABEL: name(o), **dict((o.get("metadata") or {}).get("labels") or {})}
    for lq in lqs.values():
        ns_labels.setdefault(lq.namespace, {NAMESPACE_NAME_LABEL: lq.namespace})
    return World(nodes=nodes, cluster_queues=cqs, local_queues=lqs, flavors=flavors, topologies=topologies,
                 cohorts=cohorts, workload_priority_classes=wpcs, namespace_labels=ns_labels,
                 compact_defaults=compact_defaults(by_kind["ClusterQueue"]),
                 follow_healthy=following_health(by_kind["ClusterQueue"]))


def jobs_from_trace(trace: Trace, world: World) -> tuple[list[SimJob], list[SimFailure]]:
    levels = {lv for lvs in world.topologies.values() for lv in lvs}
    jobs = []
    for i, t in enumerate(trace.jobs):
        if f"{t.namespace}/{t.queue}" not in world.local_queues:
            raise TraceError(f"jobs[{i}].queue: no LocalQueue {t.queue!r} in namespace {t.namespace!r} "
                             "in the queues file")
        level = t.required or t.preferred
        if level and level not in levels:
            raise TraceError(f"jobs[{i}].topology: level {level!r} is not in any Topology of the queues file")
        if t.priority_class and t.priority_class not in world.workload_priority_classes:
            raise TraceError(f"jobs[{i}].priorityClass: no WorkloadPriorityClass {t.priority_class!r}")
        if t.spec is not None:
            spec = dataclasses.replace(t.spec, created_at=t.at, uid=t.spec.uid or f"uid-{t.namespace}-{t.name}")
        else:
            topo = TopologyRequest(required=t.required, preferred=t.preferred) if level else None
            requests = {GPU: t.gpus_per_pod} if t.gpus_per_pod else {}
            spec = WorkloadSpec(t.namespace, t.name, (PodSetSpec("main", t.pods, requests, topo),),
                                uid=f"uid-{t.namespace}-{t.name}", queue_name=t.queue,
                                priority_class=t.priority_class, created_at=t.at,
                                labels={"kueue.x-k8s.io/queue-name": t.queue})
        jobs.append(SimJob(spec, t.duration, t.at, t.priority_class or ""))
    names = {n.name for n in world.nodes}
    failures = []
    for i, f in enumerate(trace.failures):
        if f.node not in names:
            raise TraceError(f"failures[{i}].node: no node {f.node!r} in the cluster")
        failures.append(SimFailure(f.at, f.node, f.recover_after))
    return jobs, failures


def level_capacity(world: World) -> list[tuple[str, int]]:
    """(level, nodes in its largest domain) for the first Topology, hostname excluded."""
    if not world.topologies:
        return []
    levels = next(iter(sorted(world.topologies.items())))[1]
    out = []
    for i, lv in enumerate(levels):
        if lv == HOSTNAME_LABEL:
            continue
        counts: dict[tuple[str, ...], int] = {}
        for n in world.nodes:
            path = tuple(n.labels.get(x, "") for x in levels[: i + 1])
            counts[path] = counts.get(path, 0) + 1
        out.append((lv, max(counts.values())))
    return out


# ---------------------------------------------------------------------- variants


def variants(world: World, compare: str | None, solver: str) -> list[tuple[str, World, str]]:
    """(label, world, solver) for every policy variant of ``--compare``."""
    if compare is None:
        return [(f"{solver}", world, solver)]
    if compare == "solver":
        return [("greedy", world, "greedy"), ("cpsat", world, "cpsat")]
    if compare == "queueing":
        return [(s, with_queueing(world, s), solver) for s in (STRICT_FIFO, BEST_EFFORT_FIFO)]
    if compare == "borrowing":
        return [("borrowing", world, solver), ("no borrowing", without_borrowing(world), solver)]
    if compare == "placement":  # toposched's placement policies (docs/beyond-kueue.md)
        return [(name, dataclasses.replace(world, placement_options=PlacementOptions.from_names(name)), solver)
                for name in POLICIES]
    raise ValueError(f"--compare: unknown value {compare!r} (choose from {', '.join(COMPARE)})")


def with_queueing(world: World, strategy: str) -> World:
    cqs = {k: dataclasses.replace(cq, queueing_strategy=strategy) for k, cq in world.cluster_queues.items()}
    return dataclasses.replace(world, cluster_queues=cqs)


def without_borrowing(world: World) -> World:
    """borrowingLimit 0 on every resource of every ClusterQueue (nominal quota only)."""
    cqs = {}
    for k, cq in world.cluster_queues.items():
        groups = tuple(dataclasses.replace(g, flavors=tuple(
            dataclasses.replace(f, resources={r: ResourceQuota(q.nominal, 0, q.lending_limit)
                                              for r, q in f.resources.items()}) for f in g.flavors))
            for g in cq.resource_groups)
        cqs[k] = dataclasses.replace(cq, resource_groups=groups)
    return dataclasses.replace(world, cluster_queues=cqs)


# ---------------------------------------------------------------------- summary


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"count": len(values), "mean": round(sum(values) / len(values), 3) if values else 0.0,
            "p50": round(percentile(values, 50), 3), "p99": round(percentile(values, 99), 3),
            "max": round(max(values), 3) if values else 0.0}


def summarize(result: SimResult) -> dict[str, Any]:
    jobs = result.jobs
    waits = [j.first_admitted - j.submit_at for j in jobs if j.first_admitted is not None]
    by_team: dict[str, list[float]] = {}
    by_prio: dict[str, list[float]] = {}
    for j in jobs:
        if j.first_admitted is None:
            continue
        by_team.setdefault(j.spec.namespace, []).append(j.first_admitted - j.submit_at)
        by_prio.setdefault(j.spec.priority_class or "(none)", []).append(j.first_admitted - j.submit_at)
    narrow = [lv for lv in result.levels if lv != HOSTNAME_LABEL]
    level = narrow[-1] if narrow else ""
    multi = [j for j in jobs if j.domains and sum(ps.count for ps in j.spec.pod_sets) > 1]
    spans = [j.domains.get(level, 0) for j in multi]
    free = [sum(counts) for _t, counts in result.free_domains]
    window = arrival_window(jobs, result.makespan)
    return {
        "makespan_s": round(result.makespan, 3),
        "submitted": len([j for j in jobs if j.submit_at <= result.makespan]),
        "admitted": sum(1 for j in jobs if j.first_admitted is not None),
        "finished": sum(1 for j in jobs if j.finished_at is not None),
        "pending": sum(1 for j in jobs
                       if j.first_admitted is None or (j.finished_at is None and j.admitted_at is None)),
        "never_admitted": sorted(j.key for j in jobs if j.first_admitted is None),
        "preemptions": result.preemptions,
        "evictions_node_failures": sum(1 for e in result.events if e["kind"] == "eviction"
                                       and e["detail"].startswith("NodeFailures")),
        "replacements": result.replacements,
        "failures": sum(1 for e in result.events if e["kind"] == "failure"),
        "recoveries": sum(1 for e in result.events if e["kind"] == "recovery"),
        "wait_s": _stats(waits),
        "wait_by_team_s": {k: _stats(v) for k, v in sorted(by_team.items())},
        "wait_by_priority_s": {k: _stats(v) for k, v in sorted(by_prio.items())},
        "gpu_utilization": round(result.gpu_utilization, 4),
        "domains_level": level,
        "mean_domains_multi_pod": round(sum(spans) / len(spans), 3) if spans else 0.0,
        "multi_pod_in_one_domain": round(sum(1 for s in spans if s == 1) / len(spans), 4) if spans else 0.0,
        "wait_p95_s": round(percentile(waits, 95), 3),
        "gpu_hours_lost": round(result.gpu_seconds_lost / 3600, 3),
        "free_whole_domains_mean": round(sum(free) / len(free), 3) if free else 0.0,
        "run_time_model": result.run_time.as_dict(),
        "jct_s": jct_by_class(jobs),
        "mean_slowdown": mean_slowdown(jobs),
        "window_s": round(window, 3),
        "completed_gpu_hours_per_day": completed_gpu_hours_per_day(jobs, window),
        "cycles": result.cycles,
        "wall_s": round(result.wall_s, 3),
    }



# ---------------------------------------------------------------------- one entry point (CLI and gRPC)


def cluster_from_documents(docs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | list[Mapping[str, Any]]:
    """A fakecluster description (one mapping with ``layers``) or a list of Node objects."""
    if len(docs) == 1 and "layers" in docs[0] and "kind" not in docs[0]:
        return docs[0]
    bad = [d.get("kind") for d in docs if d.get("kind", "Node") != "Node"]
    if bad or not docs:
        raise ClusterError("expected a cluster description (name, layers, nodesPerDomain, ...) or Node objects"
                         + (f", got kind {bad[0]!r}" if bad else ", got nothing"))
    return list(docs)


def run_variants(world: World, trace: Trace, *, solver: str = "greedy", compare: str | None = None,
                 time_budget_s: float = 0.1, horizon_s: float | None = None,
                 progress: Any = None, progress_every_s: float = 0.0,
                 eviction_delay_s: float = 30.0, requeue_backoff: RequeueBackoff | None = None,
                 storm_policy: StormPolicy | None = None,
                 storm_guard: bool = True,
                 run_time: RunTimeModel = PRESETS["off"]) -> list[tuple[str, SimResult, dict[str, Any]]]:
    """Every variant of ``compare`` on the same trace: (label, result, summary).
    ``progress(label, index, count, Progress)`` is called as the engine reports."""
    out = []
    runs = variants(world, compare, solver)
    for idx, (label, w, sol) in enumerate(runs):
        jobs, failures = jobs_from_trace(trace, w)
        cb = None
        if progress is not None:
            def cb(p: Any, label: str = label, idx: int = idx) -> None:
                progress(label, idx, len(runs), p)
        result = Simulator(w, jobs, failures, solver=sol, time_budget_s=time_budget_s, horizon_s=horizon_s,
                           progress=cb, progress_every_s=progress_every_s, eviction_delay_s=eviction_delay_s,
                           requeue_backoff=requeue_backoff, storm_policy=storm_policy, storm_guard=storm_guard,
                           run_time=run_time).run()
        out.append((label, result, summarize(result)))
    return out
