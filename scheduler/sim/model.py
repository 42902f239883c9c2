"""The simulator's data: the static world it runs in, the jobs and failures it replays, and
what it reports (progress while it runs, the result at the end)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.health import DEFAULT_POLICY, HealthPolicy
from scheduler.core.kueue.queueing import LocalQueueSpec
from scheduler.core.kueue.quota import ClusterQueueSpec, CohortSpec, FlavorSpec
from scheduler.core.nodes import NodeInfo
from scheduler.core.placement.options import PlacementOptions
from scheduler.core.resources import GPU
from scheduler.core.topology_request import CompactWait
from scheduler.core.workload import WorkloadSpec
from scheduler.sim.runtime import RunTimeModel

FAILED_STATUS = "UnschedulablePendingReboot"


@dataclass(frozen=True)
class World:
    """The static configuration: nodes, queues, flavors, topologies (core specs)."""

    nodes: tuple[NodeInfo, ...]
    cluster_queues: Mapping[str, ClusterQueueSpec]
    local_queues: Mapping[str, LocalQueueSpec]
    flavors: Mapping[str, FlavorSpec]
    topologies: Mapping[str, tuple[str, ...]]  # Topology name -> levels
    cohorts: Mapping[str, CohortSpec] = field(default_factory=dict)
    workload_priority_classes: Mapping[str, int] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    health_policy: HealthPolicy = DEFAULT_POLICY
    config: KueueConfig = KUEUE_DEFAULTS  # the admin's Kueue Configuration (--kueue-config)
    # toposched beyond Kueue (docs/beyond-kueue.md): placement policies (off = Kueue's) and the
    # ClusterQueues' default bounded wait for a compact placement (their toposched.io/compact-*).
    placement_options: PlacementOptions = PlacementOptions()
    compact_defaults: Mapping[str, CompactWait] = field(default_factory=dict)
    # ClusterQueues whose quota follows healthy capacity (their toposched.io/quota-follows-
    # healthy-capacity annotation; core/beyond/healthy_capacity.py), as the controller scales them.
    follow_healthy: frozenset[str] = frozenset()


@dataclass
class SimJob:
    spec: WorkloadSpec
    duration: float
    submit_at: float
    label: str = ""  # free-form class name (bench)
    first_admitted: float | None = None
    admitted_at: float | None = None
    finished_at: float | None = None
    preemptions: int = 0
    evictions: int = 0
    domains: dict[str, int] = field(default_factory=dict)  # level -> domains spanned (first admission)
    slowdown: float = 1.0  # the current (or last) run's run-time factor (sim/runtime.py)

    @property
    def key(self) -> str:
        return self.spec.key

    @property
    def gpus(self) -> int:
        return sum(ps.count * ps.requests.get(GPU, 0) for ps in self.spec.pod_sets)


@dataclass(frozen=True)
class SimFailure:
    at: float
    node: str
    recover_after: float | None = None


@dataclass(frozen=True)
class Progress:
    time_s: float
    submitted: int
    admitted: int
    finished: int
    pending: int
    preemptions: int
    gpu_utilization: float
    total_jobs: int


@dataclass
class SimResult:
    jobs: list[SimJob]
    makespan: float
    cycles: int
    wall_s: float
    preemptions: int
    evictions: int
    replacements: int
    samples: list[tuple[float, int, int, int]]  # (t, GPUs used, GPUs healthy, pending)
    events: list[dict[str, Any]]  # failures, recoveries, evictions, preemptions, replacements
    gpu_seconds_used: float
    gpu_seconds_available: float
    cq_usage_integral: dict[str, float]
    levels: tuple[str, ...]
    # GPU time of runs cut short by preemption or eviction (no checkpoint model: all of it).
    gpu_seconds_lost: float = 0.0
    # (t, whole-free domains per level, widest first, hostname excluded) at every sample
    free_domains: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)
    run_time: RunTimeModel = RunTimeModel()  # the run-time model the run used (sim/runtime.py)

    @property
    def gpu_utilization(self) -> float:
        return self.gpu_seconds_used / self.gpu_seconds_available if self.gpu_seconds_available else 0.0
