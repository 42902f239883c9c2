"""``--binder kube-scheduler``: filter passes one node (the most compact free one) and takes its
slot there, since kube-scheduler then binds without asking the extender. Serial filters of one
group never get the same slot; the slot is the pod's own until it binds elsewhere, is deleted or
the reservation expires."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from scheduler.core.nodes import node_from_k8s
from scheduler.extender.book import SlotBook, reserve_chosen
from scheduler.extender.config import extender_entry
from scheduler.extender.filtering import FilterOutcome
from scheduler.extender.workload_view import PodRef, pod_ref, workload_view
from tests.unit.extender.test_logic import ALL, INDEX, NODES, node, pod, ranked_pod, v1beta2, workload


class FilterVerb:
    """A slot book whose ``filter`` is the filter verb as the server runs it (server.Extender.filter):
    the filter step decides, then the reserve step takes the chosen node's slot."""

    def __init__(self, book: SlotBook) -> None:
        self.book = book

    def filter(self, pod: PodRef, names: Sequence[str]) -> FilterOutcome:
        return reserve_chosen(self.book, pod, self.book.filter(pod, names))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.book, name)


def choosing_book(assign: dict[str, int], *, now: list[float] | None = None) -> FilterVerb:
    clock = (lambda: now[0]) if now is not None else (lambda: 0.0)
    b = SlotBook(choose_node=True, clock=clock, reservation_ttl_s=10)
    for n in NODES:
        b.upsert_node(node_from_k8s(n))
    b.upsert_workload(workload_view(workload(assignments={"main": v1beta2(assign)})))
    return FilterVerb(b)


def test_filter_decides_and_writes_nothing_the_reserve_step_takes_the_slot() -> None:
    """kube-scheduler's split: Filter is pure, Reserve is its own step (the server calls it)."""
    b = choosing_book({"a1": 1}).book
    p0 = pod_ref(pod("p0"))
    assert b.filter(p0, ALL).passed == ["a1"]
    assert b.reservations == {} and b.filter(pod_ref(pod("p1")), ALL).passed == ["a1"]
    assert reserve_chosen(b, p0, b.filter(p0, ALL)).passed == ["a1"]
    assert b.occupancy(("ns", "wl", "main")) == {"a1": 1}
    taken = reserve_chosen(b, pod_ref(pod("p1")), FilterOutcome(["a1"], ours=True))  # p1 chose a1 too late
    assert taken.passed == [] and "are taken" in taken.error


def test_serial_filters_fill_every_slot_once_then_refuse() -> None:
    b = choosing_book({"a1": 2, "b1": 1, "sick": 1})
    chosen = []
    for i in range(3):
        out = b.filter(pod_ref(pod(f"p{i}")), ALL)
        assert len(out.passed) == 1, out
        chosen.append(out.passed[0])
    assert sorted(chosen) == ["a1", "a1", "b1"]  # 2 + 1 healthy slots, each taken once
    fourth = b.filter(pod_ref(pod("p3")), ALL)
    assert fourth.passed == []
    assert "are taken" in fourth.error  # an Error: retried after backoff, not parked


def test_a_chosen_node_comes_without_the_other_nodes_reasons_which_come_when_none_is_chosen() -> None:
    # a1's one slot is taken by p0; b1 is free: p1 gets b1 and no reasons (kube-scheduler would
    # discard them); once b1 is taken too, p2 gets every reason and the Error that retries it.
    b = choosing_book({"a1": 1, "b1": 1})
    assert b.filter(pod_ref(pod("p0")), ["a1"]).passed == ["a1"]
    second = b.filter(pod_ref(pod("p1")), ALL)
    assert second.passed == ["b1"]
    assert (second.failed, second.unresolvable, second.statuses) == ({}, {}, {})
    third = b.filter(pod_ref(pod("p2")), ALL)
    assert third.passed == []
    assert set(third.failed) == {"a1", "b1"} and all("are taken" in why for why in third.failed.values())
    assert third.unresolvable  # the nodes outside the assignment, each with its reason
    assert "are taken" in third.error


def test_the_same_pod_asking_again_keeps_its_slot() -> None:
    b = choosing_book({"a1": 1, "b1": 1})
    first = b.filter(pod_ref(pod("p0")), ALL).passed
    again = b.filter(pod_ref(pod("p0")), ALL).passed
    assert first == again  # its own reservation does not count against it
    other = b.filter(pod_ref(pod("p1")), ALL).passed
    assert other and other != first


