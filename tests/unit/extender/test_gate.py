"""The admission gate (issue 13 item 3): a pod routed to toposched that belongs to a queued job but
carries no workload annotation (its job was unsuspended by hand) is refused with the reason and
the fix; genuinely unmanaged pods still pass through; unreadable owners fail closed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scheduler.core.nodes import node_from_k8s
from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.extender.book import SlotBook
from scheduler.extender.gate import CachedOwners, OwnerRef, Refusal, controller_owner, judge
from scheduler.extender.server import Extender
from scheduler.extender.workload_view import workload_view
from tests.unit.extender.test_logic import ALL, NODES, pod, v1beta2, workload

JOB_REF = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": True}
JOBSET_REF = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "js-uid",
              "controller": True}


def owned(name: str, ref: Mapping[str, Any] | None = JOB_REF, *, queue_label: str | None = None,
          wl: str | None = None, sched: str = "toposched") -> dict[str, Any]:
    """A pod without the workload annotation (unless ``wl``), owned by ``ref``."""
    out = pod(name, wl=wl, sched=sched)
    if ref is not None:
        out["metadata"]["ownerReferences"] = [dict(ref)]
    if queue_label:
        out["metadata"]["labels"][LABEL_QUEUE_NAME] = queue_label
    return out


def obj(kind: str, name: str, uid: str, queue: str | None, owner: Mapping[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid,
                            "labels": {LABEL_QUEUE_NAME: queue} if queue else {}}
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    return {"kind": kind, "metadata": meta}


class Owners:
    """A fake API: (kind, name) -> object; counts GETs; ``fail`` raises like an unreachable API."""

    def __init__(self, *objects: dict[str, Any], fail: bool = False) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.fail = fail
        self.gets = 0

    def __call__(self, namespace: str, ref: OwnerRef) -> Mapping[str, Any] | None:
        self.gets += 1
        if self.fail:
            raise ConnectionError("connection refused")
        return self.objects.get((ref.kind, ref.name))


def extender(owners: Owners | None) -> Extender:
    book = SlotBook()
    for n in NODES:
        book.upsert_node(node_from_k8s(n))
    book.upsert_workload(workload_view(workload(assignments={"main": v1beta2({"a1": 2})})))
    ext = Extender(book, owner_lookup=owners)
    ext.ready.set()
    return ext


def filter_names(ext: Extender, p: dict[str, Any]) -> dict[str, Any]:
    return ext.filter({"Pod": p, "NodeNames": ALL})


def test_a_pod_of_a_queued_job_without_a_workload_is_refused_with_the_reason_and_the_fix() -> None:
    ext = extender(Owners(obj("Job", "train", "job-uid", "lq")))
    out = filter_names(ext, owned("train-0"))
    assert out["NodeNames"] == [] and out["FailedNodes"] == {} and out["FailedAndUnresolvableNodes"] == {}
    message = out["Error"]
    assert message.startswith("toposched: pod ns/train-0 belongs to Job ns/train (queue \"lq\") but has no "
                              "admitted Workload")
    assert "kueue.x-k8s.io/workload annotation" in message and "spec.suspend set to false by hand" in message
    assert f"remove the {LABEL_QUEUE_NAME} label from the Job and recreate its pods" in message


def test_a_pod_with_the_queue_label_itself_is_refused() -> None:
    verdict = judge(owned("p", None, queue_label="lq"), None)
    assert verdict is not None and verdict.reason is Refusal.QUEUE_LABEL and "queue \"lq\"" in verdict.message


def test_a_jobset_child_pod_is_judged_by_its_jobset() -> None:
    child = obj("Job", "train", "job-uid", None, owner=JOBSET_REF)
    queued = Owners(child, obj("JobSet", "js", "js-uid", "lq"))
    verdict = judge(owned("p"), queued)
    assert verdict is not None and verdict.reason is Refusal.QUEUED_OWNER and "JobSet ns/js" in verdict.message
    assert judge(owned("p"), Owners(child, obj("JobSet", "js", "js-uid", None))) is None


@pytest.mark.parametrize("name, p, owners", [
    ("bare pod", owned("p", None), Owners()),
    ("owner not queued", owned("p"), Owners(obj("Job", "train", "job-uid", None))),
    ("owner of another kind", owned("p", {**JOB_REF, "apiVersion": "apps/v1", "kind": "ReplicaSet"}), Owners()),
    ("not the controller owner", owned("p", {**JOB_REF, "controller": False}), Owners()),
    ("another profile", owned("p", sched="default-scheduler"), Owners(obj("Job", "train", "job-uid", "lq"))),
])
def test_unmanaged_pods_pass_through_as_before(name: str, p: dict[str, Any], owners: Owners) -> None:
    out = filter_names(extender(owners), p)
    assert out["NodeNames"] == ALL and out["Error"] == "", name


def test_an_unreadable_owner_fails_closed_and_retries() -> None:
    out = filter_names(extender(Owners(fail=True)), owned("p"))
    assert out["NodeNames"] == [] and "cannot read Job ns/train" in out["Error"] and "retrying" in out["Error"]
    assert "get on jobs.batch" in out["Error"]


def test_a_missing_owner_fails_closed() -> None:
    verdict = judge(owned("p"), Owners())
    assert verdict is not None and verdict.reason is Refusal.OWNER_NOT_FOUND


def test_without_an_owner_lookup_an_owned_pod_is_refused() -> None:
    verdict = judge(owned("p"), None)
    assert verdict is not None and verdict.reason is Refusal.OWNER_UNREADABLE


def test_pods_with_an_admitted_workload_are_the_slot_books() -> None:
    """The gate never sees them: the workload annotation hands them to the slot book."""
    owners = Owners(obj("Job", "train", "job-uid", "lq"))
    out = filter_names(extender(owners), owned("p", wl="wl"))
    assert out["NodeNames"] == ["a1"] and owners.gets == 0


def test_the_workload_annotation_to_a_missing_workload_is_refused() -> None:
    out = filter_names(extender(Owners()), owned("p", wl="nope"))
    assert out["NodeNames"] == [] and "not known to the toposched extender yet" in out["Error"]


def test_bind_of_a_refused_pod_unknown_to_the_book_is_refused() -> None:
    """A bind the book has no filter record of (restart between filter and bind) is judged too."""
    owners = Owners(obj("Job", "train", "job-uid", "lq"))
    book = SlotBook()
    calls: list[str] = []
    the_pod = owned("train-0")
    ext = Extender(book, binder=lambda ns, name, uid, node: calls.append(node),
                   pod_lookup=lambda ns, name: the_pod, owner_lookup=owners)
    out = ext.bind({"PodName": "train-0", "PodNamespace": "ns", "PodUID": "uid-train-0", "Node": "a1"})
    assert "has no admitted Workload" in out["Error"] and calls == []


def test_owner_answers_are_cached_and_checked_against_the_uid() -> None:
    now = [0.0]
    fake = Owners(obj("Job", "train", "other-uid", "lq"))
    cached = CachedOwners(fake, ttl_s=5, clock=lambda: now[0])
    ref = controller_owner(owned("p"))
    assert ref is not None
    assert cached("ns", ref) is None  # same name, different uid: the pod's owner is gone
    assert cached("ns", ref) is None and fake.gets == 1
    now[0] = 6
    cached("ns", ref)
    assert fake.gets == 2


def test_expired_owner_answers_are_forgotten_not_kept_until_the_cap() -> None:
    now = [0.0]
    fake = Owners(obj("Job", "train", "uid-train", "lq"))
    cached = CachedOwners(fake, ttl_s=5, clock=lambda: now[0])
    pods = [owned(f"p{i}", {**JOB_REF, "name": f"job-{i}", "uid": f"uid-{i}"}) for i in range(3)]
    refs = [ref for pod in pods if (ref := controller_owner(pod)) is not None]
    assert len(refs) == 3
    for i, ref in enumerate(refs):  # answered at 0, 1, 2
        now[0] = float(i)
        cached("ns", ref)
    assert len(cached) == 3
    now[0] = 6.5  # the first two are older than 5 s
    cached("ns", refs[2])
    assert len(cached) == 1
    now[0] = 20
    cached("ns", refs[0])
    assert len(cached) == 1 and fake.gets == 4


def test_failed_owner_reads_are_not_cached() -> None:
    fake = Owners(fail=True)
    cached = CachedOwners(fake)
    ref = controller_owner(owned("p"))
    assert ref is not None
    for _ in range(2):
        with pytest.raises(ConnectionError):
            cached("ns", ref)
    assert fake.gets == 2
