"""Fuzzing the webhook's review handler (bounded, in the suite): whatever the body, the answer
is a well-formed AdmissionReview, nothing inside fails (no "internal error", no "could not
validate"), and a managed object is never let through unvalidated (fail closed)."""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from admission import review, routes
from admission.governance import QUEUED_PATH
from scheduler.adapter.kinds.batch import BATCH_JOB
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.kinds.leaderworkerset import LEADERWORKERSET
from scheduler.adapter.kinds.mpijob import MPIJOB
from scheduler.adapter.kinds.pytorchjob import PYTORCHJOB
from scheduler.adapter.manifest.annotations import NO_OVERRIDES
from scheduler.core.config import FeatureGates
from tests.fuzzing import example_objects, generic_object, is_queued, mutated, outcome, review_body
from tests.unit.test_admission_validation import L2, L3, SC, G, R, cluster, job

KUEUE_OBJECT_PATHS = {p: r.kind_name for p, r in routes.ROUTES.items() if r.steps == routes.KUEUE_OBJECT_VALIDATE}
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
@given(path=st.sampled_from(list(KUEUE_OBJECT_PATHS)), spec=JSONISH, name=SCALARS)
def test_any_kueue_object_review_gets_a_decided_answer(path: str, spec: Any, name: Any) -> None:
    check(path, reviews({"metadata": {"name": name}, "spec": spec}, {"kind": KUEUE_OBJECT_PATHS[path]}, "CREATE"))


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


# ---------------------------------------------------------------------------- structure-aware
# Each case starts from a valid object of the kind the path serves (examples/, tests/fuzzing.py)
# and breaks one to three places in it: nulls, wrong scalar types, strings for lists, lists for
# objects, null list items, deep nesting, thousands of items, deleted or strange keys. Every
# answer must be decided: a field error or an admission, never an internal-error refusal
# (counted, goal 0) and never a queued object let through unvalidated (counted, must stay 0).
# scripts/bench/fuzz_inputs.py runs the same mutations exhaustively and for longer.

SEEDS = example_objects()
SUITE_HUGE = (50, 1_000)


def _kind(path: str) -> str:
    """The kind a path serves; the default deny's path serves every kind, fuzzed with one it
    does not govern."""
    return routes.ROUTES[path].kind_name or "RayJob"


