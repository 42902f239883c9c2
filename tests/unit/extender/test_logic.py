"""The extender's pure decisions as data tables: slots, health exclusion, pass-through, the
two node payload modes, compactness scores, and bind accounting under concurrent threads."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scheduler.core.nodes import HOSTNAME_LABEL, node_from_k8s
from scheduler.core.workload import ANN_WORKLOAD, LABEL_PODSET
from scheduler.extender.book import SlotBook
from scheduler.extender.filtering import NodeStatus
from scheduler.extender.occupancy import SlotTaken
from scheduler.extender.workload_view import pod_ref, workload_view

L3 = "topology.k8s.aws/network-node-layer-3"
HEALTH = "sagemaker.amazonaws.com/node-health-status"


def node(name: str, l3: str, *, ready: bool = True, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                HOSTNAME_LABEL: name,
                "topology.k8s.aws/network-node-layer-1": "l1",
                "topology.k8s.aws/network-node-layer-2": "l2",
                L3: l3,
                **(labels or {}),
            },
        },
        "status": {
            "allocatable": {"cpu": "8", "nvidia.com/gpu": "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    wl: str | None = "wl",
    ps: str | None = None,
    sched: str = "toposched",
    node_name: str | None = None,
    phase: str = "Pending",
    ns: str = "ns",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": f"uid-{name}",
        "labels": {},
        "annotations": {},
    }
    if wl:
        meta["annotations"][ANN_WORKLOAD] = wl
    if ps:
        meta["labels"][LABEL_PODSET] = ps
    spec: dict[str, Any] = {"schedulerName": sched, "containers": [{"name": "c"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def v1beta2(hosts: dict[str, int]) -> dict[str, Any]:
    return {
        "levels": [HOSTNAME_LABEL],
        "slices": [
            {
                "domainCount": len(hosts),
                "valuesPerLevel": [{"individual": {"roots": list(hosts)}}],
                "podCounts": {"individual": list(hosts.values())},
            }
        ],
    }


def workload(
    name: str = "wl",
    *,
    assignments: dict[str, dict[str, Any]] | None = None,
    admitted: bool = True,
    ns: str = "ns",
) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": ns}, "status": {}}
    if assignments is not None:
        obj["status"]["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": ps, "count": 1, "topologyAssignment": ta} for ps, ta in assignments.items()
            ],
        }
    obj["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "True"},
        {"type": "Admitted", "status": "True" if admitted else "False"},
    ]
    return obj


NODES = [
    node("a1", "x"),
    node("a2", "x"),
    node("b1", "y"),
    node("b2", "y"),
    node("sick", "y", labels={HEALTH: "UnschedulablePendingReplacement"}),
    node("down", "y", ready=False),
]
ALL = [n["metadata"]["name"] for n in NODES]


def book(
    assign: dict[str, int] | None = None,
    *,
    admitted: bool = True,
    extra_pods: tuple[dict[str, Any], ...] = (),
) -> SlotBook:
    b = SlotBook()
    for n in NODES:
        b.upsert_node(node_from_k8s(n))
    if assign is not None:
        b.upsert_workload(workload_view(workload(assignments={"main": v1beta2(assign)}, admitted=admitted)))
    for p in extra_pods:
        b.observe_pod(pod_ref(p))
    return b


# (case, assignment, pods already bound, expected passed, failed, unresolvable)
FILTER_TABLE = [
    (
        "fresh: only assigned nodes pass",
        {"a1": 2, "b1": 1},
        (),
        ["a1", "b1"],
        [],
        ["a2", "b2", "sick", "down"],
    ),
    (
        "bound sibling takes the slot",
        {"a1": 1, "b1": 1},
        (pod("s1", node_name="a1"),),
        ["b1"],
        ["a1"],
        ["a2", "b2", "sick", "down"],
    ),
    (
        "two slots, one taken",
        {"a1": 2},
        (pod("s1", node_name="a1"),),
        ["a1"],
        [],
        ["a2", "b1", "b2", "sick", "down"],
    ),
    (
        "terminal sibling frees its slot",
        {"a1": 1},
        (pod("s1", node_name="a1", phase="Succeeded"),),
        ["a1"],
        [],
        ["a2", "b1", "b2", "sick", "down"],
    ),
    (
        "other pod set's pods do not count",
        {"a1": 1},
        (pod("s1", node_name="a1", ps="worker"),),
        ["a1"],
        [],
        ["a2", "b1", "b2", "sick", "down"],
    ),
    (
        "other scheduler's pods do not count",
        {"a1": 1},
        (pod("s1", node_name="a1", sched="default-scheduler"),),
        ["a1"],
        [],
        ["a2", "b1", "b2", "sick", "down"],
    ),
    (
        "unhealthy assigned nodes are unresolvable",
        {"a1": 1, "sick": 1, "down": 1},
        (),
        ["a1"],
        [],
        ["a2", "b1", "b2", "sick", "down"],
    ),
]


@pytest.mark.parametrize(
    "case,assign,bound,passed,failed,unresolvable", FILTER_TABLE, ids=[r[0] for r in FILTER_TABLE]
)
def test_filter_table(
    case: str,
    assign: dict[str, int],
    bound: tuple[dict[str, Any], ...],
    passed: list[str],
    failed: list[str],
    unresolvable: list[str],
) -> None:
    b = book(assign, extra_pods=bound)
    out = b.filter(pod_ref(pod("p")), ALL)
    assert out.error == ""
    assert out.passed == passed
    assert sorted(out.failed) == sorted(failed)
    assert sorted(out.unresolvable) == sorted(unresolvable)


def test_unhealthy_reason_comes_from_node_health() -> None:
    out = book({"sick": 1, "down": 1}).filter(pod_ref(pod("p")), ALL)
    assert "UnschedulablePendingReplacement" in out.unresolvable["sick"]
    assert "not Ready" in out.unresolvable["down"]
    assert "not in the topology assignment of workload ns/wl pod set main" in out.unresolvable["a2"]


def test_full_node_reason_names_the_slots() -> None:
    out = book({"a1": 1}, extra_pods=(pod("s1", node_name="a1"),)).filter(pod_ref(pod("p")), ["a1"])
    assert out.failed["a1"] == "all 1 slot(s) of workload ns/wl pod set main on a1 are taken"


@pytest.mark.parametrize(
    "p",
    [pod("p", wl=None), pod("p", sched="default-scheduler"), pod("p", wl=None, sched="other")],
    ids=["no-annotation", "default-scheduler", "other"],
)
def test_pass_through(p: dict[str, Any]) -> None:
    b = book({"a1": 1})
    out = b.filter(pod_ref(p), ALL)
    assert (out.passed, out.failed, out.unresolvable, out.error, out.ours) == (ALL, {}, {}, "", False)
    assert b.prioritize(pod_ref(p), ALL) == []
    assert b.reserve("uid-p", "sick") is None  # bound without accounting


@pytest.mark.parametrize(
    "admitted,assign,needle",
    [
        (True, None, "has no status.admission"),
        (False, {"a1": 1}, "is not Admitted"),
    ],
)
def test_not_admitted_is_an_error_to_retry(
    admitted: bool, assign: dict[str, int] | None, needle: str
) -> None:
    b = book(assign, admitted=admitted) if assign else book(None)
    if assign is None:
        b.upsert_workload(workload_view(workload(assignments=None)))
    out = b.filter(pod_ref(pod("p")), ALL)
    assert out.passed == [] and needle in out.error and "retrying" in out.error


def test_unknown_workload_and_missing_pod_set() -> None:
    b = book(None)
    assert "not known to the toposched extender yet" in b.filter(pod_ref(pod("p")), ALL).error
    b = book({"a1": 1})
    assert "no topologyAssignment for pod set 'worker'" in b.filter(pod_ref(pod("p", ps="worker")), ALL).error


def test_payload_nodes_mode_uses_the_sent_objects() -> None:
    b = SlotBook()  # empty cache: nodeCacheCapable=false must not need it
    b.upsert_workload(workload_view(workload(assignments={"main": v1beta2({"a1": 1, "sick": 1})})))
    payload = {n["metadata"]["name"]: node_from_k8s(n) for n in NODES}
    out = b.filter(pod_ref(pod("p")), list(payload), payload)
    assert out.passed == ["a1"] and "sick" in out.unresolvable
    # nodeCacheCapable=true with a node the cache has not seen: failed, not unresolvable.
    out = b.filter(pod_ref(pod("p")), ["a1"])
    assert out.failed == {"a1": "node not yet in the toposched extender's cache"}


def test_v1beta1_and_non_hostname_levels() -> None:
    b = book(None)
    ta = {"levels": [L3], "domains": [{"values": ["y"], "count": 2}]}
    b.upsert_workload(workload_view(workload(assignments={"main": ta})))
    out = b.filter(pod_ref(pod("p")), ALL)
    assert out.passed == ["b1", "b2"]
    b.observe_pod(pod_ref(pod("s1", node_name="b1")))
    b.observe_pod(pod_ref(pod("s2", node_name="b2")))
    out = b.filter(pod_ref(pod("p")), ALL)
    assert out.passed == [] and "on y are taken" in out.failed["b1"]


def test_prioritize_prefers_siblings_domain_then_free_slots() -> None:
    assign = {"a1": 1, "a2": 1, "b1": 2, "b2": 2}
    b = book(assign)
    fresh = dict(b.prioritize(pod_ref(pod("p")), ["a1", "a2", "b1", "b2"]))
    # No sibling yet: domain y has 4 free slots, x has 2 -> y nodes score higher.
    assert fresh["b1"] == fresh["b2"] > fresh["a1"] == fresh["a2"]
    b.observe_pod(pod_ref(pod("s1", node_name="a1")))
    scores = dict(b.prioritize(pod_ref(pod("p")), ["a2", "b1", "b2"]))
    assert scores["a2"] > scores["b1"] == scores["b2"]  # same layer-3 domain as the sibling
    assert all(0 <= s <= 10 for s in scores.values())


def test_free_slots_count_where_hostnames_differ_from_node_names() -> None:
    # Kueue's perf runner names a node node-b0-r0-n0 and labels it kubernetes.io/hostname=node-0;
    # the assignment names hostnames, and the free slots of each are found through its node.
    b = SlotBook()
    for name, l3 in (("a1", "x"), ("a2", "x"), ("b1", "y"), ("b2", "y")):
        b.upsert_node(node_from_k8s(node(name, l3, labels={HOSTNAME_LABEL: f"host-{name}"})))
    b.upsert_workload(
        workload_view(workload(assignments={"main": v1beta2({"host-a1": 1, "host-a2": 1, "host-b1": 2, "host-b2": 2})}))
    )
    fresh = dict(b.prioritize(pod_ref(pod("p")), ["a1", "a2", "b1", "b2"]))
    assert fresh["b1"] == fresh["b2"] > fresh["a1"] == fresh["a2"]  # y: 4 free slots, x: 2
    b.upsert_node(node_from_k8s(node("b2", "y", labels={HOSTNAME_LABEL: "host-b2-renamed"})))
    assert "host-b2" not in b.host_nodes and b.host_nodes["host-b2-renamed"] == "b2"
    b.delete_node("b2")
    assert "host-b2-renamed" not in b.host_nodes


def test_reserve_release_confirm_and_informer_reconcile() -> None:
    b = book({"a1": 1})
    p = pod_ref(pod("p"))
    b.remember(p)
    res = b.reserve(p.uid, "a1")
    assert res is not None
    b.remember(pod_ref(pod("q")))
    with pytest.raises(SlotTaken, match="a sibling was bound there first"):
        b.reserve("uid-q", "a1")
    assert b.filter(pod_ref(pod("q")), ["a1"]).passed == []  # filter sees the in-flight slot
    b.release(res)
    assert b.filter(pod_ref(pod("q")), ["a1"]).passed == ["a1"]
    res = b.reserve(p.uid, "a1")
    assert res is not None
    b.confirm(res)
    b.observe_pod(pod_ref(pod("p", node_name="a1")))  # informer catches up
    assert b.reservations == {} and b.occupancy(("ns", "wl", "main")) == {"a1": 1}
    b.release(res)  # late release after confirm changes nothing
    assert b.occupancy(("ns", "wl", "main")) == {"a1": 1}
    b.forget_pod(pod_ref(pod("p", node_name="a1")))
    assert b.occupancy(("ns", "wl", "main")) == {}


def test_reserve_refuses_nodes_outside_assignment_and_unhealthy() -> None:
    b = book({"a1": 1, "sick": 1})
    b.remember(pod_ref(pod("p")))
    with pytest.raises(SlotTaken, match="not in the topology assignment"):
        b.reserve("uid-p", "b1")
    with pytest.raises(SlotTaken, match="unhealthy"):
        b.reserve("uid-p", "sick")


def test_confirmed_reservation_expires_when_informer_never_shows_it() -> None:
    now = [0.0]
    b = SlotBook(clock=lambda: now[0], reservation_ttl_s=10)
    for n in NODES:
        b.upsert_node(node_from_k8s(n))
    b.upsert_workload(workload_view(workload(assignments={"main": v1beta2({"a1": 1})})))
    b.remember(pod_ref(pod("p")))
    res = b.reserve("uid-p", "a1")
    assert res is not None
    b.confirm(res)
    now[0] = 11
    assert b.filter(pod_ref(pod("q")), ["a1"]).passed == ["a1"]


def test_concurrent_reserve_never_overbooks() -> None:
    slots = {"a1": 3, "a2": 2, "b1": 1}
    b = book(slots)
    n_pods = 40
    for i in range(n_pods):
        b.remember(pod_ref(pod(f"p{i}")))
    won: list[tuple[str, str]] = []
    lock = threading.Lock()
    start = threading.Barrier(n_pods)

    def worker(i: int) -> None:
        start.wait()
        for node_name in ("a1", "a2", "b1"):
            try:
                res = b.reserve(f"uid-p{i}", node_name)
            except SlotTaken:
                continue
            assert res is not None
            if i % 5 == 0:  # some binds fail and give the slot back
                b.release(res)
                continue
            b.confirm(res)
            with lock:
                won.append((f"p{i}", node_name))
            return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_pods)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    per_node: dict[str, int] = {}
    for _, node_name in won:
        per_node[node_name] = per_node.get(node_name, 0) + 1
    assert per_node == slots  # every slot taken exactly once, none twice
    assert b.occupancy(("ns", "wl", "main")) == slots


def test_large_candidate_lists_omit_unassigned_nodes() -> None:
    b = book({"a1": 1, "sick": 1})
    b.unassigned_detail_max = 3
    out = b.filter(pod_ref(pod("p")), ALL)
    # Absent from the statuses = UnschedulableAndUnresolvable for kube-scheduler; in-assignment
    # failures keep their reasons.
    assert out.passed == ["a1"] and list(out.unresolvable) == ["sick"] and out.failed == {}


def test_large_candidate_lists_decide_exactly_as_small_ones_for_assigned_and_unknown_nodes() -> None:
    """The large-list path skips unassigned cached nodes before any verdict; everything else —
    an assigned node whose hostname label differs from its name, a full slot, an unhealthy
    assigned node, a name the informer has not seen — is decided as in a small list, in
    kube-scheduler's order."""
    renamed = node("n-7", "x")
    renamed["metadata"]["labels"][HOSTNAME_LABEL] = "host-7"
    taken = pod("t", node_name="a2")
    b = book({"host-7": 1, "a2": 1, "sick": 1, "b2": 1}, extra_pods=(taken,))
    b.upsert_node(node_from_k8s(renamed))
    names = ["ghost", *ALL, "n-7"]
    small = b.filter(pod_ref(pod("p")), names)
    b.unassigned_detail_max = 3
    large = b.filter(pod_ref(pod("p")), names)
    assert large.passed == small.passed == ["b2", "n-7"]
    assert large.failed == small.failed and set(large.failed) == {"a2", "ghost"}  # slot taken; not cached yet
    assert set(large.unresolvable) == {"sick"}
    assert {n: small.unresolvable[n] for n in large.unresolvable} == large.unresolvable


