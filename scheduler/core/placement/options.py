"""toposched's placement policies beyond Kueue (issue 17), all off by default.

Off, placement is Kueue's (greedy BestFit / LeastFreeCapacity, then CP-SAT never worse), which
is what the conformance suite compares with the real Kueue. Each policy only reorders or
narrows the candidates of the same placement problem; none admits anything Kueue would not.

- ``fragmentation_aware``: unconstrained (and implied-TAS) pod sets fill the fullest domains
  first at every level, from the top down (hierarchical LeastFreeCapacity, Kueue PR #10406 /
  issue #14850), so whole layer-2 / layer-3 domains stay free for multi-node jobs
  (:mod:`scheduler.core.placement.fragmentation`).
- ``degraded_last``: a multi-pod pod set with a required or preferred level is first placed
  only on domains of that level with no unhealthy node (HyperPod health labels) and no drained
  node; the degraded domains are used only when nothing else fits.
- ``reserve_compact``: a workload in its bounded wait for a compact placement
  (:mod:`scheduler.core.beyond.compactness`) holds the domain it waits for; workloads it goes before in
  Kueue's order are steered away from it (:mod:`scheduler.core.beyond.held_domains`). Acts only on
  workloads that ask for a compact wait, so without ``toposched.io/compact-*`` it changes nothing.
- ``patient_compact``: a workload in its bounded wait for a compact placement does not preempt
  while the wait runs (it takes free capacity only; ``core/beyond/compact_wait.py`` ``patient``).
  Acts only on workloads that ask for a compact wait.
"""

from __future__ import annotations

from dataclasses import dataclass

POLICY_KUEUE = "kueue"
POLICY_FRAGMENTATION = "fragmentation-aware"
POLICY_DEGRADED = "degraded-last"
POLICY_RESERVE = "reserve-compact"
POLICY_PATIENT = "patient-compact"
POLICY_ALL = "all"
POLICIES = (POLICY_KUEUE, POLICY_FRAGMENTATION, POLICY_DEGRADED, POLICY_RESERVE, POLICY_PATIENT, POLICY_ALL)


@dataclass(frozen=True)
class PlacementOptions:
    fragmentation_aware: bool = False
    degraded_last: bool = False
    reserve_compact: bool = False
    patient_compact: bool = False

    @classmethod
    def from_names(cls, names: str) -> PlacementOptions:
        """``"kueue"`` (the default), ``"fragmentation-aware"``, ``"degraded-last"``,
        ``"reserve-compact"``, ``"patient-compact"``, a comma list of those, or ``"all"``. Raises
        ValueError naming the unknown policy."""
        wanted = {n.strip() for n in names.split(",") if n.strip()}
        unknown = sorted(wanted - set(POLICIES))
        if unknown:
            raise ValueError(f"unknown placement policy {unknown[0]!r}; expected one of {', '.join(POLICIES)}")
        every = POLICY_ALL in wanted
        return cls(fragmentation_aware=every or POLICY_FRAGMENTATION in wanted,
                   degraded_last=every or POLICY_DEGRADED in wanted,
                   reserve_compact=every or POLICY_RESERVE in wanted,
                   patient_compact=every or POLICY_PATIENT in wanted)

    @property
    def kueue_equivalent(self) -> bool:
        return not (self.fragmentation_aware or self.degraded_last or self.reserve_compact or self.patient_compact)
