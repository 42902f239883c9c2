"""The cycle's topology trees: one per TAS flavor, charged as entries settle, and the one way the
cycle places a workload on them (``placement.planner.place_workload`` with the cycle's solver,
budget, feature gates, placement options and topology spreading counts).

Kueue's TAS keeps the same: the snapshot's topology usage plus what this cycle admitted
(``admittedThisCycle``), which topology spreading counts too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.beyond import held_domains
from scheduler.core.beyond.held_domains import Reservation
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.flavorassigner import FlavorAssignment
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.core.placement.planner import Placement, PlacementGates, PodSetPlacement, place_workload
from scheduler.core.spreading import GroupOccupancy, SpreadCounts, count_spread, group_key
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import PodSetSpec, WorkloadSpec

PreferredDomains = Mapping[str, Mapping[str, str]]  # pod set -> {level label: value}


@dataclass(frozen=True)
class Placed:
    """Where a workload's TAS pod sets go: a placement and a TAS flavor per pod set, and (compact
    wait) per flavor the pod sets with their compact level made required, as placed."""

    placements: Mapping[str, PodSetPlacement] = field(default_factory=dict)
    flavors: Mapping[str, str] = field(default_factory=dict)
    tightened: Mapping[str, Sequence[PodSetSpec]] = field(default_factory=dict)

    def adding(self, placement: Placement, flavor: str) -> Placed:
        """These placements with ``placement``'s pod sets placed on ``flavor``."""
        return Placed({**self.placements, **{p.name: p for p in placement.pod_sets}},
                      {**self.flavors, **{p.name: flavor for p in placement.pod_sets}}, self.tightened)


