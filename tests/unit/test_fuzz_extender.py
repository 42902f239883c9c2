"""Fuzzing the extender's request decoding and decisions (bounded, in the suite; issue 13 item 6):
whatever the body, every verb answers in its own shape without an internal error, and a pod
of a queued job without an admitted Workload is never passed by filter nor bound (fail closed),
while a well-formed unmanaged pod still passes through."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.core.nodes import node_from_k8s
from scheduler.core.workload import ANN_WORKLOAD, LABEL_QUEUE_NAME
from scheduler.extender.book import SlotBook
from scheduler.extender.gate import OwnerRef
from scheduler.extender.server import Extender, answer
from scheduler.extender.workload_view import workload_view
from tests.unit.extender.test_logic import ALL, NODES, v1beta2, workload

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=8))
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                       max_leaves=10)

# Workloads: admitted (with an assignment), pending, and none at all.
WORKLOADS = {"admitted": True, "pending": False, "ghost": None}
# Owners: (kind, name) -> (queued, owner of its own).
JOBSET_REF = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js-queued", "uid": "u-js-queued",
              "controller": True}
OWNERS: dict[tuple[str, str], dict[str, Any]] = {
    ("Job", "queued"): {"labels": {LABEL_QUEUE_NAME: "lq"}},
    ("Job", "plain"): {"labels": {}},
    ("Job", "child"): {"labels": {}, "ownerReferences": [JOBSET_REF]},
    ("JobSet", "js-queued"): {"labels": {LABEL_QUEUE_NAME: "lq"}},
    ("PyTorchJob", "pt-queued"): {"labels": {LABEL_QUEUE_NAME: "lq"}},
}
QUEUED_OWNERS = {"queued", "child", "pt-queued", "gone"}  # "gone" does not exist: refused, fail closed
API_VERSIONS = {"Job": "batch/v1", "JobSet": "jobset.x-k8s.io/v1alpha2", "PyTorchJob": "kubeflow.org/v1",
                "ReplicaSet": "apps/v1"}


def owner_lookup(namespace: str, ref: OwnerRef) -> Mapping[str, Any] | None:
    found = OWNERS.get((ref.kind, ref.name))
    if found is None:
        return None
    return {"metadata": {"name": ref.name, "namespace": namespace, "uid": f"u-{ref.name}", **found}}


@dataclass(frozen=True)
class PodCase:
    """A generated pod and what it is by construction (the oracle, independent of the gate)."""

    pod: Any
    managed: bool  # routed to toposched and belongs to a queue
    admitted: bool  # names an admitted Workload
    clean: bool  # no garbage injected


@st.composite
def pods(draw: st.DrawFn) -> PodCase:
    sched = draw(st.sampled_from(["toposched", "default-scheduler", None]))
    workload_name = draw(st.one_of(st.none(), st.sampled_from(sorted(WORKLOADS))))
    queue_label = draw(st.booleans())
    owner_kind, owner_name = draw(st.one_of(
        st.none(), st.sampled_from([("Job", "queued"), ("Job", "plain"), ("Job", "child"), ("Job", "gone"),
                                    ("PyTorchJob", "pt-queued"), ("ReplicaSet", "queued")])).map(
        lambda owner: owner or (None, None)))
    controller = draw(st.sampled_from([True, False, None]))
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "uid-p", "labels": {}, "annotations": {}}
    if workload_name:
        meta["annotations"][ANN_WORKLOAD] = workload_name
    if queue_label:
        meta["labels"][LABEL_QUEUE_NAME] = "lq"
    if owner_kind:
        meta["ownerReferences"] = [{"apiVersion": API_VERSIONS[owner_kind], "kind": owner_kind, "name": owner_name,
                                    "uid": f"u-{owner_name}", "controller": controller}]
    pod: dict[str, Any] = {"metadata": meta, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}}
    if sched:
        pod["spec"]["schedulerName"] = sched
    owned_by_queue = (owner_kind in ("Job", "PyTorchJob") and controller is True and owner_name in QUEUED_OWNERS)
    # Garbage in one place of the pod, sometimes; the oracle keeps only the marks it leaves.
    spot = draw(st.sampled_from([None, None, "metadata", "labels", "annotations", "ownerReferences", "spec",
                                 "schedulerName", "uid", "root"]))
    if spot is not None:
        junk = draw(JSONISH)
        if spot == "root":
            pod = junk
        elif spot in ("metadata", "spec"):
            pod[spot] = junk
        elif spot == "schedulerName":
            pod["spec"]["schedulerName"] = junk
        else:
            meta[spot] = junk

    def kept(*places: str) -> bool:
        return spot not in (*places, "root")

    workload_mark = bool(workload_name) and kept("metadata", "annotations")
    marks = workload_mark or (queue_label and kept("metadata", "labels")) or (
        owned_by_queue and kept("metadata", "ownerReferences"))
    managed = sched == "toposched" and kept("spec", "schedulerName") and bool(marks)
    admitted = workload_mark and bool(WORKLOADS[str(workload_name)])
    return PodCase(pod, managed, admitted, spot is None)


def nodes_part(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """(the node part of ExtenderArgs, whether it is well-formed)."""
    mode = draw(st.sampled_from(["names", "names", "nodes", "junk"]))
    if mode == "names":
        return {"NodeNames": list(ALL), "Nodes": None}, True
    if mode == "nodes":
        return {"Nodes": {"items": NODES}, "NodeNames": None}, True
    return {"NodeNames": draw(JSONISH), "Nodes": draw(JSONISH)}, False


def extender() -> Extender:
    book = SlotBook()
    for n in NODES:
        book.upsert_node(node_from_k8s(n))
    for name, admitted in WORKLOADS.items():
        if admitted is not None:
            book.upsert_workload(workload_view(workload(name, assignments={"main": v1beta2({"a1": 2})},
                                                        admitted=admitted)))
    ext = Extender(book, binder=lambda *_: None, owner_lookup=owner_lookup)
    ext.ready.set()
    return ext


def passed(out: Mapping[str, Any]) -> list[Any]:
    if out.get("NodeNames"):
        return list(out["NodeNames"])
    return list((out.get("Nodes") or {}).get("items") or [])


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pods(), data=st.data(), key_case=st.sampled_from([str, str.lower, str.upper]))
@example(case=PodCase({"metadata": {"name": "p", "namespace": "ns", "uid": "u", "ownerReferences": [
    {"apiVersion": "batch/v1", "kind": "Job", "name": "queued", "uid": "u-queued", "controller": True}]},
    "spec": {"schedulerName": "toposched"}}, True, False, True), data=None, key_case=str)
def test_filter_answers_every_body_and_fails_closed(case: PodCase, data: Any, key_case: Any) -> None:
    node_args, nodes_ok = nodes_part(data.draw) if data is not None else ({"NodeNames": list(ALL)}, True)
    body = {key_case("Pod"): case.pod, **{key_case(k): v for k, v in node_args.items()}}
    ext = extender()
    out = json.loads(answer(ext, "filter", json.dumps(body).encode()))
    assert set(out) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}, out
    assert "internal error" not in out["Error"], out
    if case.managed and not case.admitted:
        assert passed(out) == [] and out["Error"], (body, out)
    if case.clean and nodes_ok and not case.managed:
        assert out["Error"] == "" and len(passed(out)) == len(ALL), (body, out)  # pass-through, as before
    prioritized = json.loads(answer(ext, "prioritize", json.dumps(body).encode()))
    assert isinstance(prioritized, list)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=pods(), fields=st.dictionaries(st.sampled_from(["PodName", "PodNamespace", "PodUID", "Node", "x"]),
                                           JSONISH, max_size=4))
def test_bind_answers_every_body_and_never_binds_an_unadmitted_managed_pod(case: PodCase,
                                                                          fields: dict[str, Any]) -> None:
    ext = extender()
    ext.pod_lookup = lambda ns, name: case.pod if isinstance(case.pod, dict) else None
    bound: list[str] = []
    ext.binder = lambda ns, name, uid, node: bound.append(node)
    out = json.loads(answer(ext, "bind", json.dumps(fields).encode()))
    assert set(out) == {"Error"} and "internal error" not in out["Error"], out
    request = {"PodName": "p", "PodNamespace": "ns", "PodUID": "uid-p", "Node": "a1"}
    out = json.loads(answer(ext, "bind", json.dumps(request).encode()))
    assert "internal error" not in out["Error"], out
    if case.managed and not case.admitted and case.clean:
        assert out["Error"] and bound == [], (case, out)


@settings(max_examples=200, deadline=None)
@given(raw=st.one_of(st.binary(max_size=64), JSONISH.map(lambda v: json.dumps(v).encode()),
                     st.integers(1, 3000).map(lambda d: b"[" * d + b"]" * d),
                     st.integers(1, 3000).map(lambda d: b'{"Pod":' * d + b"{}" + b"}" * d)),
       verb=st.sampled_from(["filter", "prioritize", "bind"]))
def test_any_bytes_get_an_answer_in_the_verbs_shape(raw: bytes, verb: str) -> None:
    out = json.loads(answer(extender(), verb, raw))
    if verb == "prioritize":
        assert isinstance(out, list)
    else:
        assert isinstance(out, dict) and isinstance(out["Error"], str) and "internal error" not in out["Error"]
        assert not passed(out)
