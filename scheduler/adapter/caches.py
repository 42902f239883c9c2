"""The conversions a snapshot builder reuses from one snapshot to the next, owned by it.

The controller rebuilds its snapshot every pass (and its node-failure record reads the same
trees); one object rarely changes between two passes, and converting every node, Workload and
tree again was most of a pass (issue 18: the pass is CPU-bound). So whoever builds snapshots
again and again (the controller, the gRPC engine, the webhook's node view) holds one
:class:`SnapshotCaches` and hands it to the builders; a one-off build (explain, the CLI, a
test) leaves it out and converts everything once. No conversion is kept in module state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.adapter.cluster import TreeMemo
from scheduler.adapter.objects import VersionMemo
from scheduler.adapter.pending_queues import QueueMemo
from scheduler.adapter.workload_checks import FieldProblem
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.queueing import PendingWorkload
from scheduler.core.nodes import NodeInfo, PodInfo
from scheduler.core.preemption.rules import LimitSpec, PreemptionConfigSpec

# A pending Workload converted, or what is wrong with it (it is left out of the snapshot).
PendingOrProblems = PendingWorkload | tuple[FieldProblem, ...]


@dataclass
class SnapshotCaches:
    nodes: VersionMemo[NodeInfo] = field(default_factory=VersionMemo)
    pods: VersionMemo[PodInfo] = field(default_factory=VersionMemo)
    trees: TreeMemo = field(default_factory=TreeMemo)  # the empty tree of each TAS flavor
    admitted: VersionMemo[AdmittedWorkload] = field(default_factory=VersionMemo)
    # A pending Workload's conversion depends on its namespace's labels (part of the stamp).
    pending: VersionMemo[PendingOrProblems] = field(default_factory=VersionMemo)
    queues: QueueMemo = field(default_factory=QueueMemo)  # the pending Workloads' queues
    # Kueue's PreemptionConfigs and toposched's PreemptionLimits (adapter/preemption_rules.py),
    # each converted, or the line saying why it is not applied.
    preemption_configs: VersionMemo[PreemptionConfigSpec | str] = field(default_factory=VersionMemo)
    preemption_limits: VersionMemo[LimitSpec | str] = field(default_factory=VersionMemo)
