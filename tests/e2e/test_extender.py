"""The extender with the real kube-scheduler, with either binder: the ``toposched`` profile
calls our filter (kube-scheduler binds, the default) or filter, prioritize and bind over HTTP
(``--binder extender``); every pod of an admitted Workload lands on its assigned nodes,
never more than assigned per node; an unhealthy assigned node gets no pod; pods of other
schedulers still schedule (through the extender's pass-through)."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from scheduler.core.assignment import encode_v1beta2
from scheduler.core.nodes import HOSTNAME_LABEL
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement
from scheduler.devcluster.apply import create_nodes, wait_nodes_settled
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, default_scheduler_config, free_port
from scheduler.devcluster.processes import stop
from scheduler.extender.config import BINDERS, toposched_scheduler_config
from scheduler.k8s.informer import WORKLOADS, Api
from scheduler.kube.status import admit_status

L3 = "topology.k8s.aws/network-node-layer-3"
HEALTH = "sagemaker.amazonaws.com/node-health-status"


def _wait(predicate: Any, timeout_s: float = 60, interval_s: float = 0.3, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"{what} not met within {timeout_s}s")


def _node(name: str, layer3: str, health: str = "Schedulable") -> dict[str, Any]:
    capacity = {"cpu": "192", "memory": "2048Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                HOSTNAME_LABEL: name,
                "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
                "topology.k8s.aws/network-node-layer-1": "nn-ext-l1",
                "topology.k8s.aws/network-node-layer-2": "nn-ext-l2",
                L3: layer3,
                HEALTH: health,
            },
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


@dataclass(frozen=True)
class RunningExtender:
    url: str
    binder: str


@pytest.fixture(scope="module", params=BINDERS)
def extender(request: pytest.FixtureRequest, local_cluster: Any) -> Iterator[RunningExtender]:
    """The extender as its own process with the binder of the param, and kube-scheduler
    reconfigured to call it; restored after."""
    binder = request.param
    port = free_port()
    proc = local_cluster.start_process(
        "toposched-extender",
        [
            sys.executable,
            "-m",
            "scheduler.cli",
            "extender",
            "--kubeconfig",
            str(local_cluster.kubeconfig),
            "--port",
            str(port),
            "--binder",
            binder,
        ],
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return bool(_get(f"{base}/readyz").get("ready"))
        except Exception:
            return False

    try:
        _wait(ready, 60, what=f"extender ready (log {proc.log})")
        parts = toposched_scheduler_config(port, binder=binder)
        kubeconfig = local_cluster.dir / "scheduler.kubeconfig"
        local_cluster.reconfigure_scheduler(
            default_scheduler_config(kubeconfig, [parts["profile"]], [parts["extender"]])
        )
        yield RunningExtender(base, binder)
    finally:
        # Later tests must not depend on an extender that is gone (ignorable=false).
        local_cluster.reconfigure_scheduler(
            default_scheduler_config(local_cluster.dir / "scheduler.kubeconfig")
        )
        stop(proc)
        local_cluster.state.processes.pop("toposched-extender", None)


def _pod(
    name: str, namespace: str, *, workload: str | None, scheduler: str = "toposched", gpus: int = 1
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if workload:
        meta["annotations"] = {"kueue.x-k8s.io/workload": workload}
        meta["labels"] = {"kueue.x-k8s.io/podset": "main"}
    res = {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": scheduler,
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": res}],
        },
    }


def _admitted_workload(api: Api, namespace: str, name: str, hosts: dict[str, int]) -> None:
    count = sum(hosts.values())
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"nvidia.com/gpu": "1"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
    wl = api.create(WORKLOADS, body, namespace)
    placement = PodSetPlacement(
        "main", count, (HOSTNAME_LABEL,), tuple(DomainAssignment((h,), c) for h, c in sorted(hosts.items()))
    )
    psa = {
        "name": "main",
        "flavors": {"nvidia.com/gpu": "rf"},
        "resourceUsage": {"nvidia.com/gpu": str(count)},
        "count": count,
        "topologyAssignment": encode_v1beta2(placement),
    }
    status = admit_status(wl, "cq", [psa], dt.datetime.now(dt.UTC))
    api.merge_patch(WORKLOADS, name, {"status": status}, namespace, subresource="status")


def test_pods_land_on_assigned_healthy_nodes_only(
    kube_api: client.ApiClient, namespace: str, extender: RunningExtender
) -> None:
    api, core = Api(kube_api), client.CoreV1Api(kube_api)
    x = [f"ext-{namespace}-x{i}" for i in range(3)]
    y = [f"ext-{namespace}-y{i}" for i in range(3)]
    sick = f"ext-{namespace}-sick"
    nodes = [_node(n, f"nn-{namespace}-x") for n in x] + [_node(n, f"nn-{namespace}-y") for n in y]
    nodes.append(_node(sick, f"nn-{namespace}-y", health="UnschedulablePendingReplacement"))
    create_nodes(kube_api, nodes, FAKE_NODE_LABEL)
    all_names = {n["metadata"]["name"] for n in nodes}
    wait_nodes_settled(kube_api, all_names)
    # 10 pods: 3+3 in layer-3 x, 2+1 in y, 1 on the unhealthy node; x2, y2 are not assigned.
    assignment = {x[0]: 3, x[1]: 3, y[0]: 2, y[1]: 1, sick: 1}
    _admitted_workload(api, namespace, "wl", assignment)
    before = _get(f"{extender.url}/stats")["requests"]
    names = [f"w-{i}" for i in range(11)]  # one more pod than the assignment holds
    for name in names:
        core.create_namespaced_pod(namespace, _pod(name, namespace, workload="wl"))
    # A pod of the default scheduler that requests a GPU goes through the extender (pass-through)
    # and one that requests none never reaches it; both schedule.
    core.create_namespaced_pod(
        namespace, _pod("plain-gpu", namespace, workload=None, scheduler="default-scheduler")
    )
    core.create_namespaced_pod(
        namespace, _pod("plain-cpu", namespace, workload=None, scheduler="default-scheduler", gpus=0)
    )

    def placed() -> dict[str, str]:
        return {
            p.metadata.name: p.spec.node_name
            for p in core.list_namespaced_pod(namespace).items
            if p.spec.node_name
        }

    def all_bound() -> dict[str, str] | None:
        p = placed()
        ours = [n for n in p if n.startswith("w-")]
        return p if len(ours) >= 9 and "plain-gpu" in p and "plain-cpu" in p else None

    _wait(all_bound, 90, what="9 workload pods + 2 plain pods bound")
    time.sleep(3)  # give a wrong placement the chance to happen
    got = placed()
    per_node: dict[str, int] = {}
    for name, node in got.items():
        if name.startswith("w-"):
            per_node[node] = per_node.get(node, 0) + 1
    assert per_node == {x[0]: 3, x[1]: 3, y[0]: 2, y[1]: 1}, per_node  # exactly as assigned, sick gets none
    assert sick not in per_node and x[2] not in per_node and y[2] not in per_node
    pending = sorted(set(names) - set(got))
    assert len(pending) == 2, pending

    # The scheduler reports why: our reasons reach the pods' FailedScheduling events.
    def reasons() -> str:
        events = core.list_namespaced_event(namespace).items
        return " ".join(
            e.message or ""
            for e in events
            if e.reason == "FailedScheduling" and e.involved_object.name in pending
        )

    text = _wait(
        lambda: (r := reasons()) and "UnschedulablePendingReplacement" in r and r,
        30,
        what="FailedScheduling events naming the unhealthy node",
    )
    assert "are taken" in text or "not in the topology assignment" in text

    after = _get(f"{extender.url}/stats")["requests"]
    assert after["filter"]["count"] - (before.get("filter") or {}).get("count", 0) >= 11
    binds = after.get("bind", {}).get("count", 0) - (before.get("bind") or {}).get("count", 0)
    if extender.binder == "extender":
        assert binds >= 10  # 9 ours + plain-gpu
    else:
        assert binds == 0  # kube-scheduler bound every pod; the filter reserved their slots

    # Freeing a slot (a pod finishes) lets a pending pod take exactly that slot.
    victim = next(n for n, node in got.items() if node == y[1])
    core.delete_namespaced_pod(victim, namespace, grace_period_seconds=0)
    _wait(
        lambda: (
            sum(1 for n, node in placed().items() if n.startswith("w-") and node == y[1]) == 1
            and victim not in placed()
        ),
        60,
        what="a pending pod takes the freed slot on y1",
    )
    final = placed()
    assert sum(1 for n in final if n.startswith("w-")) == 9
