"""The bounded wait for a compact placement on the cycle (toposched's ``--switches=N@T``; the
wish and verdict logic is core/beyond/compactness.py): a refinement of a nomination that fits
(``nominate.Refinement``).

A pod set whose placement spans more domains than it asked for is placed again with its level
made required; if that does not fit either, the entry waits (until the deadline: pending with
``compactness.WAITING_REASON``, and with reserve-compact holding a domain for the first unmet wish)
or is admitted as placed, with a note (after it).

With ``--placement-policy patient-compact`` (:func:`patient`, a step before preemption), a
workload whose compact wait is still running does not preempt: it takes only free capacity,
and preempts as Kueue would once the wait is over.
"""

from __future__ import annotations

from dataclasses import replace

from scheduler.core.beyond import compactness
from scheduler.core.kueue.entries import Entry, Waiting
from scheduler.core.kueue.flavorassigner import Mode
from scheduler.core.kueue.nominate import Nominator
from scheduler.core.kueue.topologies import Placed


def refine(entry: Entry, nominator: Nominator) -> Entry:
    snap, trees, holds = nominator.snap, nominator.topologies.trees, nominator.state.holds
    by_flavor, implied = nominator.layout(entry)
    default = snap.compact_defaults.get(entry.head.cq.name)
    misses: list[tuple[compactness.Wish, int]] = []
    missed_on: list[str] = []  # the flavor of each miss
    for flavor, pod_sets in sorted(by_flavor.items()):
        tree = trees[flavor]
        found = compactness.wishes(tree, pod_sets, default)
        if not found or not compactness.unmet(tree, entry.placed.placements, found):
            continue
        strict = compactness.tightened(pod_sets, found)
        better = nominator.place_for(entry, tree, strict, flavor, implied, held=holds.binding(entry.head, flavor))
        if better.fits:
            placed = entry.placed.adding(better, flavor)
            entry = replace(entry, placed=Placed(placed.placements, placed.flavors,
                                                 {**placed.tightened, flavor: strict}))
            continue
        unmet = compactness.unmet(tree, entry.placed.placements, found)
        misses += unmet
        missed_on += [flavor] * len(unmet)
    if not misses:
        return entry
    verdict = compactness.verdict(misses, entry.head.timestamp, snap.now)
    if not verdict.waiting:
        return replace(entry, waiting=replace(entry.waiting, relaxed=verdict.message))
    held = None
    if snap.placement_options.reserve_compact:  # hold one domain for the first unmet wish
        held = holds.choose(entry.head, missed_on[0], misses[0][0], verdict.deadline, nominator.freeing_before(entry))
    waiting = Waiting(retry_at=verdict.deadline, relaxed=entry.waiting.relaxed, reservation=held)
    return replace(entry.becoming(Mode.NO_FIT, compactness.WAITING_REASON, verdict.message), waiting=waiting)


def patient(entry: Entry, nominator: Nominator) -> Entry:
    """Patient-compact: an entry that needs preemption while its compact wait is still running
    waits instead (pending with ``compactness.WAITING_REASON`` until capacity is released or the
    wait ends); off, or with no running wait, the entry is unchanged."""
    snap = nominator.snap
    if not snap.placement_options.patient_compact:
        return entry
    by_flavor, _implied = nominator.layout(entry)
    default = snap.compact_defaults.get(entry.head.cq.name)
    found = [w for flavor, pod_sets in sorted(by_flavor.items())
             for w in compactness.wishes(nominator.topologies.trees[flavor], pod_sets, default)]
    if not found:
        return entry
    deadline = entry.head.timestamp + min(w.wanted.wait_s for w in found)
    if snap.now >= deadline:
        return entry
    message = compactness.patient_message(found[0], entry.outcome.message)
    waiting = replace(entry.waiting, retry_at=deadline)
    return replace(entry.becoming(Mode.NO_FIT, compactness.WAITING_REASON, message), waiting=waiting)