def test_compact_choice_follows_placed_siblings() -> None:
    # One sibling bound on a1 (layer-3 x): the free slot on a2 (same x) beats b1 (y).
    bound = pod("sib", node_name="a1", phase="Running")
    b = choosing_book({"a1": 1, "a2": 1, "b1": 1})
    b.observe_pod(pod_ref(bound))
    scores = b.prioritize(pod_ref(pod("p0")), ["b1", "a2"])  # the free assigned nodes
    assert max(scores, key=lambda hs: hs[1])[0] == "a2"
    assert b.filter(pod_ref(pod("p0")), ["b1", "a2", "a1"]).passed == ["a2"]  # prioritize's choice


def test_slot_freed_when_the_pod_is_deleted_or_the_reservation_expires() -> None:
    now = [0.0]
    b = choosing_book({"a1": 1}, now=now)
    assert b.filter(pod_ref(pod("p0")), ALL).passed == ["a1"]
    assert b.filter(pod_ref(pod("p1")), ALL).passed == []
    b.forget_pod(pod_ref(pod("p0")))
    assert b.filter(pod_ref(pod("p1")), ALL).passed == ["a1"]
    now[0] = 11.0  # p1 never bound: its reservation expires
    assert b.filter(pod_ref(pod("p2")), ALL).passed == ["a1"]


def test_bound_pod_replaces_its_reservation() -> None:
    b = choosing_book({"a1": 1, "b1": 1})
    assert b.filter(pod_ref(pod("p0")), ALL).passed == ["a1"]
    b.observe_pod(pod_ref(pod("p0", node_name="a1", phase="Running")))
    assert b.occupancy(("ns", "wl", "main")) == {"a1": 1}
    assert b.filter(pod_ref(pod("p1")), ALL).passed == ["b1"]


def test_kube_scheduler_binds_by_default_with_filter_only_and_the_extender_binder_is_kept() -> None:
    assert {"prioritizeVerb", "bindVerb"} <= set(extender_entry(binder="extender"))
    entry = extender_entry()
    assert entry["filterVerb"] == "filter"
    assert "prioritizeVerb" not in entry and "bindVerb" not in entry


def test_choosing_passes_exactly_the_nodes_the_verdicts_pass_on_random_books() -> None:
    """The chooser's shortcut (no verdict per node) against the per-node verdicts of a book
    that offers every node: the chosen node is prioritize's first best of the nodes the
    verdicts pass, and the refusal is the same when none passes. Random slots, bound
    siblings, layer-2 and layer-3 domains (some nodes without a layer-3 value), ranks,
    hostnames that differ from node names, unhealthy and unknown nodes."""
    for seed in range(300):
        rnd = random.Random(seed)
        nodes = [
            node(
                f"n{i}",
                rnd.choice(["x", "y", "z", ""]),  # "": a node without a layer-3 value
                ready=rnd.random() > 0.15,
                labels={
                    "topology.k8s.aws/network-node-layer-2": rnd.choice("pq"),
                    **({"kubernetes.io/hostname": f"h{i}"} if rnd.random() < 0.3 else {}),
                },
            )
            for i in range(8)
        ]
        hostnames = [n["metadata"]["labels"]["kubernetes.io/hostname"] for n in nodes]
        assign = {h: rnd.randint(1, 2) for h in rnd.sample(hostnames + ["ghost"], rnd.randint(1, 5))}
        wl = workload(assignments={"main": v1beta2(assign)})
        if rnd.random() < 0.5:
            wl["spec"] = {
                "podSets": [
                    {"name": "main", "count": sum(assign.values()), "topologyRequest": {"podIndexLabel": INDEX}}
                ]
            }
        books = []
        for choose in (False, True):
            b = SlotBook(choose_node=choose, clock=lambda: 0.0)
            for n in nodes:
                b.upsert_node(node_from_k8s(n))
            b.upsert_workload(workload_view(wl))
            books.append(b)
        siblings = [
            pod(f"s{k}", node_name=rnd.choice(nodes)["metadata"]["name"], phase="Running")
            for k in range(rnd.randint(0, 4))
        ]
        for b in books:
            for s in siblings:
                b.observe_pod(pod_ref(s))
        names = [n["metadata"]["name"] for n in nodes] + ["unknown"]
        rnd.shuffle(names)
        candidate = ranked_pod("p", **({INDEX: str(rnd.randint(0, 4))} if rnd.random() < 0.5 else {}))
        offered, chosen = (b.filter(pod_ref(candidate), names) for b in books)
        if offered.passed:
            # prioritize's first best among the passing nodes (the offering book's state is the
            # chooser's before its filter)
            scores = books[0].prioritize(pod_ref(candidate), offered.passed)
            best = max(score for _, score in scores)
            assert chosen.passed == [next(n for n, score in scores if score == best)], seed
        else:
            assert (chosen.passed, chosen.failed, chosen.unresolvable, chosen.error) == (
                offered.passed,
                offered.failed,
                offered.unresolvable,
                offered.error,
            ), seed
