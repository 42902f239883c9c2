"""One answer to "may a pod be placed on this node?", shared by every door.

Starter version: Ready condition and ``spec.unschedulable``. The HyperPod health labels,
taints and fault conditions extend :func:`node_health` (same signature) in the health issue.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.core.nodes import NodeInfo


@dataclass(frozen=True)
class HealthPolicy:
    """Operator choices. Defaults match HyperPod's own guidance."""

    # Nodes without any HyperPod health label (non-HyperPod clusters, freshly joined nodes).
    unlabelled_nodes_healthy: bool = True
    # Require sagemaker.amazonaws.com/deep-health-check-status=Passed.
    require_deep_health_passed: bool = False


DEFAULT_POLICY = HealthPolicy()


@dataclass(frozen=True)
class Health:
    healthy: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.healthy


HEALTHY = Health(True)


def node_health(node: NodeInfo, policy: HealthPolicy = DEFAULT_POLICY) -> Health:
    """Healthy, or Unhealthy with a short human-readable reason."""
    if not node.ready:
        return Health(False, "node is not Ready")
    if node.unschedulable:
        return Health(False, "node is cordoned (spec.unschedulable)")
    return HEALTHY