class Topologies:
    """The working trees of one cycle (the snapshot's, cloned unless handed over) and placement."""

    def __init__(self, snap: Snapshot, *, own_trees: bool = False) -> None:
        """``own_trees``: the snapshot's trees are this cycle's to change (run_cycles hands
        over the trees of the cycle before), so they are not cloned."""
        self.snap = snap
        self.trees = {name: tree if own_trees else tree.clone() for name, tree in sorted(snap.trees.items())}
        self.levels = {name: tree.levels for name, tree in self.trees.items()}
        self.gates = PlacementGates.from_gates(snap.config.feature_gates.enabled, snap.config.release)
        # Admitted in this cycle (key -> its spec and TAS placements): topology spreading counts
        # them like Kueue's admittedThisCycle.
        self.admitted_now: dict[str, tuple[WorkloadSpec, Placed]] = {}

    def tas_pod_sets(self, assignment: FlavorAssignment, pod_sets: Sequence[PodSetSpec]) -> dict[str, list[PodSetSpec]]:
        """The pod sets assigned a TAS flavor, by that flavor."""
        by_flavor: dict[str, list[PodSetSpec]] = {}
        for ps, psf in zip(pod_sets, assignment.pod_sets, strict=True):
            names = sorted({f for f in psf.flavors.values() if f in self.trees})
            if names:
                by_flavor.setdefault(names[0], []).append(ps)
        return by_flavor

    def place(self, tree: TopologyTree, pod_sets: Sequence[PodSetSpec], implied: bool, *,
              spec: WorkloadSpec | None = None, flavor: str = "", preferred: PreferredDomains | None = None,
              held: Sequence[Reservation] = ()) -> Placement:
        """``spec`` and ``flavor``: the workload being placed, for its topology spreading counts
        (what-if placements pass neither). ``preferred``: the domains to try first.
        ``held``: reservations that bind it (reserve-compact): placed outside their domains
        first, else beside the holders' share (core/beyond/held_domains.py)."""
        if held:
            steered = self.place(held_domains.hold(tree, held, whole=True), pod_sets, implied, spec=spec,
                                 flavor=flavor, preferred=preferred)
            if steered.fits:
                return steered
            tree = held_domains.hold(tree, held, whole=False)
        return place_workload(
            tree,
            pod_sets,
            solver=self.snap.solver,
            time_budget_s=self.snap.time_budget_s,
            implied_tas=implied,
            preferred_domains=preferred,
            gates=self.gates,
            spread_counts=self._spread_counts(flavor, tree, pod_sets, spec),
            options=self.snap.placement_options,
        )

    def _spread_counts(self, flavor: str, tree: TopologyTree, pod_sets: Sequence[PodSetSpec],
                       spec: WorkloadSpec | None) -> dict[str, SpreadCounts] | None:
        """Per pod set with a topology spreading spec, its group's counts on this flavor
        (Kueue ``topologySpreadCountsForFlavor``); None when spreading is off or unused."""
        wanted = [ps for ps in pod_sets if ps.spreading is not None]
        if not self.gates.spreading or spec is None or not wanted:
            return None
        others = self._occupancy(flavor, tree)
        job_uid = spec.labels.get(LABEL_JOB_UID, "")
        out: dict[str, SpreadCounts] = {}
        for ps in wanted:
            assert ps.spreading is not None
            group = group_key(ps.name, ps.topology.group_name if ps.topology else None)
            out[ps.name] = count_spread(ps.spreading, group, spec.namespace, job_uid, spec.key, tree.levels, others)
        return out

    def _occupancy(self, flavor: str, tree: TopologyTree) -> list[GroupOccupancy]:
        """Every admitted Workload (snapshot and this cycle) with the leaves its PodSet groups
        occupy on ``flavor``."""
        rows: list[tuple[WorkloadSpec, list[tuple[str, PodSetPlacement]]]] = [
            (w.spec, [(u.flavor, u.placement) for u in w.tas]) for w in sorted(self.snap.admitted, key=lambda w: w.key)]
        rows += [(spec, [(placed.flavors[n], p) for n, p in sorted(placed.placements.items())])
                 for spec, placed in self.admitted_now.values()]
        out = []
        for spec, usages in rows:
            groups = {ps.name: group_key(ps.name, ps.topology.group_name if ps.topology else None)
                      for ps in spec.pod_sets}
            leaves: dict[str, list[tuple[str, ...]]] = {}
            for used_flavor, placement in usages:
                if used_flavor != flavor:
                    continue
                for dom in placement.domains:
                    leaf = tree.leaf_for_values(placement.levels, dom.values)
                    if leaf is not None:
                        leaves.setdefault(groups.get(placement.name, ""), []).append(tree.paths[-1][leaf])
            out.append(GroupOccupancy(spec.key, spec.namespace, spec.labels,
                                      {g: tuple(v) for g, v in leaves.items()}))
        return out

    def empty(self, flavor: str) -> TopologyTree:
        """The flavor's tree with no workload on it (Kueue: would it fit an empty cluster)."""
        return self.without(flavor, self.snap.admitted, base=self.snap.trees[flavor])

    def without(self, flavor: str, victims: Sequence[AdmittedWorkload],
                base: TopologyTree | None = None) -> TopologyTree:
        """A copy of ``base`` (default: the flavor's working tree) with the victims' usage removed."""
        tree = (base if base is not None else self.trees[flavor]).clone()
        for w in victims:
            for u in w.tas:
                if u.flavor == flavor:
                    tree.remove_usage(u.placement, u.per_pod)
        return tree

    def release(self, victims: Sequence[AdmittedWorkload]) -> None:
        """The victims' topology usage is freed for the rest of the cycle."""
        for w in victims:
            for u in w.tas:
                if u.flavor in self.trees:
                    self.trees[u.flavor].remove_usage(u.placement, u.per_pod)

    def take(self, key: str, spec: WorkloadSpec, requests_of: WorkloadSpec, placed: Placed) -> None:
        """Charge an admitted (or preempting) workload's placements to the working trees.
        ``spec``: as queued (spreading reads its labels); ``requests_of``: as nominated."""
        requests = {ps.name: ps.requests for ps in requests_of.pod_sets}
        for name, placement in sorted(placed.placements.items()):
            self.trees[placed.flavors[name]].add_usage(placement, requests[name])
        self.admitted_now[key] = (spec, placed)
