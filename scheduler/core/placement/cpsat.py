"""OR-Tools CP-SAT placement (work in progress: currently keeps the greedy answer)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.core.placement.greedy import Problem


@dataclass
class Improvement:
    used: bool
    leaf_pods: dict[int, int] = field(default_factory=dict)
    optimal: bool = False


def improve(prob: Problem, greedy_leaf_pods: dict[int, int], *, time_budget_s: float = 0.1) -> Improvement:
    return Improvement(False, dict(greedy_leaf_pods))
