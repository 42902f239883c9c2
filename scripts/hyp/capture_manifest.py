#!/usr/bin/env python3
"""Capture exactly the HyperPodPyTorchJob the real HyperPod CLI (`hyp`, sagemaker-hyperpod 3.12.0)
creates, as test fixture and example.

How (reproducible; takes about 30 s once the control-plane binaries are cached):
1. `python3 -m venv /work/venvs/hyp && /work/venvs/hyp/bin/pip install sagemaker-hyperpod==3.12.0`
   (a separate venv: the CLI pins its own kubernetes/pydantic/boto versions).
2. This script starts a local control plane (scheduler/devcluster, real kube-apiserver + etcd),
   installs the stand-in HyperPodPyTorchJob CRD tests/data/hyp/hyperpodpytorchjob-crd.yaml (every
   field preserved, so the stored object is the request body) and the team namespace, then runs
   the real `hyp create hyp-pytorch-job --version 1.1 ... --debug` with KUBECONFIG pointing at it.
   The CLI's telemetry GET is sent to a dead proxy (HTTPS_PROXY=127.0.0.1:9, loopback exempt),
   so nothing leaves the machine; no AWS credentials are read or needed for `create`.
3. The object is read back from the API server; the fields the server adds (uid,
   resourceVersion, generation, creationTimestamp, managedFields) are dropped. The CLI's own
   `--debug` dump of the body ("Deploying HyperPodPytorchJob with config:") is parsed from its
   log and must equal it (the script fails otherwise).
4. Written to tests/data/hyp/hyp-create-pytorch-job-v1.1.yaml (with the command in a comment)
   and examples/jobs/hyperpod-pytorch-job.yaml.

With ``--elastic`` the same job with the CLI's elastic flags (``--max-replica-count``,
``--elastic-replica-increment-step``, ...) is captured to
tests/data/hyp/hyp-create-pytorch-job-elastic-v1.1.yaml (no example written).

Usage: PYTHONPATH=$PWD python3 scripts/hyp/capture_manifest.py [--hyp /work/venvs/hyp/bin/hyp] [--elastic]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from scheduler.devcluster.apply import apply_objects, load_documents
from scheduler.devcluster.binaries import repo_root
from scheduler.devcluster.controlplane import LocalCluster
from scheduler.devcluster.peers import wait_crds_established

NAMESPACE = "hyperpod-ns-team-a"
JOB = "llama3-pretrain"
ARGS = [
    "create", "hyp-pytorch-job", "--version", "1.1",
    "--job-name", JOB, "--image", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
    "--namespace", NAMESPACE,
    "--queue-name", "hyperpod-ns-team-a-localqueue", "--priority", "training-priority",
    "--preferred-topology", "topology.k8s.aws/network-node-layer-3",
    "--replica-count", "4", "--instance-type", "ml.p5.48xlarge", "--accelerators", "8",
]
# The CLI's elastic training flags (hyp create hyp-pytorch-job --help, sagemaker-hyperpod 3.12.0).
ELASTIC_ARGS = [
    "--max-replica-count", "8", "--elastic-replica-increment-step", "2",
    "--elastic-graceful-shutdown-timeout-in-seconds", "60", "--elastic-scaling-timeout-in-seconds", "300",
    "--elastic-scale-up-snooze-time-in-seconds", "120",
]
ELASTIC_FIXTURE = repo_root() / "tests" / "data" / "hyp" / "hyp-create-pytorch-job-elastic-v1.1.yaml"
SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")
FIXTURE = repo_root() / "tests" / "data" / "hyp" / "hyp-create-pytorch-job-v1.1.yaml"
EXAMPLE = repo_root() / "examples" / "jobs" / "hyperpod-pytorch-job.yaml"
CRD = repo_root() / "tests" / "data" / "hyp" / "hyperpodpytorchjob-crd.yaml"


def _debug_body(log: str) -> dict[str, Any]:
    """The YAML the CLI logs at --debug right before its create call."""
    match = re.search(r"Deploying HyperPodPytorchJob with config:\n(.*?)(?:\n\S[^\n]*Successfully submitted|\Z)",
                      log, re.S)
    if not match:
        raise SystemExit("the CLI's --debug output has no 'Deploying HyperPodPytorchJob with config' block:\n" + log)
    lines = []
    for line in match.group(1).splitlines():
        if re.match(r"^\d{4}-\d\d-\d\d |^(INFO|DEBUG|WARNING)\b", line):
            break
        lines.append(line)
    body: dict[str, Any] = yaml.safe_load("\n".join(lines))
    return body


def _header(hyp_version: str, argv: list[str]) -> str:
    command = " ".join(["hyp", *argv])
    return (f"# Captured from the real HyperPod CLI (sagemaker-hyperpod {hyp_version}) by\n"
            "# scripts/hyp/capture_manifest.py: the object `hyp` created on a local API server with the\n"
            "# stand-in CRD tests/data/hyp/hyperpodpytorchjob-crd.yaml (all fields preserved), server fields\n"
            "# dropped; equal to the body the CLI logs with --debug. Do not edit by hand: re-run the script.\n"
            f"# Command: {command}\n"
            "# Kind as the CLI writes it: HyperPodPyTorchJob (AWS's externalFrameworks entry spells\n"
            "# HyperPodPytorchJob.v1.sagemaker.amazonaws.com; see docs/design/new-kinds.md).\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hyp", default="/work/venvs/hyp/bin/hyp", help="the hyp executable")
    parser.add_argument("--elastic", action="store_true", help="capture the job with the CLI's elastic flags")
    args = parser.parse_args()
    argv = [*ARGS, *ELASTIC_ARGS] if args.elastic else ARGS
    pip = Path(args.hyp).with_name("pip")
    shown = subprocess.run([str(pip), "show", "sagemaker-hyperpod"], capture_output=True, text=True, check=True)
    hyp_version = re.search(r"^Version: (\S+)", shown.stdout, re.M).group(1)  # type: ignore[union-attr]
    with tempfile.TemporaryDirectory(prefix="hypcapture.") as scratch:
        cluster = LocalCluster(Path(scratch) / "cluster").start()
        try:
            kube = cluster.api_client()
            crds = load_documents(CRD)
            apply_objects(kube, crds)
            wait_crds_established(kube, crds)
            apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
            env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig), HOME=scratch,
                       HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
                       NO_PROXY="127.0.0.1,localhost", AWS_EC2_METADATA_DISABLED="true")
            run = subprocess.run([args.hyp, *argv, "--debug"], capture_output=True, text=True, env=env, check=False)
            log = run.stdout + run.stderr
            if run.returncode != 0 or "Successfully submitted" not in log:
                raise SystemExit(f"hyp failed (exit {run.returncode}):\n{log}")
            from kubernetes import client

            stored = client.CustomObjectsApi(kube).get_namespaced_custom_object(
                "sagemaker.amazonaws.com", "v1", NAMESPACE, "hyperpodpytorchjobs", JOB)
        finally:
            cluster.stop()
    for key in SERVER_FIELDS:
        stored["metadata"].pop(key, None)
    logged = _debug_body(log)
    if logged != stored:
        raise SystemExit(f"the stored object differs from the body the CLI logged:\nstored: {stored}\nlogged: {logged}")
    text = _header(hyp_version, argv) + yaml.safe_dump(stored, sort_keys=False)
    if args.elastic:
        ELASTIC_FIXTURE.write_text(text)
        print(f"wrote {ELASTIC_FIXTURE.relative_to(repo_root())}")
        return 0
    FIXTURE.write_text(text)
    EXAMPLE.write_text(text)
    print(f"wrote {FIXTURE.relative_to(repo_root())} and {EXAMPLE.relative_to(repo_root())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
