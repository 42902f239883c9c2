"""How many pods of one shape could a topology domain ever hold (empty cluster)?

An admission-time summary, not the placement engine: nodes are grouped by their topology
path and their (allocatable, healthy) shape once per change of the node set, so a request
costs one ``pods_that_fit`` per distinct node shape plus one sum per domain. Usage by
running pods is deliberately ignored: the webhook answers "can this job EVER fit", the
controller answers "does it fit now".

Node membership follows Kueue: a node belongs to a TAS flavor when it carries every flavor
``nodeLabel`` with the same value and a label for every topology level. Health is
``scheduler.core.health.node_health`` (the one answer every door uses).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.core.health import DEFAULT_POLICY, HealthPolicy, node_health
from scheduler.core.nodes import NodeInfo
from scheduler.core.resources import pods_that_fit, with_pod_slot

Shape = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Fit:
    """Best single-domain capacity for a pod shape: counting all member nodes, and only healthy ones."""

    all_nodes: int
    healthy: int


class CapacityIndex:
    def __init__(self, levels: Sequence[str], nodes: Iterable[NodeInfo], node_labels: Mapping[str, str],
                 policy: HealthPolicy = DEFAULT_POLICY) -> None:
        self.levels = tuple(levels)
        self.node_count = 0
        # per level index: domain path prefix -> Counter[(shape, healthy)]
        self._domains: list[dict[tuple[str, ...], Counter[tuple[Shape, bool]]]] = [{} for _ in self.levels]
        for node in nodes:
            labels = node.labels
            if any(labels.get(k) != v for k, v in node_labels.items()):
                continue
            if any(level not in labels for level in self.levels):
                continue
            self.node_count += 1
            path = tuple(labels[level] for level in self.levels)
            shape: Shape = tuple(sorted(node.allocatable.items()))
            healthy = bool(node_health(node, policy))
            for i in range(len(self.levels)):
                self._domains[i].setdefault(path[: i + 1], Counter())[(shape, healthy)] += 1

    def _per_shape(self, per_pod: Mapping[str, int]) -> dict[Shape, int]:
        demand = with_pod_slot(per_pod)
        out: dict[Shape, int] = {}
        for domains in self._domains[:1]:
            for counter in domains.values():
                for shape, _ in counter:
                    if shape not in out:
                        out[shape] = pods_that_fit(dict(shape), demand)
        return out

    def _domain_fit(self, counter: Counter[tuple[Shape, bool]], fits: Mapping[Shape, int]) -> Fit:
        all_nodes = healthy = 0
        for (shape, ok), n in counter.items():
            pods = fits[shape] * n
            all_nodes += pods
            if ok:
                healthy += pods
        return Fit(all_nodes, healthy)

    def level_index(self, level: str) -> int:
        return self.levels.index(level)

    def best_domain(self, level: str, per_pod: Mapping[str, int]) -> Fit:
        """Pods that fit in the largest single domain at ``level``."""
        if not self.node_count:
            return Fit(0, 0)
        fits = self._per_shape(per_pod)
        best_all = best_healthy = 0
        for counter in self._domains[self.level_index(level)].values():
            f = self._domain_fit(counter, fits)
            best_all, best_healthy = max(best_all, f.all_nodes), max(best_healthy, f.healthy)
        return Fit(best_all, best_healthy)

    def total(self, per_pod: Mapping[str, int]) -> Fit:
        if not self.node_count:
            return Fit(0, 0)
        fits = self._per_shape(per_pod)
        total_all = total_healthy = 0
        for counter in self._domains[0].values():
            f = self._domain_fit(counter, fits)
            total_all += f.all_nodes
            total_healthy += f.healthy
        return Fit(total_all, total_healthy)

    def best_slices(self, level: str | None, slice_level: str, slice_size: int,
                    per_pod: Mapping[str, int]) -> Fit:
        """Slices of ``slice_size`` pods (each inside one ``slice_level`` domain) that fit in the best
        domain at ``level`` (``None``: the whole flavor)."""
        if not self.node_count or slice_size < 1:
            return Fit(0, 0)
        fits = self._per_shape(per_pod)
        outer = self.level_index(level) if level else -1
        per_outer_all: Counter[tuple[str, ...]] = Counter()
        per_outer_healthy: Counter[tuple[str, ...]] = Counter()
        for path, counter in self._domains[self.level_index(slice_level)].items():
            f = self._domain_fit(counter, fits)
            key = path[: outer + 1] if outer >= 0 else ()
            per_outer_all[key] += f.all_nodes // slice_size
            per_outer_healthy[key] += f.healthy // slice_size
        return Fit(max(per_outer_all.values(), default=0), max(per_outer_healthy.values(), default=0))
