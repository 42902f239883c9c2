"""Every Kubernetes object in examples/ passes the real API server's validation (server-side dry
run, dryRun=All: schema, defaulting, admission; nothing is persisted), as written and as a copy
under another name: the sample Job hard-coded its pods' ``job-name`` label, so a renamed copy
was refused by Kubernetes (``spec.template.metadata.labels[job-name]`` must be the Job's name).

The CRDs are those the local control plane's peers install (JobSet, the training operator's
PyTorchJob, the MPI operator's MPIJob, LeaderWorkerSet, Kueue), from the Go module cache."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError

from scheduler.devcluster import peers
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.jobset import jobset_crd_file
from scheduler.devcluster.kubeflow import module_dir as training_operator_dir
from scheduler.devcluster.lws import lws_crd_file
from scheduler.devcluster.mpioperator import mpijob_crd_file

ROOT = Path(__file__).resolve().parents[2]
# Objects of examples/ that are not API objects (a Kueue Configuration is a file the controller reads).
NOT_API_OBJECTS = {"Configuration"}


def example_objects() -> list[tuple[str, int, dict[str, Any]]]:
    out = []
    for path in sorted([*ROOT.glob("examples/jobs/*.yaml"), *ROOT.glob("examples/kueue/*.yaml")]):
        for index, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if d):
            if doc.get("kind") not in NOT_API_OBJECTS:
                out.append((str(path.relative_to(ROOT)), index, doc))
    return out


EXAMPLES = example_objects()


@pytest.fixture(scope="module")
def api(local_cluster: Any, kube_api: client.ApiClient) -> DynamicClient:
    local_cluster.install_kueue_crds()
    pytorchjobs = training_operator_dir() / "manifests" / "base" / "crds" / "kubeflow.org_pytorchjobs.yaml"
    crds = [d for f in (jobset_crd_file(), pytorchjobs, mpijob_crd_file(), lws_crd_file())
            for d in yaml.safe_load_all(f.read_text()) if d]
    apply_objects(kube_api, crds)
    peers.wait_crds_established(kube_api, crds)
    core = client.CoreV1Api(kube_api)
    for obj in EXAMPLES:  # namespaced dry runs need the namespace to exist for real
        namespace = obj[2]["metadata"].get("namespace")
        if namespace:
            try:
                core.create_namespace({"metadata": {"name": namespace}})
            except client.ApiException as exc:
                if exc.status != 409:
                    raise
    return DynamicClient(kube_api)


def dry_run(api: DynamicClient, obj: dict[str, Any]) -> None:
    resource = api.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    namespace = obj["metadata"].get("namespace") if resource.namespaced else None
    api.create(resource, body=obj, namespace=namespace, dry_run="All")


def renamed(obj: dict[str, Any]) -> dict[str, Any]:
    copied = copy.deepcopy(obj)
    copied["metadata"]["name"] = f"{obj['metadata']['name']}-copy"
    return copied


def test_every_job_kind_has_an_example() -> None:
    kinds = {doc["kind"] for path, _, doc in EXAMPLES if path.startswith("examples/jobs/")}
    assert {"Job", "JobSet", "PyTorchJob", "MPIJob", "LeaderWorkerSet"} <= kinds


@pytest.mark.parametrize("path, index, obj", EXAMPLES, ids=[f"{p}#{i}:{o['kind']}" for p, i, o in EXAMPLES])
def test_example_passes_server_side_dry_run_as_written_and_renamed(api: DynamicClient, path: str, index: int,
                                                                   obj: dict[str, Any]) -> None:
    for candidate in (obj, renamed(obj)):
        try:
            dry_run(api, candidate)
        except DynamicApiError as exc:
            if exc.status == 409 and candidate["kind"] == "Namespace":
                continue  # created for real by the fixture
            pytest.fail(f"{path} document {index} ({candidate['kind']} {candidate['metadata']['name']}): "
                        f"{exc.status} {exc.body}")
