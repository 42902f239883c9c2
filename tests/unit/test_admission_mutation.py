"""Job mutation as data tables; idempotence (second pass = empty patch)."""

from __future__ import annotations

from typing import Any

import pytest

from admission.mutation import apply_patch, mutate_job
from admission.view import ClusterView
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates

Q = "kueue.x-k8s.io/queue-name"
PC = "kueue.x-k8s.io/priority-class"


def job(labels: dict[str, str] | None = None, suspend: bool | None = None, scheduler: str | None = None,
        namespace: str = "team-a") -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    if suspend is not None:
        spec["suspend"] = suspend
    if scheduler:
        spec["template"]["spec"]["schedulerName"] = scheduler
    meta: dict[str, Any] = {"name": "j", "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def view(default_lq: bool = False, default_wpc: bool = False) -> ClusterView:
    lqs = {"team-a/default": {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq"}}} if default_lq else {}
    wpcs = {"default": {"metadata": {"name": "default"}, "value": 100}} if default_wpc else {}
    return ClusterView(local_queues=lqs, priority_classes=wpcs)


CASES: list[tuple[str, dict[str, Any], str, ClusterView, list[dict[str, Any]]]] = [
    ("managed", job({Q: "lq"}), "CREATE", view(), [
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/template/spec/schedulerName", "value": "toposched"}]),
    ("already suspended, other scheduler", job({Q: "lq"}, suspend=True, scheduler="default-scheduler"), "CREATE",
     view(), [{"op": "add", "path": "/spec/template/spec/schedulerName", "value": "toposched"}]),
    ("suspend false is forced", job({Q: "lq"}, suspend=False, scheduler="toposched"), "CREATE", view(),
     [{"op": "add", "path": "/spec/suspend", "value": True}]),
    ("unmanaged: untouched", job({"app": "x"}), "CREATE", view(), []),
    ("unmanaged without labels: untouched", job(None), "CREATE", view(), []),
    ("update: untouched", job({Q: "lq"}), "UPDATE", view(), []),
    ("default priority class", job({Q: "lq"}, suspend=True, scheduler="toposched"), "CREATE", view(default_wpc=True),
     [{"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "default"}]),
    ("explicit priority kept", job({Q: "lq", PC: "high"}, suspend=True, scheduler="toposched"), "CREATE",
     view(default_wpc=True), []),
    ("LocalQueue defaulting, no labels", job(None, suspend=True, scheduler="toposched"), "CREATE",
     view(default_lq=True), [{"op": "add", "path": "/metadata/labels", "value": {Q: "default"}}]),
    ("LocalQueue defaulting + priority", job({"app": "x"}), "CREATE", view(default_lq=True, default_wpc=True), [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "default"},
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1priority-class", "value": "default"},
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/template/spec/schedulerName", "value": "toposched"}]),
    ("default LocalQueue in another namespace", job(None, namespace="other"), "CREATE", view(default_lq=True), []),
]


# Kueue's WorkloadPriorityClassDefaulting (alpha, off in v0.17 and v0.19): the cases above turn it on.
WPC_DEFAULTING = FeatureGates({"WorkloadPriorityClassDefaulting": True})


def test_no_default_priority_class_without_the_gate_as_kueue_v017_and_v019() -> None:
    for release in (KUEUE_V017, KUEUE_V019):
        m = mutate_job(job({Q: "lq"}, suspend=True, scheduler="toposched"), "CREATE", view(default_wpc=True),
                       gates=FeatureGates(release=release))
        assert m.patch == []


@pytest.mark.parametrize("name,obj,op,v,expected", CASES, ids=[c[0] for c in CASES])
def test_mutation(name: str, obj: dict[str, Any], op: str, v: ClusterView, expected: list[dict[str, Any]]) -> None:
    m = mutate_job(obj, op, v, gates=WPC_DEFAULTING)
    assert m.patch == expected
    if m.patch:
        again = mutate_job(apply_patch(obj, m.patch), op, v, gates=WPC_DEFAULTING)
        assert again.patch == [], "second pass must be a no-op (reinvocationPolicy IfNeeded)"


def test_defaulting_warns_and_custom_scheduler_replacement_warns() -> None:
    m = mutate_job(job(None), "CREATE", view(default_lq=True))
    assert 'sent to LocalQueue "default" of namespace "team-a"' in m.warnings[0]
    m = mutate_job(job({Q: "lq"}, scheduler="volcano"), "CREATE", view())
    assert "'volcano' replaced by 'toposched'" in m.warnings[0]


def test_defaulting_can_be_disabled() -> None:
    assert mutate_job(job(None), "CREATE", view(default_lq=True), default_queue=False).patch == []


def test_an_elastic_job_gets_kueues_elastic_scheduling_gate_under_v019() -> None:
    """Kueue v0.19.2 job_webhook.go ``applyWorkloadSliceSchedulingGate`` (job_webhook_test.go's
    Default cases with ElasticJobsViaWorkloadSlices): the gate joins the template's gates; with
    the gate off (Kueue v0.17.0) nothing is added."""
    from admission.mutation import mutate_job
    from scheduler.adapter.kinds import workload_slicing as ws
    from scheduler.adapter.manifest.annotations import NO_OVERRIDES
    from scheduler.core.config import KUEUE_V019, FeatureGates

    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                        "annotations": {ws.ELASTIC_ANNOTATION: "true"}},
           "spec": {"parallelism": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    ops = mutate_job(job, "CREATE", None, gates=FeatureGates(release=KUEUE_V019)).patch
    assert {"op": "add", "path": "/spec/template/spec/schedulingGates",
            "value": [{"name": ws.SCHEDULING_GATE}]} in ops
    job["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "mine"}]
    ops = mutate_job(job, "CREATE", None, gates=FeatureGates(release=KUEUE_V019)).patch
    assert {"op": "add", "path": "/spec/template/spec/schedulingGates/-", "value": {"name": ws.SCHEDULING_GATE}} in ops
    assert not [o for o in mutate_job(job, "CREATE", None, gates=NO_OVERRIDES).patch if "schedulingGates" in o["path"]]