# ---- rank-based ordering (Kueue's topology ungater: ranks fill the assigned domains in order)

INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"


def ranked_book(assign: dict[str, int], request: dict[str, Any]) -> SlotBook:
    b = SlotBook()
    for n in NODES:
        b.upsert_node(node_from_k8s(n))
    wl = workload(assignments={"main": v1beta2(assign)})
    wl["spec"] = {"podSets": [{"name": "main", "count": sum(assign.values()), "topologyRequest": request}]}
    b.upsert_workload(workload_view(wl))
    return b


def ranked_pod(name: str, **labels: str) -> dict[str, Any]:
    p = pod(name)
    p["metadata"]["labels"].update(labels)
    return p


def test_each_rank_goes_to_its_domain_in_assignment_order() -> None:
    # Assignment order a1 (2 pods), b1 (1), a2 (1): ranks 0-1 -> a1, 2 -> b1, 3 -> a2.
    b = ranked_book({"a1": 2, "b1": 1, "a2": 1}, {"podIndexLabel": INDEX})
    for rank, host in ((3, "a2"), (0, "a1"), (2, "b1"), (1, "a1")):
        out = b.filter(pod_ref(ranked_pod(f"r{rank}", **{INDEX: str(rank)})), ALL)
        assert out.passed == [host], (rank, out)
        assert set(out.failed) >= {"a1", "b1", "a2"} - {host}  # a full node says so, a free one names the rank
        if rank == 3:
            assert out.failed["a1"] == ("rank 3 of workload ns/wl pod set main goes to a2 "
                                        "(ranks fill the assigned domains in order)")
        b.observe_pod(pod_ref({**ranked_pod(f"r{rank}", **{INDEX: str(rank)}),
                               "spec": {"schedulerName": "toposched", "nodeName": host}}))


