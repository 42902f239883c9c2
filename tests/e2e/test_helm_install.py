"""An admin installs toposched as docs/install.md says, and it works: the container image built
by scripts/build-image.sh, the Helm chart installed by helm (v4.3.2, built from the module proxy),
every pod run for real from those images by the podman node of a bare cluster (``toposched dev
up --bare``: KWOK nodes run nothing), with exactly the chart's arguments, environment, mounts and
service account; the scheduler Pod's init container ran first, to completion, and the extender
it issued certificates for answers kube-scheduler's client certificate only. Then:

- a labelled Job goes through the chart's webhook (its Service, resolved by the API server to a
  ready endpoint, and the caBundle the webhook injected), the chart's controller admits it, and
  the chart's kube-scheduler profile places its pods through the extender (one feasible node per
  pod: the extender's filter), exactly as the Workload's topology assignment says;
- ``helm upgrade`` to a second image (a rebuilt tag) rolls every Deployment while Jobs keep
  being created: none is refused, each was mutated, each is admitted, and the admissions made
  before the roll are unchanged;
- ``helm upgrade`` to values whose webhook and controller cannot start fails, and ``helm
  rollback`` to the previous revision follows while Jobs keep being created: none is refused,
  each is mutated and admitted, the admissions made before are unchanged;
- ``helm uninstall`` leaves no webhook that refuses a labelled Job, and never deletes an admin's
  objects: the PreemptionConfig / PreemptionLimit CRDs the chart installed stay
  (``helm.sh/resource-policy: keep``) with the admin's PreemptionConfig in them, the queues and
  flavors stay, and docs/install.md's finalizer clean-up, run as written, removes
  ``kueue.x-k8s.io/resource-in-use`` and nothing else.

``toposched preflight`` runs first, as docs/install.md says; the kube-scheduler image's tag is
the one the chart derived from the cluster's version (no ``scheduler.image.tag`` is set).

Two lengths (docs/install.md, "Proven here", has the commands and times): by default (the CI
run) one image, the install, the pods checked against the chart, the labelled Job and the
uninstall; ``TOPOSCHED_INSTALL_TEST=1`` adds the second image, the upgrade roll and the failed
upgrade with its rollback under a stream of Jobs; ``TOPOSCHED_INSTALL_TEST=0`` skips it. Needs
root, podman, runc, buildah and mmdebstrap (``scripts/setup.sh --test`` installs them as root,
unless TOPOSCHED_INSTALL_TEST=0).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiException

from scheduler.core.assignment import decode_topology_assignment
from scheduler.core.fakecluster import generate_nodes
from scheduler.devcluster import binaries, podman, podnode
from scheduler.devcluster.apply import apply_objects, create_nodes, load_documents, wait_nodes_settled
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, LocalCluster, free_port
from scheduler.devcluster.health import MUTATING, VALIDATING, webhook_checks
from scheduler.devcluster.podspec import quantity_bytes
from scheduler.k8s.informer import JOBS, LOCAL_QUEUES, PODS, WORKLOADS, Api, Resource

FULL = os.environ.get("TOPOSCHED_INSTALL_TEST") == "1"
pytestmark = [
    pytest.mark.install,
    pytest.mark.skipif(os.environ.get("TOPOSCHED_INSTALL_TEST") == "0", reason="TOPOSCHED_INSTALL_TEST=0"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in ("podman", "buildah", "mmdebstrap")),
                       reason="needs podman, buildah and mmdebstrap (apt-get install podman runc buildah mmdebstrap)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="podman pods with their own network need root"),
]

ROOT = binaries.repo_root()
CHART = ROOT / "deploy" / "helm" / "toposched"
NS = "toposched-system"
TEAM = "hyperpod-ns-team-a"
QUEUE = "hyperpod-ns-team-a-localqueue"
REPOSITORY = "localhost/toposched"
FIRST, SECOND = "install-test-1", "install-test-2"
SCHEDULER_IMAGE = f"localhost/kube-scheduler:{binaries.K8S_VERSION}"
DEPLOYMENTS = Resource("apps", "v1", "deployments")
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)
PREEMPTION_CONFIGS = Resource("kueue.x-k8s.io", "v1alpha1", "preemptionconfigs", namespaced=False)
KUEUE_OBJECTS = (Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", namespaced=False),
                 Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", namespaced=False),
                 Resource("kueue.x-k8s.io", "v1beta2", "topologies", namespaced=False))
IN_USE = "kueue.x-k8s.io/resource-in-use"
# 16 fake p5 nodes: 1 layer-1 x 2 layer-2 x 2 layer-3 domains of 4 nodes (32 GPUs each).
CLUSTER = {"name": "install", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    assert out.returncode == 0, f"{' '.join(argv[:3])}: {out.stdout[-3000:]}{out.stderr[-3000:]}"
    return out.stdout


@dataclass
class Install:
    cluster: LocalCluster
    api: Api
    helm: Path
    podman: podman.Podman
    timings: dict[str, float] = field(default_factory=dict)

    def helm_run(self, *args: str, timeout: float = 600) -> str:
        started = time.monotonic()
        out = run([str(self.helm), *args], timeout, env=dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig)))
        self.timings[f"helm {args[0]}"] = time.monotonic() - started
        return out

    def wait(self, predicate: Callable[[], Any], what: str, timeout_s: float = 120) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                value = predicate()
                if value:
                    return value
            except ApiException:
                pass
            time.sleep(0.5)
        raise AssertionError(f"{what}: not within {timeout_s:.0f}s; podman node log: "
                             f"{self.cluster.logs / 'podman-node.log'}")

    def node_pods(self) -> list[dict[str, Any]]:
        return list(self.api.list(PODS, NS, fieldSelector=f"spec.nodeName={podnode.NODE_NAME}")["items"])


def build_images(timings: dict[str, float]) -> None:
    for tag, revision in ((FIRST, "install-test-1"), (SECOND, "install-test-2"))[:2 if FULL else 1]:
        started = time.monotonic()
        run([str(ROOT / "scripts" / "build-image.sh"), f"{REPOSITORY}:{tag}"], 3600,
            env=dict(os.environ, IMAGE_REVISION=revision))
        timings[f"build {tag}"] = time.monotonic() - started
    started = time.monotonic()
    run([str(ROOT / "scripts" / "build-kube-scheduler-image.sh"), SCHEDULER_IMAGE], 1800)
    timings["build kube-scheduler image"] = time.monotonic() - started


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    timings: dict[str, float] = {}
    helm = binaries.ensure_helm()
    build_images(timings)
    started = time.monotonic()
    cluster = LocalCluster(Path(tmp_path_factory.mktemp("bare"))).start()
    try:
        kube = cluster.api_client()
        nodes = generate_nodes(CLUSTER)
        create_nodes(kube, nodes, FAKE_NODE_LABEL)
        wait_nodes_settled(kube, [n["metadata"]["name"] for n in nodes])
        apply_objects(kube, load_documents(ROOT / "examples" / "kueue" / "hyperpod-queues.yaml"))
        podnode.start_podman_node(cluster, free_port())
        timings["bare cluster"] = time.monotonic() - started
        yield Install(cluster, Api(kube), helm,
                      podman.Podman(cluster.dir / podnode.PROCESS_NAME / "containers.conf"), timings)
    finally:
        cluster.stop()
        podnode.sweep(cluster)
        print("install test timings (s):", json.dumps({k: round(v) for k, v in timings.items()}))


@pytest.fixture(scope="module")
def installed(install: Install) -> Install:
    """docs/install.md, "On this machine", step by step."""
    preflight = subprocess.run([sys.executable, "-m", "scheduler.cli", "preflight", "--kubeconfig",
                                str(install.cluster.kubeconfig)], capture_output=True, text=True, timeout=120,
                               check=False)
    assert preflight.returncode == 0, preflight.stdout + preflight.stderr
    assert preflight.stdout.splitlines()[-1] == "go: install toposched (docs/install.md)"
    run(["kubectl", "--kubeconfig", str(install.cluster.kubeconfig), "create", "namespace", NS], 60)
    run(["kubectl", "--kubeconfig", str(install.cluster.kubeconfig), "label", "namespace", NS,
         "pod-security.kubernetes.io/enforce=restricted"], 60)
    install.helm_run("install", "toposched", str(CHART), "--namespace", NS, *values(FIRST), "--wait",
                     "--timeout", "10m")
    return install


def values(tag: str) -> list[str]:
    return ["--set", f"image.repository={REPOSITORY}", "--set", f"image.tag={tag}",
            "--set", "scheduler.image.repository=localhost/kube-scheduler",
            "--set", "kueuePreemptionConfigCRD.install=true",
            "--set", "nodeSelector.toposched\\.dev/node-pool=system"]


# ---- the pods run what the chart says ------------------------------------------------------
def test_every_component_runs_from_the_image_as_the_chart_says(installed: Install) -> None:
    manifest = [d for d in yaml.safe_load_all(installed.helm_run("get", "manifest", "toposched", "-n", NS)) if d]
    rendered = {d["metadata"]["name"]: d for d in manifest if d["kind"] == "Deployment"}
    assert set(rendered) == {"toposched-controller", "toposched-webhook", "toposched-scheduler"}
    (kube_scheduler,) = [c for c in rendered["toposched-scheduler"]["spec"]["template"]["spec"]["containers"]
                         if c["name"] == "kube-scheduler"]
    assert kube_scheduler["image"] == SCHEDULER_IMAGE, "the tag derived from the cluster's version"
    assert rendered["toposched-scheduler"]["spec"]["template"]["spec"].get("initContainers"), \
        "the scheduler Pod issues its extender certificates in an init container"
    pods = [p for p in installed.node_pods() if not p["metadata"].get("deletionTimestamp")]
    for name, deployment in rendered.items():
        template = deployment["spec"]["template"]["spec"]
        mine = [p for p in pods if p["metadata"]["name"].startswith(name + "-")]
        assert len(mine) == deployment["spec"]["replicas"], f"{name}: {len(mine)} pods on {podnode.NODE_NAME}"
        for pod in mine:
            assert pod["spec"]["serviceAccountName"] == template["serviceAccountName"]
            # init containers ran first, each to completion, sharing the pod's volumes
            sources = {}
            for container in template.get("initContainers", []):
                sources[container["name"]] = check_init_container(installed, pod, template, container)
            for container in template["containers"]:
                seen = check_container(installed, pod, template, container)
                for init, mounted in sources.items():
                    for volume in set(mounted) & set(seen):
                        assert mounted[volume] == seen[volume], f"{container['name']} and {init} share {volume}"
            for container in template["containers"]:
                if "--tls-dir" in " ".join(container.get("args", [])):
                    check_extender_serves_only_the_schedulers_certificate(installed, pod, container)


def container_name(pod: dict[str, Any], container: dict[str, Any]) -> str:
    return f"k8s_{NS}_{pod['metadata']['name']}_{pod['metadata']['uid'][:8]}_{container['name']}"


def check_process(installed: Install, pod: dict[str, Any], template: dict[str, Any], container: dict[str, Any],
                  inspected: dict[str, Any]) -> dict[str, str]:
    """What the chart says of a container, as podman created it: argv, image, environment, user,
    read-only root, capabilities, each mount at its path, read-only where the chart says, the
    ServiceAccount token. Returns each volume's source on this machine, by volume name."""
    config = inspected["Config"]
    what = f"{pod['metadata']['name']}/{container['name']}"
    # the process: the chart's command (else the image's entrypoint) and args, nothing added
    argv = [inspected["Path"], *inspected["Args"]]
    assert argv == [*container.get("command", ["/opt/toposched/bin/toposched"]), *container.get("args", [])], what
    assert config["Image"].endswith(container["image"]) or container["image"] in config["Image"], what
    # environment: each variable of the chart, with its field references resolved
    env = dict(e.split("=", 1) for e in config["Env"])
    for entry in container.get("env", []):
        path = entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        expected = {"metadata.namespace": NS, "metadata.name": pod["metadata"]["name"]}.get(path, entry.get("value"))
        assert env[entry["name"]] == expected, f"{what}: {entry['name']}"
    # user, read-only root, capabilities
    security = container["securityContext"]
    run_as = (template.get("securityContext") or {}).get("runAsUser")
    assert config["User"].split(":")[0] == str(run_as or 65532), what
    assert inspected["HostConfig"]["ReadonlyRootfs"] is security["readOnlyRootFilesystem"], what
    if security.get("capabilities", {}).get("drop") == ["ALL"]:
        assert not inspected["EffectiveCaps"], f"{what}: {inspected['EffectiveCaps']}"
    # mounts as podman made them: each of the chart's at its path, read-only where it says
    mounts = {m["Destination"]: m for m in inspected["Mounts"]}
    sources = {}
    for mount in container.get("volumeMounts", []):
        assert mount["mountPath"] in mounts, f"{what}: {mount['mountPath']} not mounted"
        assert mounts[mount["mountPath"]]["RW"] is not bool(mount.get("readOnly")), f"{what}: {mount['mountPath']}"
        sources[mount["name"]] = mounts[mount["mountPath"]]["Source"]
    # the service account token from the TokenRequest API for the pod's own account, bound to the pod
    token_dir = mounts["/var/run/secrets/kubernetes.io/serviceaccount"]["Source"]
    claims = jwt_claims(Path(token_dir, "token").read_text())
    assert claims["sub"] == f"system:serviceaccount:{NS}:{template['serviceAccountName']}", what
    assert claims["kubernetes.io"]["pod"]["uid"] == pod["metadata"]["uid"], what
    assert Path(token_dir, "namespace").read_text() == NS
    return sources


