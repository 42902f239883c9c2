"""What each decision does, said once (adapter/apply.py) for the controller's writer and the
simulator: a view that records the calls it gets."""

from __future__ import annotations

from scheduler.adapter.apply import apply_decisions
from scheduler.core.beyond.domain_target import ANN_PREEMPTION_TARGET
from scheduler.core.beyond.held_domains import ANN_RESERVED_DOMAIN
from scheduler.core.kueue.decisions import Admit, Decision, Evict, Pending, Preempt
from scheduler.core.kueue.queueing import REQUEUE_IMMEDIATE, QueueState
from scheduler.core.kueue.quota import STRICT_FIFO, ClusterQueueSpec


class Recorder:
    def __init__(self, gone: frozenset[str] = frozenset(), refuse: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.gone, self.refuse = gone, refuse

    def current(self, decision: Decision) -> bool:
        return decision.workload not in self.gone

    def admit(self, decision: Admit) -> bool:
        self.calls.append(("admit", decision.workload))
        return decision.workload not in self.refuse

    def evict(self, decision: Preempt | Evict) -> None:
        self.calls.append(("evict", decision.workload))

    def annotate(self, workload: str, annotation: str, value: str | None) -> None:
        self.calls.append(("annotate", workload, annotation, str(value)))

    def still_pending(self, decision: Pending, parked: bool) -> None:
        self.calls.append(("pending", decision.workload, str(parked)))


CQS = {"best": ClusterQueueSpec("best"), "strict": ClusterQueueSpec("strict", queueing_strategy=STRICT_FIFO)}


def test_admit_clears_what_served_the_wait_and_forgets_the_parked_entry() -> None:
    view, state = Recorder(), QueueState()
    state.park("ns/a", "best")
    apply_decisions(view, state, CQS, [Admit("ns/a", "u", "best", (), False)])
    assert view.calls == [("admit", "ns/a"), ("annotate", "ns/a", ANN_PREEMPTION_TARGET, "None"),
                          ("annotate", "ns/a", ANN_RESERVED_DOMAIN, "None")]
    assert state.inadmissible() == frozenset()


def test_an_admission_not_written_changes_nothing_else_and_a_stale_decision_nothing_at_all() -> None:
    view, state = Recorder(gone=frozenset({"ns/gone"}), refuse=frozenset({"ns/a"})), QueueState()
    state.park("ns/a", "best")
    apply_decisions(view, state, CQS, [Admit("ns/a", "u", "best", (), False),
                                       Preempt("ns/gone", "u", "best", "ns/p", "best", "InClusterQueue", "m")])
    assert view.calls == [("admit", "ns/a")] and state.inadmissible() == {"ns/a"}


def test_pending_keeps_the_target_sets_the_held_domain_and_parks_only_best_effort_heads() -> None:
    view, state = Recorder(), QueueState()
    apply_decisions(view, state, CQS, [
        Pending("ns/p", "u", "best", "Pending", "m", REQUEUE_IMMEDIATE, preemption_target="{}"),
        Pending("ns/b", "u", "best", "Pending", "m", retry_at=9.0, reserved_domain="held"),
        Pending("ns/s", "u", "strict", "Pending", "m"),
        Evict("ns/e", "u", "best", "ClusterQueueStopped", "m"),
    ])
    assert view.calls == [
        ("annotate", "ns/p", ANN_PREEMPTION_TARGET, "{}"), ("annotate", "ns/p", ANN_RESERVED_DOMAIN, "None"),
        ("pending", "ns/p", "False"),
        ("annotate", "ns/b", ANN_RESERVED_DOMAIN, "held"), ("pending", "ns/b", "True"),
        ("annotate", "ns/s", ANN_RESERVED_DOMAIN, "None"), ("pending", "ns/s", "False"),
        ("evict", "ns/e"),
    ]
    assert state.inadmissible() == {"ns/b"} and state.release_due(9.0) == 1
