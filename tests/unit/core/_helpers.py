"""Small builders for topology/placement tests: nodes from compact tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scheduler.core.nodes import NodeCondition, NodeInfo, PodInfo, Taint
from scheduler.core.placement.types import Placement, PlacementGates
from scheduler.core.topology import TopologyTree

HOST = "kubernetes.io/hostname"
BLOCK, RACK = "cloud.com/topology-block", "cloud.com/topology-rack"
LEVELS3 = (BLOCK, RACK, HOST)
READY = (NodeCondition("Ready", "True"),)
# Inner slice layers are placed only under TASMultiLayerTopology (Kueue v0.19's default, off in v0.17).
MULTI_LAYER = PlacementGates(multi_layer=True)


def node(
    name: str,
    block: str = "b1",
    rack: str = "r1",
    cpu: int = 1,
    pods: int = 110,
    *,
    extra: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    ready: bool = True,
    unschedulable: bool = False,
) -> NodeInfo:
    alloc = {"cpu": cpu * 1000, "pods": pods, **(extra or {})}
    lab = {BLOCK: block, RACK: rack, HOST: name, **(labels or {})}
    return NodeInfo(
        name=name,
        labels=lab,
        allocatable=alloc,
        taints=tuple(taints),
        conditions=READY if ready else (NodeCondition("Ready", "False"),),
        unschedulable=unschedulable,
    )


def tree_of(
    nodes: Iterable[NodeInfo], levels: Sequence[str] = LEVELS3, pods: Iterable[PodInfo] = ()
) -> TopologyTree:
    return TopologyTree.build("default", levels, list(nodes), list(pods))


def per_node(placement: Placement, index: int = 0) -> dict[str, int]:
    assert placement.fits, placement.reason
    return {"/".join(d.values): d.count for d in placement.pod_sets[index].domains}
