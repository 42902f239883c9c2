"""Fuzzing the webhook's review handler (bounded, in the suite): whatever the body, the answer
is a well-formed AdmissionReview, nothing inside fails (no "internal error", no "could not
validate"), and a managed object is never let through unvalidated (fail closed)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from admission import review
from admission.annotations import NO_OVERRIDES
from admission.governance import QUEUED_PATH
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.leaderworkerset import LEADERWORKERSET
from scheduler.adapter.kinds.mpijob import MPIJOB
from scheduler.adapter.kinds.pytorchjob import PYTORCHJOB
from scheduler.core.config import FeatureGates
from tests.unit.test_admission_validation import L2, L3, SC, G, R, cluster, job

ANNOTATIONS = [
    "kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology", "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-size", SC, "kueue.x-k8s.io/podset-group-name", "kueue.x-k8s.io/podset-other",
    "kueue.x-k8s.io/podset-topology-spreading",
]
LEVELS = ["topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname",
          "no such level", ""]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=12), st.sampled_from(["²", "٣", "1e3", "-1", "0", "true", "0x10", " 4 "]))
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                       max_leaves=12)


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


SPREADING = st.builds(
    lambda selectors, rules: json.dumps({"workloadLabelSelectors": selectors, "rules": rules}),
    st.one_of(JSONISH, st.lists(st.fixed_dictionaries({"key": SCALARS, "operator": st.one_of(
        st.sampled_from(["In", "NotIn"]), SCALARS), "values": st.one_of(st.lists(SCALARS, max_size=2), SCALARS)}),
        max_size=2)),
    st.one_of(JSONISH, st.lists(st.fixed_dictionaries({"topologyKey": st.one_of(st.sampled_from(LEVELS), SCALARS)},
        optional={"maxShareAllowingPlacement": st.one_of(st.sampled_from(["0.5", "1", "0", "500m", "1e-3"]), SCALARS),
                  "enforcementMode": st.one_of(st.sampled_from(["Required", "Preferred"]), SCALARS)}), max_size=3)))
ANNOTATION_VALUE = st.one_of(
    st.sampled_from(LEVELS), SCALARS, JSONISH, SPREADING,
    st.integers(1, 400).map(deep),
    st.builds(lambda levels, size: json.dumps([{"topology": lv, "size": size} for lv in levels]),
              st.lists(st.sampled_from(LEVELS), max_size=3), st.one_of(st.integers(-3, 9), st.text(max_size=3))),
)


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    annotations = draw(st.one_of(
        st.dictionaries(st.sampled_from(ANNOTATIONS), ANNOTATION_VALUE, max_size=4), JSONISH))
    labels = draw(st.one_of(
        st.fixed_dictionaries({"kueue.x-k8s.io/queue-name": st.one_of(st.just("lq"), st.just("plain"), SCALARS)},
                              optional={"kueue.x-k8s.io/priority-class": st.one_of(st.just("high"), SCALARS)}),
        JSONISH))
    count = draw(st.one_of(st.integers(-1, 40), SCALARS))
    template: Any = draw(st.one_of(
        st.fixed_dictionaries({"metadata": st.fixed_dictionaries({"annotations": st.just(annotations)}),
                               "spec": st.fixed_dictionaries({"containers": st.just([{
                                   "name": "c", "image": "x", "resources": {"requests": draw(st.one_of(
                                       st.just({"nvidia.com/gpu": "8", "cpu": "1"}),
                                       st.dictionaries(st.sampled_from(["nvidia.com/gpu", "cpu", "memory"]),
                                                       SCALARS, max_size=2), JSONISH))}}])})}),
        JSONISH))
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team-a", "labels": labels},
            "spec": {"parallelism": count, "completions": count, "template": template}}


def reviews(obj: Any, kind: Any, operation: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "fuzz", "kind": kind, "operation": operation, "namespace": "team-a", "object": obj,
        "oldObject": obj if operation == "UPDATE" else None}}


PATHS = [BATCH_JOB.validate_path, BATCH_JOB.mutate_path, JOBSET.validate_path, JOBSET.mutate_path,
         PYTORCHJOB.validate_path, PYTORCHJOB.mutate_path, MPIJOB.validate_path, LEADERWORKERSET.validate_path,
         QUEUED_PATH]
# The gates the webhook's --kueue-config may switch on (TASTopologySpreading turns on its checks).
GATES = st.sampled_from([FeatureGates(), FeatureGates({"TASTopologySpreading": True, "TASBalancedPlacement": True})])
VIEW = cluster()
INTERNAL = ("internal error", "could not validate")


def check(path: str, body: dict[str, Any], gates: FeatureGates = NO_OVERRIDES) -> None:
    code, out = review.answer(path, json.dumps(body).encode(), VIEW, gates=gates)
    assert out["kind"] == "AdmissionReview" and out["response"]["uid"] == "fuzz", out
    resp = out["response"]
    texts = [(resp.get("status") or {}).get("message", "")] + list(resp.get("warnings") or ())
    assert code in (200, 400) and not any(f in t for t in texts for f in INTERNAL), (path, body, out)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), obj=jobs(),
       kind=st.one_of(st.just({"group": "batch", "version": "v1", "kind": "Job"}), SCALARS, JSONISH),
       operation=st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", ""]), gates=GATES)
@example(path=BATCH_JOB.validate_path, obj=job(4, ann={R: L3, G: "²"}), kind={"kind": "Job"}, operation="CREATE",
         gates=FeatureGates())
@example(path=BATCH_JOB.validate_path, obj=job(4, ann={R: L2, SC: '{"a":' * 300 + "1" + "}" * 300}),
         kind={"kind": "Job"},
         operation="CREATE",
         gates=FeatureGates())
@example(path=BATCH_JOB.validate_path, obj=job(4, ann={R: L3, G: 7}), kind={"kind": "Job"}, operation="CREATE",
         gates=FeatureGates())
@example(path=BATCH_JOB.mutate_path, obj=job(4, ann={R: L3}), kind="Job", operation="CREATE",
         gates=FeatureGates())
def test_any_job_review_gets_a_decided_answer(path: str, obj: dict[str, Any], kind: Any, operation: str,
                                              gates: FeatureGates) -> None:
    check(path, reviews(obj, kind, operation), gates)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(list(review.KUEUE_PATHS)), spec=JSONISH, name=SCALARS)
def test_any_kueue_object_review_gets_a_decided_answer(path: str, spec: Any, name: Any) -> None:
    check(path, reviews({"metadata": {"name": name}, "spec": spec}, {"kind": review.KUEUE_PATHS[path]}, "CREATE"))


CONTROLLER = "system:serviceaccount:toposched-system:toposched-controller"
USER_INFOS = st.one_of(st.none(), JSONISH, st.fixed_dictionaries(
    {"username": st.one_of(st.sampled_from([CONTROLLER, "alice", ""]), SCALARS)},
    optional={"groups": st.one_of(st.just(["system:masters"]), JSONISH)}))
SUSPEND_KINDS = {BATCH_JOB.validate_path: "Job", JOBSET.validate_path: "JobSet",
                 PYTORCHJOB.validate_path: "PyTorchJob"}


def with_suspend(kind: str, suspend: Any, queue: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"runPolicy": {"suspend": suspend}} if kind == "PyTorchJob" else {"suspend": suspend}
    labels = {} if queue is None else {"kueue.x-k8s.io/queue-name": queue}
    return {"kind": kind, "metadata": {"name": "train", "namespace": "team-a", "labels": labels}, "spec": spec}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(sorted(SUSPEND_KINDS)), user=USER_INFOS,
       old_suspend=st.one_of(st.booleans(), st.none(), SCALARS), new_suspend=st.one_of(st.booleans(), st.none()),
       old_queue=st.sampled_from([None, "lq"]), new_queue=st.sampled_from([None, "lq"]),
       old_object=st.one_of(st.just("built"), JSONISH))
def test_updates_with_any_old_object_and_user_are_decided_and_only_the_controller_unsuspends(
        path: str, user: Any, old_suspend: Any, new_suspend: Any, old_queue: Any, new_queue: Any,
        old_object: Any) -> None:
    kind = SUSPEND_KINDS[path]
    new = with_suspend(kind, new_suspend, new_queue)
    old = with_suspend(kind, old_suspend, old_queue) if old_object == "built" else old_object
    body = reviews(new, {"kind": kind}, "UPDATE")
    body["request"]["oldObject"] = old
    if user is not None:
        body["request"]["userInfo"] = user
    check(path, body)
    _, out = review.answer(path, json.dumps(body).encode(), VIEW)
    username = user.get("username") if isinstance(user, dict) else None
    unsuspends = old_object == "built" and old_suspend is True and new_suspend is not True
    if unsuspends and new_queue and username != CONTROLLER:
        assert out["response"]["allowed"] is False, (body, out)
        assert "suspend: Forbidden: only toposched's controller" in out["response"]["status"]["message"]
    if unsuspends and new_queue and username == CONTROLLER:
        assert out["response"]["allowed"] is True, (body, out)
