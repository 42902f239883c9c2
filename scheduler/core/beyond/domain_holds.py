"""reserve-compact on the cycle (``--placement-policy reserve-compact``; the domain logic is
core/beyond/held_domains.py): the domains compact waiters hold while a cycle settles its entries.

Its contract with the cycle, one hook each:

* placing an entry: :meth:`Holds.binding` names the reservations that hold it back (the cycle
  places it outside their domains first);
* nominating: :meth:`Holds.hold_back` keeps an entry that fits only in held room pending;
  a compact waiter chooses its domain with :meth:`Holds.choose` (core/beyond/compactness.py);
* settling: :meth:`Holds.keep` records what an entry holds for the rest of the cycle, and
  :func:`reserved_after` hands the held domains to the next cycle of the same pass.

Off (the default), there are no reservations and every hook is a no-op.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from scheduler.core.beyond import held_domains
from scheduler.core.beyond.compactness import Wish
from scheduler.core.beyond.domain_target import DomainTarget, selector_of
from scheduler.core.beyond.held_domains import Reservation
from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.decisions import Decision, Pending
from scheduler.core.kueue.entries import Entry, Head, Waiting
from scheduler.core.kueue.flavorassigner import Mode
from scheduler.core.kueue.queueing import resolve_priority
from scheduler.core.kueue.snapshot import Snapshot
from scheduler.core.kueue.topologies import Topologies


class Holds:
    """Holder key -> the domain its compact wait holds, updated as entries settle."""

    def __init__(self, snap: Snapshot, topologies: Topologies) -> None:
        self.on = snap.placement_options.reserve_compact
        self.topologies = topologies
        self.reservations = self._standing(snap) if self.on else {}

    def _standing(self, snap: Snapshot) -> dict[str, Reservation]:
        """The domains pending compact waiters hold (their annotation, or an earlier cycle's
        decision in this pass), while their wait lasts."""
        out: dict[str, Reservation] = {}
        for pw in snap.pending:
            annotations = pw.spec.annotations
            if pw.key in snap.reserved_domains:
                encoded = snap.reserved_domains[pw.key]
                annotations = {held_domains.ANN_RESERVED_DOMAIN: encoded} if encoded else {}
            parsed = held_domains.parse_reserved(annotations)
            if parsed is None:
                continue
            target, until = parsed
            ps = next((p for p in pw.spec.pod_sets if p.name == target.pod_set and p.count > 0), None)
            if until <= snap.now or target.flavor not in self.topologies.trees or ps is None:
                continue
            prio = resolve_priority(pw.spec, snap.workload_priority_classes, snap.priority_classes, pw.priority)
            out[pw.key] = Reservation(pw.key, prio, pw.timestamp, target, until, ps)
        return out

    def binding(self, head: Head, flavor: str) -> list[Reservation]:
        """The reservations on ``flavor`` that hold ``head`` back."""
        return [r for r in self.reservations.values()
                if r.target.flavor == flavor and r.binds(head.key, head.priority, head.timestamp)]

    def held_by(self, key: str) -> DomainTarget | None:
        """The domain workload ``key`` holds (it is placed there first)."""
        held = self.reservations.get(key)
        return held.target if held is not None else None

    def hold_back(self, entry: Entry, pod_set: str, held: Sequence[Reservation]) -> Entry:
        """``entry`` fits only in room ``held`` keeps for compact waiters that go before it: it
        stays pending (no preemption: the room exists) and is decided again when capacity is
        released or the first of those waits ends. A waiter held back keeps its own reservation."""
        waiting = replace(entry.waiting, retry_at=min(r.until for r in held),
                          reservation=self.reservations.get(entry.head.key))
        held_back = entry.becoming(Mode.NO_FIT, held_domains.HELD_REASON, held_domains.held_message(pod_set, held))
        return replace(held_back, waiting=waiting)

    def choose(self, head: Head, flavor: str, wish: Wish, until: float,
               freeing_first: Sequence[AdmittedWorkload]) -> Reservation | None:
        """The domain ``head``'s compact wait holds: the one it held before while that can still
        hold it (sticky), else the best one now (``held_domains.choose_domain``) on the capacity
        the reservations that bind it leave, where the capacity of ``freeing_first`` (lower
        priority, or being evicted) counts as freeing first."""
        ps = next(p for p in head.spec.pod_sets if p.name == wish.pod_set)
        tree = self.topologies.trees[flavor]
        before = self.reservations.get(head.key)
        if before is not None and (before.target.flavor, before.target.pod_set, before.target.level) == (
                flavor, ps.name, wish.wanted.level) and held_domains.can_ever_hold(tree, before.target, ps):
            return replace(before, priority=head.priority, queued_at=head.timestamp, until=until, pod_set=ps)
        view = held_domains.hold(tree, self.binding(head, flavor), whole=False)
        soon = self.topologies.without(flavor, freeing_first, base=view)
        domain = held_domains.choose_domain(view, soon, wish.level, ps)
        if domain is None:
            return None
        target = DomainTarget(ps.name, flavor, wish.wanted.level, selector_of(tree, wish.wanted.level, domain))
        return Reservation(head.key, head.priority, head.timestamp, target, until, ps)

    def keep(self, entry: Entry) -> None:
        """After ``entry`` settled: its reservation holds for the rest of the cycle, or it has none."""
        if not self.on:
            return
        if entry.waiting.reservation is not None:
            self.reservations[entry.head.key] = entry.waiting.reservation
        else:
            self.reservations.pop(entry.head.key, None)


def reserved_domain(waiting: Waiting) -> str:
    """The held domain a pending decision carries ("" = none: the writer removes the annotation)."""
    return waiting.reservation.encode() if waiting.reservation is not None else ""


def reserved_after(snapshot: Snapshot, decisions: Sequence[Decision]) -> Mapping[str, str]:
    """The held domains as the pending decisions of a cycle leave them, for the next cycle of
    the same pass (the annotations are written after the pass)."""
    if not snapshot.placement_options.reserve_compact:
        return snapshot.reserved_domains
    return {**snapshot.reserved_domains,
            **{d.workload: d.reserved_domain for d in decisions if isinstance(d, Pending)}}
