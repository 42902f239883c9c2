"""What the informers told the extender (kube-scheduler's cache): nodes with their health,
compact path and hostname, the Workloads' assignments, the ResourceFlavors' Topologies and the
Topologies' levels. Plain data, no lock: the slot book (book.py) holds the one lock around it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scheduler.core.health import DEFAULT_POLICY, Health, HealthPolicy, node_health
from scheduler.core.nodes import HOSTNAME_LABEL, NodeInfo
from scheduler.core.topology import DEFAULT_HYPERPOD_LEVELS
from scheduler.core.workload import ANN_WORKLOAD, LABEL_PODSET
from scheduler.extender.workload_view import Assignment, Domain, Group, PodRef, WorkloadView

# Levels used to judge compactness in prioritize when the workload's Topology is not known:
# every HyperPod level above the hostname.
COMPACT_LEVELS: tuple[str, ...] = tuple(lv for lv in DEFAULT_HYPERPOD_LEVELS if lv != HOSTNAME_LABEL)

PathReader = Callable[[str], Domain | None]  # node name -> its values of some levels


class ExtenderCache:
    def __init__(self, health_policy: HealthPolicy = DEFAULT_POLICY,
                 compact_levels: Sequence[str] = COMPACT_LEVELS) -> None:
        self.health_policy = health_policy
        self.compact_levels = tuple(compact_levels)
        self.nodes: dict[str, NodeInfo] = {}
        self.health: dict[str, Health] = {}
        self.paths: dict[str, Domain] = {}  # node -> values of compact_levels ("" when absent)
        self.hostnames: dict[str, str] = {}  # node name -> kubernetes.io/hostname label (or name)
        self.host_nodes: dict[str, str] = {}  # the reverse: hostname -> node name
        self.workloads: dict[tuple[str, str], WorkloadView] = {}
        self.flavor_topologies: dict[str, str] = {}  # ResourceFlavor -> spec.topologyName
        self.topology_levels: dict[str, tuple[str, ...]] = {}  # Topology -> spec.levels (node labels)

    # ---- informer feed ------------------------------------------------------------------
    def upsert_node(self, node: NodeInfo, health: Health) -> None:
        self.nodes[node.name] = node
        self.health[node.name] = health
        self.paths[node.name] = tuple(node.labels.get(level, "") for level in self.compact_levels)
        old_host = self.hostnames.get(node.name)
        if old_host is not None and self.host_nodes.get(old_host) == node.name:
            del self.host_nodes[old_host]
        host = self.hostnames[node.name] = node.labels.get(HOSTNAME_LABEL) or node.name
        self.host_nodes[host] = node.name

    def delete_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        self.health.pop(name, None)
        self.paths.pop(name, None)
        host = self.hostnames.pop(name, None)
        if host is not None and self.host_nodes.get(host) == name:
            del self.host_nodes[host]

    def upsert_flavor(self, name: str, topology_name: str | None) -> None:
        if topology_name:
            self.flavor_topologies[name] = topology_name
        else:
            self.flavor_topologies.pop(name, None)

    # ---- reads -----------------------------------------------------------------------------
    def resolve(self, pod: PodRef, group: Group) -> tuple[Assignment | None, str]:
        """The assignment of the pod's pod set, or why there is none to decide on."""
        ns, wl_name, ps = group
        view = self.workloads.get((ns, wl_name))
        if view is None:
            return None, (
                f"workload {ns}/{wl_name} (annotation {ANN_WORKLOAD} of pod {pod.name}) "
                "is not known to the toposched extender yet; retrying"
            )
        if not view.admitted:
            return None, f"workload {ns}/{wl_name} {view.reason}; retrying"
        if ps in view.errors:
            return (
                None,
                f"workload {ns}/{wl_name} pod set {ps}: unreadable topologyAssignment: {view.errors[ps]}",
            )
        assignment = view.pod_sets.get(ps)
        if assignment is None:
            names = ", ".join(sorted(view.pod_sets)) or "none"
            return None, (
                f"workload {ns}/{wl_name} has no topologyAssignment for pod set {ps!r} "
                f"(label {LABEL_PODSET}; pod sets with one: {names})"
            )
        return assignment, ""

    def node_domain(self, name: str, assignment: Assignment) -> Domain | None:
        """The assignment domain of node ``name``, or None (not in the assignment, or unknown)."""
        if assignment.hostname_only:
            # assignment.domain_of without the node: its hostname is kept at upsert (an
            # unknown node counts by its name, as kube-scheduler names it)
            key = (self.hostnames.get(name, name),)
            return key if key in assignment.counts else None
        node = self.nodes.get(name)
        return None if node is None else assignment.domain_of(node)

    def compact_levels_of(self, assignment: Assignment) -> tuple[str, ...]:
        """The levels compactness is judged on: those of the Topology of the pod set's flavor,
        above the hostname."""
        topology = self.flavor_topologies.get(assignment.flavor)
        levels = self.topology_levels.get(topology) if topology else None
        if levels is None:
            # Flavor or Topology not seen (yet, or not readable by the extender): the HyperPod
            # levels this extender always used, which every HyperPod node carries.
            return self.compact_levels
        return tuple(level for level in levels if level != HOSTNAME_LABEL)

    def path_reader(self, levels: tuple[str, ...]) -> PathReader:
        """node name -> its values of ``levels`` ("" when absent); None for an unknown node."""
        if levels == self.compact_levels:
            return self.paths.get  # precomputed at upsert for the default levels

        def path_of(name: str) -> Domain | None:
            node = self.nodes.get(name)
            return None if node is None else tuple(node.labels.get(level, "") for level in levels)

        return path_of

    def domain_path(self, dom: Domain, assignment: Assignment, levels: tuple[str, ...],
                    path_of: PathReader) -> Domain | None:
        """Compact-level path of an assignment domain (via a node of the domain)."""
        if assignment.hostname_only:  # the domain is a hostname: read the path of its node
            return path_of(self.host_nodes.get(dom[0], dom[0]))
        by_level = dict(zip(assignment.levels, dom, strict=False))
        if all(level in by_level for level in levels):
            return tuple(by_level[level] for level in levels)
        # The assignment stops above the deepest compact level: use any node of the domain.
        for name, node in self.nodes.items():
            if assignment.domain_of(node) == dom:
                return path_of(name)
        return None

    def node_health(self, node: NodeInfo) -> Health:
        return node_health(node, self.health_policy)
