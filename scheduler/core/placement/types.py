"""Placement result types (re-exported by :mod:`scheduler.core.placement.planner`).

They live in their own module so :mod:`scheduler.core.topology` can accept them
(``add_usage``/``remove_usage``) without importing the solvers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DomainAssignment:
    values: tuple[str, ...]  # one value per level in PodSetPlacement.levels
    count: int


@dataclass(frozen=True)
class PodSetPlacement:
    name: str
    count: int
    levels: tuple[str, ...]  # Kueue rule: just (hostname,) when hostname is the lowest level
    domains: tuple[DomainAssignment, ...]  # sorted by full value path, no zero counts


@dataclass(frozen=True)
class Placement:
    fits: bool
    reason: str  # Kueue's exact message when it does not fit, "" otherwise
    solver: str  # "greedy" | "cpsat"
    optimal: bool  # cpsat proved optimality (greedy: False)
    pod_sets: tuple[PodSetPlacement, ...]


class PlacementError(Exception):
    """A pod set that cannot be placed; ``str(err)`` is Kueue's message."""
