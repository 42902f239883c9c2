"""What a domain-needing preemptor asks of one TAS flavor, and the candidates' usage per leaf
of its tree: how many of its pods a domain holds once some candidates are gone. Read by the
CP-SAT victim search, domain clearing and defragmentation planning."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.nodes import Toleration
from scheduler.core.resources import with_pod_slot
from scheduler.core.topology import TopologyTree

Vector = npt.NDArray[np.int64]


@dataclass(frozen=True)
class DomainRequest:
    """What the preemptor needs from one TAS flavor: ``count`` pods of ``per_pod`` (WITHOUT
    ``pods: 1``) inside one domain at ``level``."""

    flavor: str
    level: str
    count: int
    per_pod: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    pod_set: str = ""  # the pod set's name (the sticky target records it)


def pods_fit(free: Vector, req: Vector) -> int:
    """How many pods of ``req`` fit in ``free`` (negative free counts as none)."""
    mask = req > 0
    if not mask.any():
        return 0
    return int(max(0, int(np.min(np.maximum(free[mask], 0) // req[mask]))))


class Domains:
    """Per-leaf usage of every candidate on the request's flavor, and pod counting in a domain."""

    def __init__(self, tree: TopologyTree, request: DomainRequest, candidates: Sequence[AdmittedWorkload]) -> None:
        self.tree = tree
        self.request = request
        self.req = tree.request_vector(with_pod_slot(request.per_pod))
        self.usage = {c.key: self._leaf_usage(c) for c in candidates}
        per_pod = with_pod_slot(request.per_pod)
        fit = tree.leaf_fit(per_pod, request.node_selector, request.tolerations, free=tree.allocatable)
        self.eligible = fit.counts > 0

    def _leaf_usage(self, cand: AdmittedWorkload) -> dict[int, Vector]:
        out: dict[int, Vector] = {}
        for u in cand.tas:
            if u.flavor != self.request.flavor:
                continue
            vec = self.tree.request_vector(with_pod_slot(u.per_pod))
            for dom in u.placement.domains:
                leaf = self.tree.leaf_for_values(u.placement.levels, dom.values)
                if leaf is not None:
                    out[leaf] = out.get(leaf, np.zeros_like(vec)) + dom.count * vec
        return out

    def leaves(self, level: str, domain: int) -> list[int]:
        """The leaves of ``domain`` at ``level`` that could hold a pod of the request at all."""
        anc = self.tree.ancestors_array(self.tree.level_index(level))
        return [int(x) for x in np.nonzero((anc == domain) & self.eligible)[0]]

    def blockers(self, leaves: Sequence[int], candidates: Sequence[AdmittedWorkload]) -> list[AdmittedWorkload]:
        inside = set(leaves)
        return [c for c in candidates if inside & set(self.usage[c.key])]

    def freed(self, leaf: int, removed: Sequence[AdmittedWorkload]) -> Vector:
        """The leaf's free capacity once ``removed`` are gone."""
        free: Vector = self.tree.free[leaf].copy()
        for w in removed:
            u = self.usage[w.key].get(leaf)
            if u is not None:
                free = free + u
        return free

    def pods(self, leaves: Sequence[int], removed: Sequence[AdmittedWorkload]) -> int:
        """Pods of the request ``leaves`` hold once ``removed`` are gone."""
        return sum(pods_fit(self.freed(leaf, removed), self.req) for leaf in leaves)

    def pods_fit(self, leaves: Sequence[int], removed: Sequence[AdmittedWorkload]) -> bool:
        return self.pods(leaves, removed) >= self.request.count