def check_init_container(installed: Install, pod: dict[str, Any], template: dict[str, Any],
                         container: dict[str, Any]) -> dict[str, str]:
    """An init container ran as the chart says and completed, before every app container started."""
    what = f"{pod['metadata']['name']}/{container['name']}"
    inspected = installed.podman.json("inspect", container_name(pod, container))[0]
    state = inspected["State"]
    assert not state["Running"] and state["ExitCode"] == 0, f"{what}: {state}"
    (status,) = [s for s in pod["status"]["initContainerStatuses"] if s["name"] == container["name"]]
    assert status["state"]["terminated"]["reason"] == "Completed" and status["ready"], f"{what}: {status}"
    for app in template["containers"]:
        started = installed.podman.json("inspect", container_name(pod, app))[0]["State"]["StartedAt"]
        assert podman_time(state["FinishedAt"]) <= podman_time(started), f"{what} finished before {app['name']} started"
    return check_process(installed, pod, template, container, inspected)


def check_container(installed: Install, pod: dict[str, Any], template: dict[str, Any],
                    container: dict[str, Any]) -> dict[str, str]:
    name = container_name(pod, container)
    inspected = installed.podman.json("inspect", name)[0]
    what = f"{pod['metadata']['name']}/{container['name']}"
    assert inspected["State"]["Running"], what
    sources = check_process(installed, pod, template, container, inspected)
    # mounts, as the container sees them: each of the chart's at its path, read-only where the
    # chart says, the Memory emptyDir a tmpfs with its size limit
    seen = {}
    for line in installed.podman.run("exec", name, "cat", "/proc/mounts").splitlines():
        _dev, path, fstype, options = line.split()[:4]
        seen[path] = (fstype, options.split(","))
    volumes = {v["name"]: v for v in template.get("volumes", []) + pod["spec"]["volumes"]}
    for mount in container.get("volumeMounts", []):
        assert mount["mountPath"] in seen, f"{what}: {mount['mountPath']} not mounted"
        fstype, options = seen[mount["mountPath"]]
        assert ("ro" in options) is bool(mount.get("readOnly")), f"{what}: {mount['mountPath']} {options}"
        empty = volumes[mount["name"]].get("emptyDir", {})
        if empty.get("medium") == "Memory":
            size = f"size={quantity_bytes(empty['sizeLimit']) // 1024}k"
            assert fstype == "tmpfs" and size in options, f"{what}: {mount['mountPath']} {options}"
    assert seen["/"][1][0] == "ro", f"{what}: root filesystem {seen['/']}"
    return sources


