"""The core's two rooms (issue 44 item 3): Kueue's cycle (``scheduler.core.kueue``) and
toposched's additions to it (``scheduler.core.beyond``, docs/beyond-kueue.md). Kueue's cycle
reaches an addition only from the named step that applies it; a new reach from anywhere else
fails here, so the cycle stays Kueue's cycle with its additions at known places."""

from __future__ import annotations

from tests.unit.test_code_quality import _import_graph

# Kueue's step -> the additions it applies there, and why that step.
NAMED_STEPS: dict[str, set[str]] = {
    # after nomination: the bounded wait for a compact placement refines an entry; held domains
    # for compact jobs are settled; a preemptor's landing target is kept
    "scheduler.core.kueue.cycle": {"compact_wait", "domain_holds", "domain_target", "preferred_domains"},
    "scheduler.core.kueue.cycle_state": {"domain_holds"},  # the holds one cycle carries
    # nomination: placement prefers the sticky target, held and previous domains
    "scheduler.core.kueue.nominate": {"held_domains", "domain_target", "preferred_domains"},
    "scheduler.core.kueue.entries": {"held_domains"},  # an entry may carry the domain it holds
    "scheduler.core.kueue.topologies": {"held_domains"},  # placement beside other holders' domains
    "scheduler.core.kueue.snapshot": {"healthy_capacity"},  # quota scaled to healthy capacity
}


def test_kueues_cycle_reaches_an_addition_only_from_its_named_step() -> None:
    graph = _import_graph()["graph"]
    reached = {module: {t.rsplit(".", 1)[1] for t in targets if t.startswith("scheduler.core.beyond.")}
               for module, targets in graph.items() if module.startswith("scheduler.core.kueue.")}
    unnamed = {m: sorted(adds - NAMED_STEPS.get(m, set())) for m, adds in reached.items()
               if adds - NAMED_STEPS.get(m, set())}
    assert unnamed == {}


def test_the_values_below_the_rooms_import_neither_room() -> None:
    """The core's values (topology, workload, resources, requests, reasons...) sit below both
    rooms; placement and preemption are engines both rooms call."""
    graph = _import_graph()["graph"]
    engines = ("scheduler.core.placement.", "scheduler.core.preemption.", "scheduler.core.kueue.",
               "scheduler.core.beyond.")
    offenders = sorted(f"{m} -> {t}" for m, targets in graph.items()
                       if m.startswith("scheduler.core.") and not m.startswith(engines)
                       for t in targets if t.startswith(("scheduler.core.kueue.", "scheduler.core.beyond.")))
    assert offenders == []