def test_sub_groups_rank_by_job_index_then_pod_index() -> None:
    # JobSet: 2 child jobs x 2 pods; job 1's pod 0 is rank 2 -> second domain in order.
    b = ranked_book({"b1": 2, "a1": 2}, {"podIndexLabel": INDEX, "subGroupIndexLabel": JOB_INDEX,
                                          "subGroupCount": 2})
    assert b.filter(pod_ref(ranked_pod("j1p0", **{INDEX: "0", JOB_INDEX: "1"})), ALL).passed == ["a1"]
    assert b.filter(pod_ref(ranked_pod("j0p1", **{INDEX: "1", JOB_INDEX: "0"})), ALL).passed == ["b1"]


def test_unusable_rank_or_a_full_rank_domain_falls_back_to_any_free_slot() -> None:
    b = ranked_book({"a1": 1, "b1": 1}, {"podIndexLabel": INDEX})
    assert sorted(b.filter(pod_ref(ranked_pod("no-rank")), ALL).passed) == ["a1", "b1"]
    assert sorted(b.filter(pod_ref(ranked_pod("too-big", **{INDEX: "7"})), ALL).passed) == ["a1", "b1"]
    # a pod outside the rank order took a1 (as after a node replacement): rank 0 takes what is free
    b.observe_pod(pod_ref(pod("stray", node_name="a1")))
    assert b.filter(pod_ref(ranked_pod("r0", **{INDEX: "0"})), ALL).passed == ["b1"]


