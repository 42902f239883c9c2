"""examples/jobs/ has one manifest per governed kind, and every document passes the real API
server's validation with the kinds' real CRDs (server-side dry run, ``dryRun=All`` with strict field
validation: schema, defaulting; nothing is persisted and no operator runs). The CRDs are the
releases Kueue v0.17.0 is built against (JobSet v0.10.1's as run here, training-operator v1.9.3,
mpi-operator v0.8.0, LWS v0.8.0, Trainer v2.2.0, KubeRay v1.6.0) and the test-only
HyperPodPyTorchJob stand-in (tests/data/hyp/: the operator's CRD is not public)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler.adapter.kinds.registry import KINDS, kind_of
from scheduler.devcluster.apply import apply_objects, load_documents
from scheduler.devcluster.binaries import repo_root
from scheduler.devcluster.jobset import jobset_crd_file
from scheduler.devcluster.kubeflow import module_dir as training_operator_dir
from scheduler.devcluster.kuberay import kuberay_crd_files
from scheduler.devcluster.lws import lws_crd_file
from scheduler.devcluster.mpioperator import mpijob_crd_file
from scheduler.devcluster.peers import wait_crds_established
from scheduler.devcluster.trainer import trainer_crd_files
from scheduler.k8s.informer import Api

EXAMPLES = repo_root() / "examples" / "jobs"
NS = "hyperpod-ns-team-a"


def documents() -> list[tuple[str, dict[str, Any]]]:
    return [(f"{path.name}#{i}", doc) for path in sorted(EXAMPLES.glob("*.yaml"))
            for i, doc in enumerate(yaml.safe_load_all(path.read_text())) if doc]


def crd_files() -> list[Path]:
    pytorchjob = training_operator_dir() / "manifests" / "base" / "crds" / "kubeflow.org_pytorchjobs.yaml"
    hyperpod = repo_root() / "tests" / "data" / "hyp" / "hyperpodpytorchjob-crd.yaml"
    return [jobset_crd_file(), pytorchjob, mpijob_crd_file(), lws_crd_file(), *trainer_crd_files(),
            *kuberay_crd_files(), hyperpod]


def test_every_governed_kind_has_an_example() -> None:
    shown = {k.kind for _, doc in documents() if (k := kind_of(doc)) is not None}
    assert [k.kind for k in KINDS if k.kind not in shown] == []


@pytest.fixture(scope="module")
def crds_installed(kube_api: client.ApiClient) -> Api:
    crds = [doc for path in crd_files() for doc in load_documents(path)]
    apply_objects(kube_api, crds)
    wait_crds_established(kube_api, crds)
    apply_objects(kube_api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    return Api(kube_api)


@pytest.mark.parametrize(("name", "doc"), documents(), ids=[n for n, _ in documents()])
def test_example_passes_server_side_dry_run(crds_installed: Api, name: str, doc: dict[str, Any]) -> None:
    group, _, version = doc["apiVersion"].rpartition("/")
    kind = kind_of(doc)
    plural = kind.plural if kind is not None else f"{doc['kind'].lower()}s"  # a runtime
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    namespace = doc["metadata"].get("namespace")
    path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    created = crds_installed.request("POST", path, query={"dryRun": "All", "fieldValidation": "Strict"}, body=doc)
    assert created["metadata"]["name"] == doc["metadata"]["name"], name
