"""The podman node: a Node of the local control plane whose pods really run, as containers.

KWOK's fake nodes run nothing (a Deployment on them shows 2/2 Running while no process exists).
``toposched dev up --bare`` adds this node so that what an admin installs with the Helm chart
runs for real: the node registers a Node (label ``toposched.dev/node-pool=system``; capacity 8
CPUs whatever the machine has, so the chart's requests fit: requests are bookkeeping here, memory
limits are enforced), renews its Lease in ``kube-node-lease`` as a kubelet does, and runs every
pod bound to it with podman (podworker.py): its own network namespace and IP on podman's bridge,
the ServiceAccount token from the TokenRequest API, Secrets and ConfigMaps as files, probes
from this machine to the pod's IP. The API server reaches a pod at that IP (webhooks through
their Service: kube-apiserver runs with ``--enable-aggregator-routing`` and picks a ready
endpoint of the Service's EndpointSlices, as kube-proxy would route its ClusterIP), and pods
reach the API server through the relay (apirelay.py).

Differences from a kubelet (docs/install.md, "The podman node"): one node, httpGet probes only,
no sidecar or ephemeral containers or host namespaces, no CPU limits, only the ``kubernetes`` Service
in the environment, and the node acts with the admin's credentials (no NodeRestriction).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import platform
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes.client import ApiException

from scheduler.devcluster import podman as podman_cli
from scheduler.devcluster import processes
from scheduler.devcluster.apirelay import ApiRelay
from scheduler.devcluster.apply import wait_nodes_settled
from scheduler.devcluster.binaries import K8S_VERSION
from scheduler.devcluster.controlplane import LocalCluster
from scheduler.devcluster.peers import wait_http_ready
from scheduler.devcluster.podspec import NODE_LABEL
from scheduler.devcluster.podvolumes import VolumeWriter, remove_volumes
from scheduler.devcluster.podworker import NodeContext, PodWorker
from scheduler.http.probes import serve_health
from scheduler.k8s.client import api_client
from scheduler.k8s.informer import LEASES, NODES, PODS, Api

log = logging.getLogger(__name__)

NODE_NAME = "podman-0"
PROCESS_NAME = "podman-node"  # in the cluster's state; its directory holds containers.conf and pod volumes
POOL_LABEL = "toposched.dev/node-pool"  # the chart's nodeSelector on this machine: {POOL_LABEL: system}
CPUS = "8"
LEASE_S = 40
RENEW_S = 10.0
SYNC_S = 1.0


def memory_bytes() -> int:
    """The machine's memory: the node's capacity and allocatable (the in-memory emptyDirs' cap)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def node_object(name: str, gateway: str) -> dict[str, Any]:
    memory_kib = memory_bytes() // 1024
    resources = {"cpu": CPUS, "memory": f"{memory_kib}Ki", "pods": "110",
                 "ephemeral-storage": f"{shutil.disk_usage('/').total // 1024}Ki"}
    now = _now()
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": _arch(),
            POOL_LABEL: "system", NODE_LABEL: "true"}},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": now,
                            "lastTransitionTime": now} for t, s, r, m in (
                ("Ready", "True", "KubeletReady", "podman node is posting ready status"),
                ("MemoryPressure", "False", "KubeletHasSufficientMemory", "podman node has sufficient memory"),
                ("DiskPressure", "False", "KubeletHasNoDiskPressure", "podman node has no disk pressure"),
                ("PIDPressure", "False", "KubeletHasSufficientPID", "podman node has sufficient PID available"))],
            "addresses": [{"type": "InternalIP", "address": gateway}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": K8S_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": _arch(), "containerRuntimeVersion": "podman://",
                         "kernelVersion": platform.release(), "osImage": "toposched podman node",
                         "machineID": "", "systemUUID": "", "bootID": ""},
        },
    }