def test_structure_aware_fuzz_of_every_kind_counts_no_internal_error_and_no_fail_open() -> None:
    """Every path the webhook serves gets its share of the budget (about 240 reviews in all):
    sampled paths left some unvisited when the registry grew to 37 paths."""
    counts: Counter[str] = Counter()
    per_path: Counter[str] = Counter()
    examples = max(6, 240 // len(routes.PATHS))

    def fuzz(path: str) -> None:
        @settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(data=st.data(), operation=st.sampled_from(["CREATE", "UPDATE"]), old_mutated=st.booleans())
        def one_review(data: st.DataObject, operation: str, old_mutated: bool) -> None:
            def pick(options: Sequence[Any]) -> Any:
                return data.draw(st.sampled_from(list(options)))

            kind = _kind(path)
            seed = SEEDS.get(kind) or generic_object(kind)
            obj = mutated(seed, pick, huge=SUITE_HUGE)
            old = (mutated(seed, pick, huge=SUITE_HUGE) if old_mutated else seed) if operation == "UPDATE" else None
            code, out = review.answer(path, review_body(obj, kind, operation, old), VIEW)
            result = outcome(out, is_queued(obj))
            counts[result] += 1
            per_path[path] += 1
            assert code in (200, 400) and out["kind"] == "AdmissionReview", out
            assert result == "decided", (path, obj, out["response"])

        one_review()

    for path in routes.PATHS:
        fuzz(path)
    assert counts["internal"] == 0 and counts["fail-open"] == 0, counts
    assert counts["decided"] >= len(routes.PATHS) * examples * 0.8 and set(per_path) == set(routes.PATHS), (
        counts, per_path)


# The wrongly typed fields the structure-aware fuzz found on the old code (each was an
# internal-error refusal): now one field error naming the field, the type and the fix.
WRONG_TYPES: list[tuple[str, tuple[Any, ...], Any, str, str]] = [
    ("Topology", ("spec", "levels"), [None], "spec.levels[0]: Invalid value: null: must be an object",
     "remove the null item"),
    ("ClusterQueue", ("spec", "resourceGroups"), [None], "spec.resourceGroups[0]: Invalid value: null: must be an "
     "object", "remove the null item"),
    ("ClusterQueue", ("spec", "resourceGroups", 0, "flavors"), [None],
     "spec.resourceGroups[0].flavors[0]: Invalid value: null: must be an object", "remove the null item"),
    ("ClusterQueue", ("apiVersion",), {"a": 1}, "apiVersion: Invalid value: must be a string", "write it as a string"),
    ("JobSet", ("spec", "replicatedJobs"), [None], "spec.replicatedJobs[0]: Invalid value: null: must be an object",
     "remove the null item"),
    ("Job", ("spec", "template", "spec", "containers"), [None],
     "spec.template.spec.containers[0]: Invalid value: null: must be an object", "remove the null item"),
    ("Job", ("spec", "template", "spec", "containers", 0, "resources", "requests", "cpu"), "8" * 5000,
     "spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: \"888", "write a quantity"),
    ("Job", ("metadata", "ownerReferences"), "x", 'metadata.ownerReferences: Invalid value: "x": must be a list',
     "write it as a list"),
    ("PyTorchJob", ("metadata", "ownerReferences"), [None],
     "metadata.ownerReferences[0]: Invalid value: null: must be an object", "remove the null item"),
    ("MPIJob", ("metadata", "ownerReferences", 0), True,
     "metadata.ownerReferences[0]: Invalid value: true: must be an object", "write it as an object"),
    ("LeaderWorkerSet", ("metadata", "ownerReferences", 0, "controller"), "yes",
     'metadata.ownerReferences[0].controller: Invalid value: "yes": must be a boolean', "write true or false"),
    ("Job", ("spec", "parallelism"), "three", 'spec.parallelism: Invalid value: "three": must be an integer',
     "write a whole number"),
    ("Job", ("spec", "parallelism"), -3, "spec.parallelism: Invalid value: -3: must be greater than or equal to 0",
     "write the number of pods"),
    ("JobSet", ("spec", "replicatedJobs", 0, "replicas"), 2**40,
     f"spec.replicatedJobs[0].replicas: Invalid value: {2**40}: must be less than or equal to 2147483647",
     "write the number of pods"),
    ("Topology", ("spec", "levels"), [{"nodeLabel": f"l{i}"} for i in range(17)],
     "spec.levels: Too many: 17: must have at most 16 items", "list at most 16 items"),
]


@pytest.mark.parametrize("kind, where, value, error, fix", WRONG_TYPES,
                         ids=[f"{k}:{'.'.join(map(str, w))}" for k, w, *_ in WRONG_TYPES])
def test_wrongly_typed_fields_get_a_field_error_naming_field_type_and_fix(
        kind: str, where: tuple[Any, ...], value: Any, error: str, fix: str) -> None:
    obj = copy.deepcopy(SEEDS[kind])
    target = obj
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = value
    paths = [p for p in routes.PATHS if _kind(p) == kind]
    assert paths
    for path in paths:
        for operation in ("CREATE", "UPDATE"):
            code, out = review.answer(path, review_body(obj, kind, operation, SEEDS[kind]), VIEW)
            resp = out["response"]
            assert code == 200 and resp["allowed"] is False, (path, resp)
            assert resp["status"]["code"] == 403 and resp["status"]["reason"] == "Forbidden", (path, resp)
            message = resp["status"]["message"]
            assert message.startswith(error) or f"- {error}" in message, (path, message)
            assert fix in message and "internal error" not in message, (path, message)