# The extender's /readyz asked from inside its container, as kube-scheduler asks (the chart's
# tlsConfig: ca.crt, client.crt, client.key), then without a client certificate.
MTLS_PROBE = """
import ssl, sys, urllib.request
tls, url = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile=tls + "/ca.crt")
ctx.load_cert_chain(tls + "/client.crt", tls + "/client.key")
print("with:", urllib.request.urlopen(url, context=ctx, timeout=5).status)
try:
    urllib.request.urlopen(url, context=ssl.create_default_context(cafile=tls + "/ca.crt"), timeout=5)
    print("without: answered")
except (OSError, ssl.SSLError) as exc:
    print("without: refused", type(exc).__name__)
"""


def check_extender_serves_only_the_schedulers_certificate(installed: Install, pod: dict[str, Any],
                                                          container: dict[str, Any]) -> None:
    args = dict(a.removeprefix("--").split("=", 1) for a in container["args"] if a.startswith("--") and "=" in a)
    url = f"https://{args['bind']}:{args['port']}/readyz"
    out = installed.podman.run("exec", container_name(pod, container), "/opt/toposched/bin/python3", "-c",
                               MTLS_PROBE, args["tls-dir"], url)
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0] == "with: 200" and lines[1].startswith("without: refused"), \
        f"{pod['metadata']['name']}/{container['name']}: {out}"


