"""Kueue v0.19.2's webhook rules for elastic jobs (adapter/manifest/elastic.py, through the
manifest verdict the job webhook, ``place`` and gRPC share), restating
pkg/controller/jobframework/validation_test.go ("elastic annotation on batch/v1.Job is allowed",
"... on unsupported framework is rejected", "... without feature gate is ignored", "elastic job
enabled annotation cannot be removed / added on update") and
pkg/controller/jobs/job/job_webhook_test.go ("partial admission and elastic job cannot be used
together", required / preferred topology "not supported with elastic jobs") at v0.19.2. Each fails
on main, where the annotation was never judged."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.adapter.kinds import workload_slicing as ws
from scheduler.adapter.kinds.hyperpod import HYPERPODPYTORCHJOB
from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.adapter.manifest.checks import manifest_verdict
from scheduler.adapter.manifest.elastic import elastic_errors
from scheduler.core.config import KUEUE_V019, FeatureGates

ON = FeatureGates(release=KUEUE_V019)
OFF = FeatureGates()
PATH = "metadata.annotations[kueue.x-k8s.io/elastic-job]"


def job(elastic: bool = True, template_annotations: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    ann = {ws.ELASTIC_ANNOTATION: "true"} if elastic else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                         "annotations": {**ann, **(annotations or {})}},
            "spec": {"parallelism": 3, "completions": 3, "suspend": True,
                     "template": {"metadata": {"annotations": template_annotations or {}},
                                  "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}


def errors(obj: dict[str, Any], old: dict[str, Any] | None = None, gates: FeatureGates = ON) -> list[str]:
    return [str(e) for e in manifest_verdict(obj, old, gates).errors]


def test_elastic_annotation_on_a_batch_job_is_allowed() -> None:
    assert errors(job()) == []


def test_elastic_annotation_on_an_unsupported_framework_is_rejected() -> None:
    [error] = elastic_errors(JOBSET, {"metadata": {"annotations": {ws.ELASTIC_ANNOTATION: "true"}}}, None, ON)
    assert str(error).startswith(f'{PATH}: Forbidden: elastic job is not supported for '
                                 f'"jobset.x-k8s.io/v1alpha2, Kind=JobSet"')


def test_elastic_annotation_without_the_feature_gate_is_ignored() -> None:
    """Kueue v0.17.0's default (the gate alpha, off): nothing refused, nothing elastic."""
    assert elastic_errors(JOBSET, {"metadata": {"annotations": {ws.ELASTIC_ANNOTATION: "true"}}}, None, OFF) == []
    assert errors(job(annotations={"kueue.x-k8s.io/job-min-parallelism": "2"}), gates=OFF) == []


def test_hyperpod_pytorch_jobs_are_not_judged() -> None:
    """An external framework in Kueue: no Kueue webhook reads its annotations."""
    assert elastic_errors(HYPERPODPYTORCHJOB, {"metadata": {"annotations": {ws.ELASTIC_ANNOTATION: "true"}}},
                          None, ON) == []


def test_the_elastic_annotation_cannot_be_removed_or_added_on_update() -> None:
    elastic, plain = job(), job(elastic=False)
    [removed] = errors(plain, elastic)
    assert removed.startswith(f"{PATH}: Invalid value: false: field is immutable")
    [added] = errors(elastic, plain)
    assert added.startswith(f"{PATH}: Invalid value: true: field is immutable")
    scaled = copy.deepcopy(elastic)
    scaled["spec"]["parallelism"] = 5
    assert errors(scaled, elastic) == []  # a scale is no change of the annotation


def test_partial_admission_and_elastic_job_cannot_be_used_together() -> None:
    [error] = errors(job(annotations={"kueue.x-k8s.io/job-min-parallelism": "2"}))
    assert error.startswith('metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: "2": '
                            "partial admission and elastic job cannot be used together")


def test_required_and_preferred_topology_are_not_supported_with_elastic_jobs() -> None:
    [required] = errors(job(template_annotations={"kueue.x-k8s.io/podset-required-topology": "block"}))
    assert required.startswith("spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]: "
                               "Forbidden: required topology is not supported with elastic jobs")
    [preferred] = errors(job(template_annotations={"kueue.x-k8s.io/podset-preferred-topology": "block"}))
    assert preferred.startswith("spec.template.metadata.annotations[kueue.x-k8s.io/podset-preferred-topology]: "
                                "Forbidden: preferred topology is not supported with elastic jobs")
    assert errors(job(template_annotations={"kueue.x-k8s.io/podset-unconstrained-topology": "true"})) == []
    assert errors(job(elastic=False, template_annotations={"kueue.x-k8s.io/podset-required-topology": "block"})) == []


def test_the_hyp_clis_elastic_job_is_charged_at_its_replicas_and_not_sliced() -> None:
    """The real ``hyp create hyp-pytorch-job ... --max-replica-count 8
    --elastic-replica-increment-step 2 ...`` (sagemaker-hyperpod 3.12.0; captured by
    scripts/hyp/capture_manifest.py --elastic) writes ``spec.elasticPolicy`` and
    ``replicaSpecs[].maxReplicas``, and no ``kueue.x-k8s.io/elastic-job`` annotation. Kueue v0.19.2
    has no elastic support for it (an external framework, not in ``supportedElasticJobGVKs``):
    the webhook accepts it and it is queued at its ``replicas``, as any HyperPodPyTorchJob."""
    from pathlib import Path

    import yaml

    from scheduler.adapter.kinds.workloads import workload_pod_sets

    text = (Path(__file__).parents[3] / "tests/data/hyp/hyp-create-pytorch-job-elastic-v1.1.yaml").read_text()
    manifest = yaml.safe_load(text)
    assert manifest["spec"]["elasticPolicy"]["maxReplicas"] == 8
    assert not ws.enabled(manifest, ON)
    assert not ws.supported(HYPERPODPYTORCHJOB.group, HYPERPODPYTORCHJOB.kind)
    assert errors(manifest) == []
    assert [ps["count"] for ps in workload_pod_sets(HYPERPODPYTORCHJOB, manifest)] == [4]


def test_rayclusters_autoscaling_is_allowed_only_as_an_elastic_job() -> None:
    """raycluster_webhook_test.go at v0.19.2 ("invalid managed - has auto scaler": the v0.19.2
    message; with the elastic annotation it passes); under v0.17 Kueue v0.17.0's own words."""
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "rc", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                            "annotations": {ws.ELASTIC_ANNOTATION: "true"}},
               "spec": {"enableInTreeAutoscaling": True,
                        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "x"}]}}},
                        "workerGroupSpecs": [{"groupName": "g", "replicas": 1,
                                              "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}]}}
    assert errors(cluster) == []
    plain = copy.deepcopy(cluster)
    plain["metadata"]["annotations"] = {}
    [refused] = errors(plain)
    assert refused.startswith("spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can "
                              "use autoscaling only as an elastic job: enable the ElasticJobsViaWorkloadSlices "
                              'feature gate and set the "kueue.x-k8s.io/elastic-job": "true" annotation')
    [v017] = errors(cluster, gates=OFF)
    assert v017.startswith("spec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job can use "
                           "autoscaling only when the ElasticJobsViaWorkloadSlices feature gate is on")
