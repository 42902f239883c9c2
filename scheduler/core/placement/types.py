"""Placement result types (re-exported by :mod:`scheduler.core.placement.planner`).

They live in their own module so :mod:`scheduler.core.topology` can accept them
(``add_usage``/``remove_usage``) without importing the solvers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.core.config import DEFAULT_KUEUE_RELEASE, KUEUE_V019


@dataclass(frozen=True)
class PlacementGates:
    """The Kueue feature gates TAS placement reads, as plain values (defaults = Kueue's)."""

    profile_mixed: bool = True  # TASProfileMixed: LeastFreeCapacity for unconstrained requests
    balanced: bool = False  # TASBalancedPlacement: balanced placement for preferred requests
    affinity_preferred: bool = False  # TASRespectNodeAffinityPreferred: score by preferred affinity
    spreading: bool = False  # TASTopologySpreading: podset-topology-spreading rules
    partial_slices: bool = False  # TASPartialSlices: a count the slice size does not divide
    multi_layer: bool = False  # TASMultiLayerTopology (beta on from v0.19): inner slice layers
    # Not a gate: Kueue v0.19.1 places a PodSet group's leader where its workers still fit
    # (#13766, and v0.18's #10783 counting); v0.17.0 does not (groups.py).
    leader_keeps_worker_capacity: bool = False

    @classmethod
    def from_gates(cls, enabled: Callable[[str], bool], release: str = DEFAULT_KUEUE_RELEASE) -> PlacementGates:
        """From a gate lookup, e.g. ``snapshot.config.feature_gates.enabled``, and the Kueue
        release toposched behaves as (``snapshot.config.release``)."""
        return cls(
            leader_keeps_worker_capacity=release == KUEUE_V019,
            profile_mixed=enabled("TASProfileMixed"),
            balanced=enabled("TASBalancedPlacement"),
            affinity_preferred=enabled("TASRespectNodeAffinityPreferred"),
            spreading=enabled("TASTopologySpreading"),
            partial_slices=enabled("TASPartialSlices"),
            multi_layer=enabled("TASMultiLayerTopology"),
        )


DEFAULT_GATES = PlacementGates()


@dataclass(frozen=True)
class DomainAssignment:
    values: tuple[str, ...]  # one value per level in PodSetPlacement.levels
    count: int


@dataclass(frozen=True)
class LevelSpan:
    """How compact a pod set's placement is at one topology level: the domains it spans and
    the fewest domains of that level whose free capacity could hold it (a lower bound: the
    other levels' constraints are ignored). Reported as metrics, never decided on."""

    level: str
    spanned: int
    fewest: int


@dataclass(frozen=True)
class PodSetPlacement:
    name: str
    count: int
    levels: tuple[str, ...]  # Kueue rule: just (hostname,) when hostname is the lowest level
    domains: tuple[DomainAssignment, ...]  # sorted by full value path, no zero counts
    # Observations for metrics, not part of the answer (so not compared): the spans from the
    # requested level down to the leaves, and whether CP-SAT found fewer domains than greedy.
    spans: tuple[LevelSpan, ...] = field(default=(), compare=False)
    improved_by_cpsat: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Placement:
    fits: bool
    reason: str  # Kueue's exact message when it does not fit, "" otherwise
    solver: str  # "greedy" | "cpsat"
    optimal: bool  # cpsat proved optimality (greedy: False)
    pod_sets: tuple[PodSetPlacement, ...]
    # The pod set Kueue's message names when it does not fit ("couldn't assign flavors to pod
    # set <name>: ..."): the first that failed; for a PodSet group, its first pod set (Kueue
    # picks one of the group's two at random: Go map order).
    failed_pod_set: str = ""


class PlacementError(Exception):
    """A pod set that cannot be placed; ``str(err)`` is Kueue's message."""