def podman_time(text: str) -> tuple[dt.datetime, int]:
    """podman inspect's RFC 3339 time with nanoseconds (``2026-12-07T02:41:41.565123456Z``),
    comparable: (the second, in UTC; the nanoseconds)."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    assert match, text
    second = dt.datetime.fromisoformat(match.group(1) + match.group(3).replace("Z", "+00:00"))
    return second.astimezone(dt.UTC), int((match.group(2) or "0").ljust(9, "0")[:9])


def jwt_claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


# ---- a labelled Job, end to end ------------------------------------------------------------
def labelled_job(name: str, pods: int = 1, required: str | None = None) -> dict[str, Any]:
    annotations = {"kueue.x-k8s.io/podset-required-topology": required} if required else {}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": TEAM, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {"parallelism": pods, "completions": pods, "template": {
            "metadata": {"annotations": annotations},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "train", "image": "public.ecr.aws/docker/library/alpine:latest", "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}},
    }


def workload_of(api: Api, job: str) -> dict[str, Any] | None:
    for workload in api.list(WORKLOADS, TEAM)["items"]:
        if any(o.get("name") == job for o in workload["metadata"].get("ownerReferences", [])):
            return dict(workload)
    return None


def admitted(workload: dict[str, Any] | None) -> bool:
    return bool(workload) and any(c["type"] == "Admitted" and c["status"] == "True"
                                  for c in (workload or {}).get("status", {}).get("conditions", []))


def test_labelled_job_through_the_charts_webhook_controller_and_scheduler(installed: Install) -> None:
    api = installed.api
    for resource in (MUTATING, VALIDATING):
        hooks = api.get(resource, "toposched-webhook")["webhooks"]
        assert all(h["clientConfig"]["service"]["name"] == "toposched-webhook" and h["clientConfig"]["caBundle"]
                   for h in hooks)
    api.create(JOBS, labelled_job("tas-job", pods=10, required="topology.k8s.aws/network-node-layer-3"), TEAM)
    job = api.get(JOBS, "tas-job", TEAM)
    assert job["spec"]["template"]["spec"]["schedulerName"] == "toposched", "mutated by the chart's webhook"
    workload = installed.wait(lambda: (w := workload_of(api, "tas-job")) and admitted(w) and w, "tas-job admitted")
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    levels, domains = decode_topology_assignment(assignment["topologyAssignment"])
    assigned = {d.values[levels.index("kubernetes.io/hostname")]: d.count for d in domains}
    pods = installed.wait(lambda: (ps := job_pods(api, "tas-job")) and len(ps) == 10
                          and all(p["spec"].get("nodeName") for p in ps) and ps, "tas-job's 10 pods bound", 180)
    placed: dict[str, int] = {}
    for pod in pods:
        placed[pod["spec"]["nodeName"]] = placed.get(pod["spec"]["nodeName"], 0) + 1
    assert placed == assigned, "pods sit where the Workload's topology assignment says"
    # The chart's kube-scheduler bound them, each with exactly one feasible node: the extender's
    # filter (kube-scheduler alone finds every node of the domain with free GPUs feasible).
    logs = scheduler_logs(installed)
    bound = [line for line in logs.splitlines() if "Successfully bound pod to node" in line and "tas-job" in line]
    assert len(bound) == 10, logs[-3000:]
    assert all("feasibleNodes=1" in line for line in bound), bound


def job_pods(api: Api, job: str) -> list[dict[str, Any]]:
    return list(api.list(PODS, TEAM, labelSelector=f"job-name={job}")["items"])


def scheduler_logs(installed: Install) -> str:
    names = installed.podman.run("ps", "--format", "{{.Names}}").split()
    return "".join(installed.podman.logs(n, tail=5000) for n in names if n.endswith("_kube-scheduler"))


# ---- helm upgrade: a rolling update that refuses nothing -----------------------------------
@dataclass
class Submitter:
    """Creates a labelled Job every ``period`` seconds until stopped; records every refusal."""

    api: Api
    prefix: str = "roll"
    period: float = 0.5
    created: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            name = f"{self.prefix}-{uuid.uuid4().hex[:6]}"
            try:
                self.api.create(JOBS, labelled_job(name), TEAM)
                self.created.append(name)
            except ApiException as exc:
                self.refused.append(f"{name}: {exc.status} {str(exc.body)[:300]}")
            self.stop.wait(self.period)


@contextlib.contextmanager
def stream_of_jobs(api: Api, prefix: str = "roll", period: float = 0.5) -> Iterator[Submitter]:
    """A labelled Job every ``period`` seconds for as long as the block runs."""
    submitter = Submitter(api, prefix, period)
    thread = threading.Thread(target=submitter.run, daemon=True)
    thread.start()
    try:
        yield submitter
    finally:
        submitter.stop.set()
        thread.join()


def admissions(api: Api) -> dict[str, Any]:
    return {w["metadata"]["name"]: w["status"]["admission"] for w in api.list(WORKLOADS, TEAM)["items"] if admitted(w)}


@pytest.mark.skipif(not FULL, reason="the upgrade roll is in the full install test: TOPOSCHED_INSTALL_TEST=1")
def test_helm_upgrade_to_a_rebuilt_image_refuses_nothing_and_keeps_admissions(installed: Install) -> None:
    api = installed.api
    first_id = installed.podman.image_id(f"{REPOSITORY}:{FIRST}")
    second_id = installed.podman.image_id(f"{REPOSITORY}:{SECOND}")
    assert first_id != second_id, "the rebuilt tag is another image"
    before = {w["metadata"]["name"]: w["status"]["admission"] for w in api.list(WORKLOADS, TEAM)["items"]
              if admitted(w)}
    assert before, "the previous test's admission is there to keep"
    submitter = Submitter(api)
    thread = threading.Thread(target=submitter.run, daemon=True)
    thread.start()
    try:
        installed.helm_run("upgrade", "toposched", str(CHART), "--namespace", NS, "--reuse-values",
                           "--set", f"image.tag={SECOND}", "--wait", "--timeout", "10m")
        time.sleep(3)  # a few more creations against the new replicas only
    finally:
        submitter.stop.set()
        thread.join()
    assert submitter.refused == [], submitter.refused
    assert len(submitter.created) >= 10, f"only {len(submitter.created)} Jobs created during the roll"
    print(f"{len(submitter.created)} labelled Jobs created during the roll, none refused")
    for name in submitter.created:
        job = api.get(JOBS, name, TEAM)
        assert job["spec"]["template"]["spec"]["schedulerName"] == "toposched", f"{name} was not mutated"
    # every pod of the chart now runs the second image; those of the first terminate and go
    def first_image_left() -> list[str]:
        return [p["metadata"]["name"] for p in installed.node_pods() for c in p["status"]["containerStatuses"]
                if c["image"].startswith(REPOSITORY) and c["image"] != f"{REPOSITORY}:{SECOND}"]
    installed.wait(lambda: not first_image_left(), "the first image's pods gone", 120)
    for pod in installed.node_pods():
        for status in pod["status"]["containerStatuses"]:
            if status["image"].startswith(REPOSITORY):
                assert status["imageID"] == second_id and status["ready"], pod["metadata"]["name"]
    installed.wait(lambda: all(admitted(workload_of(api, n)) for n in submitter.created),
                   f"the {len(submitter.created)} Jobs created during the roll admitted", 300)
    after = {w["metadata"]["name"]: w["status"]["admission"] for w in api.list(WORKLOADS, TEAM)["items"]}
    for name, admission in before.items():
        assert after.get(name) == admission, f"admission of {name} changed by the upgrade"
    events = api.list(Resource("", "v1", "events"), TEAM, fieldSelector="reason=Evicted")["items"]
    assert events == [], "nothing evicted"


# ---- helm rollback after a failed upgrade --------------------------------------------------
BROKEN = "--no-such-flag"


@pytest.mark.skipif(not FULL, reason="the rollback is in the full install test: TOPOSCHED_INSTALL_TEST=1")
def test_helm_rollback_after_a_failed_upgrade_refuses_nothing_and_keeps_admissions(installed: Install) -> None:
    """docs/install.md, "Rollback": an upgrade whose webhook and controller cannot start (an
    unknown flag) fails at its --wait timeout; `helm rollback` returns to the previous revision.
    Throughout, a labelled Job is created every second: none refused (the old webhook replicas stay
    under maxUnavailable 0), each mutated and admitted; earlier admissions unchanged."""
    api = installed.api
    # The upgrade test's Jobs fill the 128 GPUs of this cluster: gone, their quota frees, so every
    # Job of this stream can be admitted.
    for job in api.list(JOBS, TEAM)["items"]:
        if job["metadata"]["name"].startswith("roll-"):
            api.delete(JOBS, job["metadata"]["name"], TEAM, propagationPolicy="Background")
    def upgrade_workloads() -> list[str]:
        return [w["metadata"]["name"] for w in api.list(WORKLOADS, TEAM)["items"]
                if any(o["name"].startswith("roll-") for o in w["metadata"].get("ownerReferences", []))]
    installed.wait(lambda: not upgrade_workloads(), "the upgrade test's Workloads gone", 300)
    before = admissions(api)
    assert before, "admissions made before are there to keep"
    env = dict(os.environ, KUBECONFIG=str(installed.cluster.kubeconfig))
    with stream_of_jobs(api, prefix="back", period=1.0) as submitter:
        failed = subprocess.run([str(installed.helm), "upgrade", "toposched", str(CHART), "--namespace", NS,
                                 "--reuse-values", "--set", f"webhook.extraArgs={{{BROKEN}}}",
                                 "--set", f"controller.extraArgs={{{BROKEN}}}", "--wait", "--timeout", "30s"],
                                capture_output=True, text=True, timeout=600, env=env, check=False)
        assert failed.returncode != 0, f"the broken upgrade succeeded: {failed.stdout}"
        assert any(BROKEN in " ".join(c.get("args", [])) for p in installed.node_pods()
                   for c in p["spec"]["containers"]), "the failed revision's pods were created"
        installed.helm_run("rollback", "toposched", "--namespace", NS, "--wait", "--timeout", "10m")
        time.sleep(3)  # a few more creations against the rolled-back replicas only
    assert submitter.refused == [], submitter.refused
    assert len(submitter.created) >= 10, f"only {len(submitter.created)} Jobs created during the upgrade and rollback"
    print(f"{len(submitter.created)} labelled Jobs created through the failed upgrade and the rollback, none refused")
    for name in submitter.created:
        job = api.get(JOBS, name, TEAM)
        assert job["spec"]["template"]["spec"]["schedulerName"] == "toposched", f"{name} was not mutated"
    status = json.loads(installed.helm_run("status", "toposched", "--namespace", NS, "-o", "json"))
    assert status["info"]["status"] == "deployed", status["info"]
    installed.wait(lambda: not [p for p in installed.node_pods() for c in p["spec"]["containers"]
                                if BROKEN in " ".join(c.get("args", []))], "the failed revision's pods gone", 180)
    for deployment in api.list(DEPLOYMENTS, NS)["items"]:
        assert deployment["status"].get("readyReplicas") == deployment["spec"]["replicas"], deployment["metadata"]
    installed.wait(lambda: all(admitted(workload_of(api, n)) for n in submitter.created),
                   f"the {len(submitter.created)} Jobs created through the rollback admitted", 300)
    after = admissions(api)
    for name, admission in before.items():
        assert after.get(name) == admission, f"admission of {name} changed by the failed upgrade or the rollback"


# ---- helm uninstall ------------------------------------------------------------------------
def doc_block(containing: str) -> str:
    """The bash block of docs/install.md holding ``containing``, as an admin would paste it."""
    text = (ROOT / "docs" / "install.md").read_text()
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        if containing in block:
            return "\n".join(line.removeprefix("  ") for line in block.splitlines())
    raise AssertionError(f"no bash block in docs/install.md holds {containing!r}")


def kueue_objects(api: Api) -> dict[tuple[str, str], list[str]]:
    return {(r.plural, o["metadata"]["name"]): list(o["metadata"].get("finalizers") or [])
            for r in KUEUE_OBJECTS for o in api.list(r)["items"]}


ADMINS_CONFIG: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionConfig",
                 "metadata": {"name": "admins-preemption-config"}, "spec": {}}
def test_helm_uninstall_leaves_no_webhook_that_refuses_jobs(installed: Install) -> None:
    api = installed.api
    api.create(PREEMPTION_CONFIGS, ADMINS_CONFIG)  # an admin's object in a CRD the chart installed
    local_queues = {q["metadata"]["name"] for q in api.list(LOCAL_QUEUES, TEAM)["items"]}
    objects = kueue_objects(api)
    assert any(IN_USE in f for f in objects.values()), f"toposched's controller put no {IN_USE}: {objects}"
    installed.helm_run("uninstall", "toposched", "--namespace", NS, "--wait", "--timeout", "5m")
    for resource in (MUTATING, VALIDATING):
        names = [c["metadata"]["name"] for c in api.list(resource)["items"]]
        assert "toposched-webhook" not in names
    assert [c for c in webhook_checks(api) if not c.ok] == []
    api.create(JOBS, labelled_job("after-uninstall"), TEAM)  # not refused
    installed.wait(lambda: not installed.node_pods(), "the chart's pods gone from the podman node", 120)
    # nothing of the admins' deleted: the CRDs the chart installed (resource-policy: keep) with
    # the admin's object in them, the queues and flavors
    for crd in ("preemptionconfigs.kueue.x-k8s.io", "preemptionlimits.toposched.io"):
        assert not api.get(CRDS, crd)["metadata"].get("deletionTimestamp"), crd
    assert api.get(PREEMPTION_CONFIGS, ADMINS_CONFIG["metadata"]["name"])
    assert {q["metadata"]["name"] for q in api.list(LOCAL_QUEUES, TEAM)["items"]} == local_queues
    assert set(kueue_objects(api)) == set(objects)
    # docs/install.md's clean-up lines, as written: the finalizer goes, every object stays
    env = dict(os.environ, KUBECONFIG=str(installed.cluster.kubeconfig))
    for containing in ('kubectl patch $kind.kueue.x-k8s.io "$name"', "spec.suspend==true"):
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", doc_block(containing)], capture_output=True,
                             text=True, timeout=300, env=env, check=False)
        assert out.returncode == 0, f"{containing}: {out.stdout}{out.stderr}"
    left = kueue_objects(api)
    assert set(left) == set(objects), "every ClusterQueue, ResourceFlavor and Topology is still there"
    assert not [k for k, f in left.items() if IN_USE in f], left
    assert all(left[k] == [f for f in objects[k] if f != IN_USE] for k in objects), "no other finalizer touched"
