"""The controller's settings: one frozen value, built by the command (``toposched controller``)
or a test, read by the phases; nothing is set on the controller after it is made."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.core.kueue.failures import RequeueBackoff, StormPolicy
from scheduler.core.placement.options import PlacementOptions
from scheduler.k8s.clock import utcnow
from scheduler.kube.defaults import DEFAULT_CONCURRENT_WRITES, DEFAULT_CYCLES_PER_PASS
from scheduler.kube.gone_nodes import DEFAULT_LEASE_ABSENT_S
from scheduler.kube.nodefailures import DEFAULT_UNREACHABLE_GRACE_S

Clock = Callable[[], dt.datetime]


@dataclass(frozen=True)
class DefragSettings:
    """Opt-in defragmentation (``--defrag``): at most ``budget`` moves per ``interval_s``."""

    budget: int
    interval_s: float


@dataclass(frozen=True)
class ControllerSettings:
    """``clock``: every phase's clock (injected in tests). ``solver`` / ``time_budget_s``: the
    placement engine and its budget per workload. ``node_failure_grace_s`` /
    ``node_unreachable_grace_s``: how long a known-bad / an unreachable assigned node must stay so
    before its workload is hot-swapped or evicted; ``storm_policy``: the eviction-storm guard;
    ``deleted_node_lease_absent_s``: the pods of admitted workloads on a deleted node are deleted
    once no kubelet can run them (None: never). ``requeue_backoff``: before a NodeFailures-evicted
    workload is admitted again (Kueue's waitForPodsReady requeuing defaults). ``config``: the
    admin's Kueue Configuration (its ``integrations.frameworks`` limit the kinds managed).
    ``placement_options``: toposched's policies beyond Kueue (None: Kueue's);
    ``domain_preemption``: domain clearing and sticky targets (off: Kueue's classical preemption
    only). ``cycles_per_pass``: Kueue cycles back to back in one pass; ``cycle_budget_s``: more
    while the last pass's time per cycle says they fit (0: exactly ``cycles_per_pass``).
    ``concurrent_writes``: the writer's parallel writes. ``defrag``: None, off."""

    clock: Clock = utcnow
    solver: str = "auto"
    time_budget_s: float = 0.1
    resync_s: float = 5.0
    node_failure_grace_s: float = 3.0
    node_unreachable_grace_s: float = DEFAULT_UNREACHABLE_GRACE_S
    deleted_node_lease_absent_s: float | None = DEFAULT_LEASE_ABSENT_S
    storm_policy: StormPolicy | None = None
    requeue_backoff: RequeueBackoff = field(default_factory=RequeueBackoff)
    config: KueueConfig = KUEUE_DEFAULTS
    placement_options: PlacementOptions | None = None
    domain_preemption: bool = True
    cycles_per_pass: int = DEFAULT_CYCLES_PER_PASS
    cycle_budget_s: float = 0.0
    concurrent_writes: int = DEFAULT_CONCURRENT_WRITES
    defrag: DefragSettings | None = None
