"""Defragmentation planning: which running, checkpointable workloads to move so that a whole
domain opens for a pending multi-node job. Pure: plain data in, a plan out.

A pending workload is *blocked by fragmentation* when its quota fits (``assign_flavors`` says
Fit) but its single TAS pod set with a ``required`` or ``preferred`` level fits in no domain of
that level: the free capacity is there, scattered. For each such job (priority desc, then queue
order) every domain of its level is tried: the *movable* blockers inside are taken out, cheapest
first, until the job's pods fit there (then every one it can do without is put back), and every
taken workload must fit again OUTSIDE that domain, on what is free once the job is placed (its
own topology request honoured) — a move, never a kill. The cheapest domain wins; its moves are
committed to the simulated trees before the next job is planned.

Movable: not being evicted already, priority not above the job's, and able to resume from a
checkpoint: HyperPod auto-resume (``sagemaker.amazonaws.com/enable-job-auto-resume: "true"``)
or ``toposched.io/checkpointable: "true"``; ``toposched.io/defrag: "false"`` opts a workload out.
Cost of a move: the GPU time lost since its last checkpoint, GPUs x (now - last checkpoint);
the last checkpoint is ``toposched.io/last-checkpoint`` (RFC 3339 or epoch seconds) when the
job reports it, else its admission (everything since is lost, the pessimistic bound).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scheduler.core.beyond.domain_target import levels_to_try, selector_of
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.flavorassigner import Mode, assign_flavors
from scheduler.core.kueue.queueing import PendingWorkload, resolve_priority
from scheduler.core.kueue.snapshot import Snapshot, quota_in_use
from scheduler.core.placement.planner import place_workload
from scheduler.core.preemption.cost import gpus_held
from scheduler.core.preemption.domains import DomainRequest, Domains
from scheduler.core.topology import TopologyTree

ANN_AUTO_RESUME = "sagemaker.amazonaws.com/enable-job-auto-resume"
ANN_CHECKPOINTABLE = "toposched.io/checkpointable"
ANN_LAST_CHECKPOINT = "toposched.io/last-checkpoint"
ANN_DEFRAG = "toposched.io/defrag"
# Copied from the job to its Workload at creation (kube/jobs.py), as the HyperPod ones are.
DEFRAG_ANNOTATIONS = (ANN_CHECKPOINTABLE, ANN_LAST_CHECKPOINT, ANN_DEFRAG)


@dataclass(frozen=True)
class Move:
    workload: str  # "ns/name"
    uid: str
    cluster_queue: str
    gpus: int
    lost_gpu_s: float  # GPU time lost since its last checkpoint
    resumes: str  # how it resumes: "hyperpod-auto-resume" | "checkpointable"


@dataclass(frozen=True)
class DefragPlan:
    """Move ``moves`` so that ``domain`` (at ``level`` on ``flavor``) opens for ``for_workload``."""

    for_workload: str
    cluster_queue: str
    flavor: str
    level: str
    domain: str
    selector: Mapping[str, str]
    moves: tuple[Move, ...]

    @property
    def lost_gpu_s(self) -> float:
        return sum(m.lost_gpu_s for m in self.moves)


def _checkpoint_time(w: AdmittedWorkload) -> float:
    raw = w.spec.annotations.get(ANN_LAST_CHECKPOINT, "")
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return w.reserved_at


def resume_kind(w: AdmittedWorkload) -> str:
    """How ``w`` resumes when moved, or "" when it cannot (not movable)."""
    ann = w.spec.annotations
    if ann.get(ANN_DEFRAG, "").lower() == "false":
        return ""
    if ann.get(ANN_AUTO_RESUME, "").lower() == "true":
        return "hyperpod-auto-resume"
    if ann.get(ANN_CHECKPOINTABLE, "").lower() == "true":
        return "checkpointable"
    return ""


def move_of(w: AdmittedWorkload, now: float) -> Move:
    gpus = gpus_held(w)
    return Move(w.key, w.uid, w.cluster_queue, gpus, gpus * max(0.0, now - _checkpoint_time(w)), resume_kind(w))


@dataclass(frozen=True)
class _Job:
    pw: PendingWorkload
    cluster_queue: str
    priority: int
    flavor: str
    request: DomainRequest
    required: bool


def _blocked_jobs(snap: Snapshot, trees: Mapping[str, TopologyTree]) -> list[_Job]:
    """Pending multi-node single-pod-set TAS jobs whose quota fits and whose pods fit in no
    domain of their level now, highest priority first."""
    quota = quota_in_use(snap)
    levels = {name: tree.levels for name, tree in trees.items()}
    jobs: list[_Job] = []
    for pw in snap.pending:
        lq = snap.local_queues.get(f"{pw.spec.namespace}/{pw.spec.queue_name}")
        cq = snap.cluster_queues.get(lq.cluster_queue) if lq else None
        if cq is None or len(pw.spec.pod_sets) != 1 or pw.spec.pod_sets[0].count < 2:
            continue
        ps = pw.spec.pod_sets[0]
        top = ps.topology
        level = (top.required or top.preferred) if top is not None else None
        if not level:
            continue
        assignment = assign_flavors(pw.spec, cq, quota, snap.flavors, levels,
                                    ignore_undeclared=snap.config.ignore_undeclared_resources)
        flavor = next((f for f in sorted(set(assignment.pod_sets[0].flavors.values())) if f in trees), None)
        if assignment.mode != Mode.FIT or flavor is None or not trees[flavor].has_level(level):
            continue
        request = DomainRequest(flavor, level, ps.count, ps.requests, ps.node_selector, ps.tolerations, ps.name)
        prio = resolve_priority(pw.spec, snap.workload_priority_classes, snap.priority_classes, pw.priority)
        jobs.append(_Job(pw, cq.name, prio, flavor, request, bool(top is not None and top.required)))
    return sorted(jobs, key=lambda j: (-j.priority, j.pw.timestamp, j.pw.key))


def _fits_somewhere(doms: Domains, level: str) -> bool:
    tree = doms.tree
    return any(doms.pods_fit(doms.leaves(level, d), ()) for d in range(tree.domain_count(tree.level_index(level))))


def _relocate(tree: TopologyTree, doms: Domains, leaves: Sequence[int],
              moved: Sequence[AdmittedWorkload]) -> TopologyTree | None:
    """The tree after the moves: the domain's leaves reserved for the job, every moved workload
    placed again elsewhere (its own topology request). None if one of them finds no room."""
    work = tree.clone()
    for w in moved:
        for u in w.tas:
            if u.flavor == doms.request.flavor:
                work.remove_usage(u.placement, u.per_pod)
    reserved = work.free[list(leaves)].copy()
    work.free[list(leaves)] = 0
    for w in moved:
        pod_sets = [ps for ps, u in zip(w.spec.pod_sets, w.tas, strict=False) if u.flavor == doms.request.flavor]
        placement = place_workload(work, pod_sets or list(w.spec.pod_sets), solver="greedy")
        if not placement.fits:
            return None
        for p, ps in zip(placement.pod_sets, pod_sets or w.spec.pod_sets, strict=False):
            work.add_usage(p, ps.requests)
    work.free[list(leaves)] = reserved
    return work


def _open_domain(job: _Job, tree: TopologyTree, doms: Domains, level: str, domain: int,
                 movable: Sequence[AdmittedWorkload], now: float) -> tuple[list[AdmittedWorkload], TopologyTree] | None:
    """Cheapest movable blockers whose move opens ``domain`` for the job, and the tree after."""
    leaves = doms.leaves(level, domain)
    inside = sorted(doms.blockers(leaves, movable), key=lambda w: (move_of(w, now).lost_gpu_s, w.key))
    taken: list[AdmittedWorkload] = []
    for w in inside:
        if doms.pods_fit(leaves, taken):
            break
        taken.append(w)
    if not taken or not doms.pods_fit(leaves, taken):
        return None
    for w in list(reversed(taken)):
        rest = [x for x in taken if x is not w]
        if doms.pods_fit(leaves, rest):
            taken = rest
    after = _relocate(tree, doms, leaves, taken)
    return (taken, after) if after is not None else None


def _plan_job(job: _Job, tree: TopologyTree, admitted: Sequence[AdmittedWorkload], now: float,
              prio: Mapping[str, int]) -> tuple[DefragPlan, TopologyTree] | None:
    movable = [w for w in admitted if not w.evicted and resume_kind(w) and prio[w.key] <= job.priority]
    doms = Domains(tree, job.request, admitted)
    if _fits_somewhere(doms, job.request.level):
        return None  # not blocked by fragmentation
    for level in levels_to_try(tree, job.request.level, job.required):
        best: tuple[tuple[float, int], DefragPlan, TopologyTree] | None = None
        for d in range(tree.domain_count(tree.level_index(level))):
            found = _open_domain(job, tree, doms, level, d, movable, now)
            if found is None:
                continue
            moves = tuple(move_of(w, now) for w in sorted(found[0], key=lambda w: w.key))
            selector = selector_of(tree, level, d)
            plan = DefragPlan(job.pw.key, job.cluster_queue, job.request.flavor, level, selector[level], selector,
                              moves)
            cost = (plan.lost_gpu_s, len(moves))
            if best is None or cost < best[0]:
                best = (cost, plan, found[1])
        if best is not None:
            return best[1], best[2]
    return None


def _reserve_job(tree: TopologyTree, plan: DefragPlan, job: _Job) -> None:
    """Hold the opened domain for the job in the simulated tree (later jobs plan around it)."""
    ps = job.pw.spec.pod_sets[0]
    inside = replace(ps, node_selector={**ps.node_selector, **plan.selector})
    placement = place_workload(tree, [inside], solver="greedy")
    if placement.fits:
        tree.add_usage(placement.pod_sets[0], ps.requests)


def plan_defrag(snap: Snapshot, max_plans: int = 16) -> list[DefragPlan]:
    """Plans for the pending jobs blocked by fragmentation, highest priority first; a workload
    is moved by at most one plan."""
    trees = {name: tree.clone() for name, tree in sorted(snap.trees.items())}
    prio = {w.key: resolve_priority(w.spec, snap.workload_priority_classes, snap.priority_classes, w.priority)
            for w in snap.admitted}
    admitted = sorted(snap.admitted, key=lambda w: w.key)
    plans: list[DefragPlan] = []
    for job in _blocked_jobs(snap, trees):
        if len(plans) >= max_plans:
            break
        found = _plan_job(job, trees[job.flavor], admitted, snap.now, prio)
        if found is None:
            continue
        plan, after = found
        trees[job.flavor] = after
        _reserve_job(after, plan, job)
        moved = {m.workload for m in plan.moves}
        admitted = [w for w in admitted if w.key not in moved]
        plans.append(plan)
    return plans
