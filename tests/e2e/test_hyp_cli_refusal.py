"""The real HyperPod CLI (``hyp``, sagemaker-hyperpod 3.12.0) meeting a toposched refusal on the
real control plane: a job that can never fit is refused with 422 Invalid, so ``hyp`` does not
print "Access denied to resource" (it reads any 403 that way, sagemaker/hyperpod/common/utils.py
``handle_exception``); kubectl's client sees code 422 and reason Invalid with the message.

The CLI lives in a venv of its own (it pins its own kubernetes/pydantic/boto versions), which
``scripts/setup.sh --test`` installs into ``~/.cache/toposched/hyp-3.12.0`` (``TOPOSCHED_CACHE``);
or set TOPOSCHED_HYP to a ``hyp``. Without it the test is skipped, saying so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler.adapter.kinds.hyperpod import HYPERPODPYTORCHJOB
from scheduler.kube.jobs import resource_of
from tests.e2e.conftest import Stack
from tests.e2e.test_pods_and_hyperpod import CLUSTER, HYP, NS, install_hyperpod_crd

L3 = "topology.k8s.aws/network-node-layer-3"


def hyp_cli() -> str | None:
    cache = Path(os.environ.get("TOPOSCHED_CACHE") or Path.home() / ".cache" / "toposched")
    for candidate in (os.environ.get("TOPOSCHED_HYP"), str(cache / "hyp-3.12.0" / "bin" / "hyp"), shutil.which("hyp")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory({**CLUSTER, "name": "e2e-hyp-refusal"}, before_toposched=install_hyperpod_crd)


def test_hyp_shows_a_never_fits_refusal_as_invalid_not_access_denied(stack: Stack, tmp_path: Path) -> None:
    hyp = hyp_cli()
    if hyp is None:
        pytest.skip("the hyp CLI is not installed (see this module's docstring)")
    env = dict(os.environ, KUBECONFIG=str(stack.cluster.kubeconfig), HOME=str(tmp_path),
               HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",  # its telemetry: nowhere
               NO_PROXY="127.0.0.1,localhost", AWS_EC2_METADATA_DISABLED="true")
    # 8 replicas x 8 GPUs required in one layer-3 domain of 4 nodes x 8 GPUs: never fits
    args = ["create", "hyp-pytorch-job", "--version", "1.1", "--job-name", "too-wide",
            "--image", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "--namespace", NS,
            "--queue-name", "hyperpod-ns-team-a-localqueue", "--required-topology", L3,
            "--replica-count", "8", "--instance-type", "ml.p5.48xlarge", "--accelerators", "8"]
    run = subprocess.run([hyp, *args], capture_output=True, text=True, env=env, timeout=300, check=False)
    out = run.stdout + run.stderr
    print(f"\n[hyp] exit {run.returncode}:\n{out}")
    assert run.returncode != 0 and "Successfully submitted" not in out, out
    assert "Access denied" not in out, out
    # its answer on stdout (stderr holds the telemetry call's failure to reach the dead proxy)
    assert run.stdout.strip().splitlines()[-1] == "Unhandled Kubernetes error: 422 Unprocessable Entity", out

    # the same refusal through the Kubernetes client (what kubectl reads): code, reason, message
    manifest = yaml.safe_load((HYP / "hyp-create-pytorch-job-v1.1.yaml").read_text())
    manifest["metadata"]["name"] = "too-wide-2"
    spec = manifest["spec"]["replicaSpecs"][0]
    spec["replicas"] = 8
    annotations = spec["template"]["metadata"].setdefault("annotations", {})
    annotations.pop("kueue.x-k8s.io/podset-preferred-topology", None)
    annotations["kueue.x-k8s.io/podset-required-topology"] = L3
    with pytest.raises(client.ApiException) as refused:
        stack.api.create(resource_of(HYPERPODPYTORCHJOB), manifest, NS)
    body = json.loads(refused.value.body)
    assert (refused.value.status, body["reason"]) == (422, "Invalid"), body
    assert "can never" in body["message"], body
