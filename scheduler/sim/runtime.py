"""The simulator's run-time model: a multi-node job runs longer the further its pods spread.

A job's trace gives its run time when placed compactly. Admitted with its pods spread over
more network domains than its size needs, it runs ``factor`` times as long::

    factor = 1 + min(max_slowdown, per_extra_narrow * extra_narrow + per_extra_wide * extra_wide)

``extra_narrow``: domains of the narrowest network level (HyperPod: ``network-node-layer-3``,
the last topology level above the hostname) the pod set spans beyond the fewest that can hold
it on the empty cluster (a 32-node job on 16-node domains needs two: it pays for a third);
``extra_wide``: the same one level up (``network-node-layer-2``). Only the spread a scheduler
could have avoided is charged, so both engines pay the same for what a job's size forces.
A job restarted after a preemption or eviction runs again from the start at the factor of its
new placement. Single-pod jobs never slow down.

Presets (:data:`PRESETS`; docs/simulate.md "Run-time model" gives the sources):

* ``off``: every job runs its trace duration (the simulator's behaviour before the model);
* ``moderate`` (the middle strength): +3 % per extra layer-3 domain, +8 % per extra layer-2
  domain, at most +30 %. Crossing the upper tier costs up to 17 % of collective bandwidth and
  communication is 30-50 % of an LLM training step (ByteDance's Arnold, arXiv 2509.15940):
  0.3-0.5 x (1/0.83 - 1) = +6-10 % per step, 8 % taken; crossing only the lower tier costs less
  (no published figure: about a third of it taken); +30 %: Meta measured above 30 %
  degradation from fragmented job placement on its RoCE AI zones (SIGCOMM'24).
* ``strong``: +6 % per extra layer-3 domain, +15 % per extra layer-2 domain, at most +60 %:
  point-to-point (pipeline-parallel) traffic across the upper tier lost up to 70 % bandwidth
  (Arnold), and link-contention-aware placement cut average JCT up to 1.6x (CASSINI, NSDI'24).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from scheduler.core.beyond.compactness import domains_spanned
from scheduler.core.kueue.admitted import TASUsage
from scheduler.core.nodes import HOSTNAME_LABEL
from scheduler.core.resources import with_pod_slot
from scheduler.core.topology import TopologyTree


@dataclass(frozen=True)
class RunTimeModel:
    name: str = "off"
    per_extra_narrow: float = 0.0  # per narrowest-level (layer-3) domain beyond the fewest possible
    per_extra_wide: float = 0.0  # per next-level (layer-2) domain beyond the fewest possible
    max_slowdown: float = 0.0  # the sum is capped here (0.3: at most 1.3x)

    @property
    def on(self) -> bool:
        return self.max_slowdown > 0 and (self.per_extra_narrow > 0 or self.per_extra_wide > 0)

    def factor(self, extra_narrow: int, extra_wide: int) -> float:
        """How many times its compact run time a job with this much avoidable spread runs."""
        if not self.on:
            return 1.0
        return 1.0 + min(self.max_slowdown, self.per_extra_narrow * extra_narrow + self.per_extra_wide * extra_wide)

    def describe(self) -> str:
        if not self.on:
            return "run-time model off (every job runs its trace duration)"
        return (f"run-time model {self.name}: +{self.per_extra_narrow:.0%} per extra layer-3 domain, "
                f"+{self.per_extra_wide:.0%} per extra layer-2 domain, at most +{self.max_slowdown:.0%}")

    def as_dict(self) -> dict[str, float | str]:
        return asdict(self)


PRESETS: Mapping[str, RunTimeModel] = {
    "off": RunTimeModel(),
    "moderate": RunTimeModel("moderate", 0.03, 0.08, 0.30),
    "strong": RunTimeModel("strong", 0.06, 0.15, 0.60),
}
MAX_FRACTION = 10.0  # a parameter above +1,000 % is a typo, not a network


def parse_model(text: str) -> RunTimeModel:
    """``off``, ``moderate``, ``strong``, or ``L3,L2,MAX`` (fractions, e.g. ``0.03,0.08,0.3``).
    ValueError names what is wrong."""
    text = text.strip()
    if text in PRESETS:
        return PRESETS[text]
    parts = text.split(",")
    if len(parts) != 3:
        raise ValueError(f"expected one of {', '.join(PRESETS)} or PER_EXTRA_L3,PER_EXTRA_L2,MAX "
                         f"(fractions, e.g. 0.03,0.08,0.3), got {text!r}")
    values = []
    for name, part in zip(("PER_EXTRA_L3", "PER_EXTRA_L2", "MAX"), parts, strict=True):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"{name}: expected a number, got {part.strip()!r}") from None
        if not 0 <= value <= MAX_FRACTION:  # also refuses nan
            raise ValueError(f"{name}: must be between 0 and {MAX_FRACTION:g}, got {part.strip()}")
        values.append(value)
    return RunTimeModel("custom", *values)


def network_levels(tree: TopologyTree) -> tuple[int, ...]:
    """The indices of the narrowest network level and the one above it (fewer when the tree
    has fewer levels above the hostname)."""
    above_host = [i for i, lv in enumerate(tree.levels) if lv != HOSTNAME_LABEL]
    return tuple(reversed(above_host[-2:]))


def fewest_domains(tree: TopologyTree, usage: TASUsage, level: int) -> int:
    """The fewest domains of ``level`` that hold the pod set's pods on the empty cluster."""
    per_leaf = tree.leaf_fit(with_pod_slot(usage.per_pod), free=tree.allocatable).counts
    capacity = np.sort(tree.subtree_sums(per_leaf)[level])[::-1]
    held = np.cumsum(capacity)
    reached = np.nonzero(held >= usage.placement.count)[0]
    return int(reached[0]) + 1 if len(reached) else len(capacity)


def avoidable_spread(tree: TopologyTree, usage: TASUsage) -> tuple[int, int]:
    """(extra narrow-level domains, extra wide-level domains) the pod set spans beyond the fewest."""
    if usage.placement.count <= 1:
        return 0, 0
    extra = [max(0, domains_spanned(tree, usage.placement, lv) - fewest_domains(tree, usage, lv))
             for lv in network_levels(tree)]
    extra += [0] * (2 - len(extra))
    return extra[0], extra[1]


def slowdown(model: RunTimeModel, trees: Mapping[str, TopologyTree], usages: Sequence[TASUsage]) -> float:
    """The factor of a workload admitted with ``usages``: its most spread pod set's."""
    if not model.on:
        return 1.0
    factors = [model.factor(*avoidable_spread(trees[u.flavor], u)) for u in usages if u.flavor in trees]
    return max(factors, default=1.0)