class PodmanNode:
    def __init__(self, kubeconfig: Path, state_dir: Path, api_port: int, name: str = NODE_NAME) -> None:
        self.api = Api(api_client(kubeconfig))
        self.name = name
        self.state_dir = state_dir
        self.api_port = api_port
        self.podman = podman_cli.Podman(podman_cli.write_conf(state_dir / "containers.conf"))
        self.workers: dict[str, PodWorker] = {}
        self.last_sync = 0.0
        self.relay: ApiRelay | None = None

    def run(self, stop: threading.Event, health_port: int) -> None:
        self.sweep()
        gateway, subnet = self.podman.gateway()
        self.relay = ApiRelay((gateway, self.api_port), ("127.0.0.1", self.api_port), subnet).start()
        self._register(gateway)
        ctx = NodeContext(self.api, self.podman, VolumeWriter(self.api, self.state_dir / "pods", memory_bytes()),
                          self.name, gateway, self.api_port)
        threading.Thread(target=self._heartbeat, args=(stop,), name="node-lease", daemon=True).start()
        server = serve_health("127.0.0.1", health_port, lambda: time.monotonic() - self.last_sync < 10 * SYNC_S)
        log.info("podman node %s up: pods on %s, API server relayed at %s:%d", self.name, subnet, gateway,
                 self.api_port)
        try:
            while not stop.is_set():
                try:
                    self._sync(ctx)
                    self.last_sync = time.monotonic()
                except (ApiException, OSError) as exc:
                    log.warning("pod sync failed: %s", exc)
                stop.wait(SYNC_S)
        finally:
            server.shutdown()
            self.relay.stop()
            self.sweep()

    def sweep(self) -> None:
        """Remove every podman pod of this node and their volumes (left by an earlier run, or at
        shutdown)."""
        self.podman.remove_pod(*self.podman.pods(f"{NODE_LABEL}={self.name}"))
        remove_volumes(self.state_dir / "pods")

    # ---- the Node ---------------------------------------------------------------------------
    def _register(self, gateway: str) -> None:
        body = node_object(self.name, gateway)
        try:
            self.api.create(NODES, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.api.merge_patch(NODES, self.name, {"metadata": {"labels": body["metadata"]["labels"]}})
            self.api.merge_patch(NODES, self.name, {"status": body["status"]}, subresource="status")
        self._renew()

    def _renew(self) -> None:
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.name, "namespace": "kube-node-lease"},
                 "spec": {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_S,
                          "renewTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
        try:
            self.api.merge_patch(LEASES, self.name, {"spec": lease["spec"]}, namespace="kube-node-lease")
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.api.create(LEASES, lease, namespace="kube-node-lease")

    def _heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(RENEW_S):
            try:
                self._renew()
            except (ApiException, OSError) as exc:
                log.warning("node lease renewal failed: %s", exc)

    # ---- pods ------------------------------------------------------------------------------
    def _sync(self, ctx: NodeContext) -> None:
        listed = self.api.list(PODS, fieldSelector=f"spec.nodeName={self.name}").get("items") or []
        seen = set()
        for pod in listed:
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            if uid in self.workers:
                self.workers[uid].update(pod)
            elif pod["metadata"].get("deletionTimestamp"):
                self._forget(pod)  # deleted before it ever ran here
            elif (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                log.info("pod %s/%s bound here: starting", pod["metadata"]["namespace"], pod["metadata"]["name"])
                self.workers[uid] = PodWorker(ctx, pod).launch()
        for uid, worker in list(self.workers.items()):
            if uid not in seen:
                worker.vanish()
                if worker.done.is_set():
                    del self.workers[uid]

    def _forget(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            self.api.request("DELETE", PODS.path(meta["namespace"], meta["name"]),
                             body={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise


def start_podman_node(cluster: LocalCluster, health_port: int, timeout_s: float = 120) -> processes.Started:
    """Start the podman node as a process of ``cluster`` (``dev down`` stops it, which removes
    its containers) and wait until it answers and its Node is Ready and untainted."""
    url = f"http://127.0.0.1:{health_port}/readyz"
    proc = cluster.start_process(PROCESS_NAME, [sys.executable, "-m", "scheduler.cli", "dev", "node",
                                                "--dir", str(cluster.dir), "--health-port", str(health_port)],
                                 health=url)
    wait_http_ready(url, proc, timeout_s)
    wait_nodes_settled(cluster.api_client(), [NODE_NAME], timeout_s=timeout_s)
    return proc


def sweep(cluster: LocalCluster) -> None:
    """Remove the podman node's containers if it died without doing so (``dev down``)."""
    if shutil.which("podman") is None or not (cluster.dir / PROCESS_NAME).is_dir():
        return
    cli = podman_cli.Podman(cluster.dir / PROCESS_NAME / "containers.conf")
    cli.remove_pod(*cli.pods(f"{NODE_LABEL}={NODE_NAME}"))
    remove_volumes(cluster.dir / PROCESS_NAME / "pods")


def _arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
