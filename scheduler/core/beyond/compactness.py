"""A bounded wait for a compact placement (toposched's ``--switches=N@T``; issue 17 item 2).

A pod set that asks (``toposched.io/compact-level``, ``-max-domains``, ``-wait`` on its pod
template, or a default on its ClusterQueue: :data:`CQ_DEFAULT_ANNOTATIONS`) for "at most N
domains of level L, wait up to T from queueing" is admitted only when its placement spans at
most N domains of L. While the best placement available spans more, the cycle keeps the
workload pending with reason :data:`WAITING_REASON` until ``queued + T``; from then on the
best placement available is taken and the admission carries a note (an Event
:data:`RELAXED_REASON`). A pod set without the wish is placed exactly as before.

Pure: the clock is ``Snapshot.now``; the deadline is the workload's queue timestamp + T.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.topology import TopologyTree
from scheduler.core.topology_request import COMPACT_ANNOTATIONS, CompactWait, TopologyRequest
from scheduler.core.workload import PodSetSpec

WAITING_REASON = "WaitingForCompactPlacement"
RELAXED_REASON = "CompactPlacementRelaxed"
# The same keys on a ClusterQueue's metadata.annotations are its default for every pod set
# that has none of its own (Kueue's ClusterQueue CRD is not changed).
CQ_DEFAULT_ANNOTATIONS = COMPACT_ANNOTATIONS


@dataclass(frozen=True)
class Wish:
    """One pod set's compact wish resolved against a tree (the level's index exists)."""

    pod_set: str
    wanted: CompactWait
    level: int


@dataclass(frozen=True)
class Verdict:
    """The outcome for a workload whose placement is not compact enough."""

    waiting: bool  # True: keep pending until ``deadline``; False: the wait is over (relax)
    deadline: float
    message: str


def wishes(tree: TopologyTree, pod_sets: Sequence[PodSetSpec], default: CompactWait | None) -> list[Wish]:
    """The pod sets (with pods) that carry a wish, own or the ClusterQueue's, whose level is
    a level of ``tree`` (a wish naming another level is ignored, as nothing can honour it)."""
    out = []
    for ps in pod_sets:
        wanted = ps.compact or default
        if wanted is None or ps.count <= 0 or not tree.has_level(wanted.level):
            continue
        out.append(Wish(ps.name, wanted, tree.level_index(wanted.level)))
    return out


def domains_spanned(tree: TopologyTree, placement: PodSetPlacement, level: int) -> int:
    """How many domains of ``level`` the placement's pods are in."""
    seen = set()
    for dom in placement.domains:
        leaf = tree.leaf_for_values(placement.levels, dom.values)
        if leaf is not None:
            seen.add(tree.ancestor(leaf, level))
    return len(seen)


def unmet(tree: TopologyTree, placements: Mapping[str, PodSetPlacement],
          found: Sequence[Wish]) -> list[tuple[Wish, int]]:
    """The wishes the placements do not meet, with the domains each spans."""
    out = []
    for wish in found:
        placement = placements.get(wish.pod_set)
        if placement is None:
            continue
        spanned = domains_spanned(tree, placement, wish.level)
        if spanned > wish.wanted.max_domains:
            out.append((wish, spanned))
    return out


def tightened(pod_sets: Sequence[PodSetSpec], found: Sequence[Wish]) -> list[PodSetSpec]:
    """The pod sets with each wish's level made a required level (one domain meets every
    wish), so the placer looks for the compact placement itself before the cycle waits."""
    by_name = {w.pod_set: w for w in found}
    out = []
    for ps in pod_sets:
        wish = by_name.get(ps.name)
        if wish is None:
            out.append(ps)
            continue
        base = ps.topology or TopologyRequest()
        request = replace(base, required=wish.wanted.level, preferred=None, unconstrained=None)
        out.append(replace(ps, topology=request))
    return out


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    text = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s or not (h or m) else "")
    return text


def verdict(misses: Sequence[tuple[Wish, int]], queued_at: float, now: float) -> Verdict:
    """Wait (before the earliest deadline of the unmet wishes) or relax (from it on). The
    message is stable across cycles (no remaining time in it: ``explain`` computes that)."""
    wish, spanned = misses[0]
    deadline = queued_at + min(w.wanted.wait_s for w, _ in misses)
    level_name, most = wish.wanted.level, wish.wanted.max_domains
    if now < deadline:
        return Verdict(True, deadline,
                       f"pod set {wish.pod_set}: waiting for a placement in at most {most} {level_name} "
                       f"domain(s) (the best available now spans {spanned}); waits up to "
                       f"{_duration(wish.wanted.wait_s)} from queueing (toposched.io/compact-wait), "
                       "then takes the best placement available")
    return Verdict(False, deadline,
                   f"pod set {wish.pod_set}: no placement in at most {most} {level_name} domain(s) within "
                   f"{_duration(wish.wanted.wait_s)} of queueing (toposched.io/compact-wait); admitted in "
                   f"{spanned} domain(s), the best placement available")


def patient_message(wish: Wish, why: str) -> str:
    """Why a workload in its compact wait does not preempt (patient-compact; stable across cycles)."""
    because = f" ({why})" if why else ""
    return (f"pod set {wish.pod_set}: waiting for free capacity during its compact wait{because}; it does not "
            f"preempt for {_duration(wish.wanted.wait_s)} from queueing (toposched.io/compact-wait, "
            "--placement-policy patient-compact), then preempts as Kueue would")


def remaining_s(deadline: float, now: float) -> float:
    """Seconds left of a wait (0 once over), for ``explain``."""
    return max(0.0, deadline - now)