def test_without_a_pod_index_label_in_the_request_any_assigned_slot_passes() -> None:
    b = ranked_book({"a1": 1, "b1": 1}, {"required": L3})
    assert sorted(b.filter(pod_ref(ranked_pod("r0", **{INDEX: "1"})), ALL).passed) == ["a1", "b1"]


def test_only_full_slots_answer_error_so_the_pod_is_retried_after_backoff() -> None:
    # a1's one slot is taken: kube-scheduler may retry before we see a deletion that frees it,
    # so the answer is an Error (backoff retry), naming the full node and the unhealthy one
    b = book({"a1": 1, "sick": 1}, extra_pods=(pod("s1", node_name="a1"),))
    out = b.filter(pod_ref(pod("p")), ALL)
    assert out.passed == [] and "a1" in out.failed
    assert out.error.startswith("all slots of workload ns/wl pod set main on its healthy assigned nodes are taken (a1)")
    assert "sick (unhealthy: " in out.error and out.error.endswith("; retrying")
    # nothing assigned is merely full (only unhealthy / unassigned): no Error, plain failure
    assert book({"sick": 1}).filter(pod_ref(pod("p")), ALL).error == ""


def test_compactness_uses_the_levels_of_the_flavors_topology() -> None:
    """Racks of a non-HyperPod Topology: the sibling's rack wins once the flavor's Topology is
    known; before that (HyperPod levels, which these nodes share) the two candidates tie."""
    rack = "example.com/rack"
    b = SlotBook()
    for name, value in (("a1", "r1"), ("a2", "r1"), ("b1", "r2")):
        b.upsert_node(node_from_k8s(node(name, "x", labels={rack: value})))
    wl = workload(assignments={"main": v1beta2({"a1": 1, "a2": 1, "b1": 1})})
    wl["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"nvidia.com/gpu": "racks"}
    b.upsert_workload(workload_view(wl))
    b.observe_pod(pod_ref(pod("s1", node_name="a1")))
    before = dict(b.prioritize(pod_ref(pod("p")), ["a2", "b1"]))
    assert before["a2"] == before["b1"]
    b.upsert_flavor("racks", "rack-topology")
    b.upsert_topology("rack-topology", [rack, HOSTNAME_LABEL])
    after = dict(b.prioritize(pod_ref(pod("p")), ["a2", "b1"]))
    assert after["a2"] > after["b1"]
    b.delete_topology("rack-topology")
    assert dict(b.prioritize(pod_ref(pod("p")), ["a2", "b1"])) == before


def test_filter_statuses_carry_the_reason_codes() -> None:
    b = book({"b1": 1}, extra_pods=(pod("s1", node_name="b1"),))
    out = b.filter(pod_ref(pod("p")), ALL)
    assert out.statuses["b1"] is NodeStatus.SLOTS_TAKEN
    assert out.statuses["sick"] is NodeStatus.NOT_ASSIGNED
    assert out.error.endswith("; retrying")


@pytest.mark.parametrize("seed", range(40))
def test_occupied_counts_match_the_pods_they_count(seed: int) -> None:
    """The per-node counts the book keeps for its bound pods, merged with the reservations,
    equal a recount of the pods themselves (bound pod uid -> node, then each reservation of the
    group overriding its pod's node, the excluded pod left out), after every kind of change."""
    import random

    rng = random.Random(seed)
    b = SlotBook(choose_node=rng.random() < 0.5)
    for n in NODES:
        b.upsert_node(node_from_k8s(n))
    for wl in ("wl", "wl2"):
        b.upsert_workload(workload_view(workload(wl, assignments={"main": v1beta2({"a1": 3, "a2": 2, "b1": 2})})))
    pods = [pod(f"p{i}", wl=rng.choice(["wl", "wl2"])) for i in range(12)]
    groups = [("ns", "wl", "main"), ("ns", "wl2", "main")]

    def recount(group: tuple[str, str, str], exclude: str) -> dict[str, int]:
        merged = dict(b.bound.get(group) or {})
        merged.update({uid: r.node for uid, r in b.reservations.items() if r.group == group})
        merged.pop(exclude, None)
        counts: dict[str, int] = {}
        for node_name in merged.values():
            counts[node_name] = counts.get(node_name, 0) + 1
        return counts

    for _ in range(150):
        p = rng.choice(pods)
        ref = pod_ref(p)
        op = rng.choice(["bind", "bind", "unbind", "finish", "delete", "reserve", "release", "filter"])
        if op in ("bind", "unbind", "finish"):
            seen = pod(p["metadata"]["name"], wl=ref.workload, phase="Succeeded" if op == "finish" else "Running",
                       node_name=rng.choice(["a1", "a2", "b1", "b2"]) if op != "unbind" else None)
            b.observe_pod(pod_ref(seen))
        elif op == "delete":
            b.forget_pod(ref)
        elif op in ("reserve", "release"):
            b.remember(ref)
            try:
                res = b.reserve(ref.uid, rng.choice(["a1", "a2", "b1"]))
            except SlotTaken:
                continue
            assert res is not None
            (b.release if op == "release" else b.confirm)(res)
        else:
            b.filter(ref, ["a1", "a2", "b1", "b2"])
        for group in groups:
            bound_per_node: dict[str, int] = {}
            for node_name in (b.bound.get(group) or {}).values():
                bound_per_node[node_name] = bound_per_node.get(node_name, 0) + 1
            assert b.bound_nodes.get(group, {}) == bound_per_node
            assert b.occupancy(group) == recount(group, "")
            for other in rng.sample(pods, 3):
                assert b._occupied(group, pod_ref(other).uid) == recount(group, pod_ref(other).uid)
