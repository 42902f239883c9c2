"""Pods of admitted workloads left on a deleted node (scheduler/kube/gone_nodes.py), on the
in-memory API server: deleted at once (grace period 0) once the Node object is gone and no
kubelet can run them (its Lease in kube-node-lease expired, or gone long enough for a running
kubelet to have recreated it); left to Kubernetes' pod GC while a kubelet may still run them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from scheduler.core.workload import ANN_WORKLOAD
from scheduler.k8s.informer import LEASES, NODES, PODS
from scheduler.kube.gone_nodes import NODE_LEASE_NAMESPACE, REASON
from tests.unit.kube.test_phases import NS, Harness, assigned_hosts, node

SPARE = {"n0": "n1", "n1": "n0", "n2": "n3", "n3": "n2"}


def run_pod(harness: Harness, name: str, node: str, workload: str | None) -> None:
    annotations = {ANN_WORKLOAD: workload} if workload else {}
    harness.api.create(PODS, {"metadata": {"name": name, "namespace": NS, "annotations": annotations},
                              "spec": {"nodeName": node, "containers": []}, "status": {"phase": "Running"}}, NS)


def lease(harness: Harness, node: str, renewed_s_ago: float, duration_s: int = 40) -> None:
    renewed = harness.clock() - dt.timedelta(seconds=renewed_s_ago)
    body = {"metadata": {"name": node, "namespace": NODE_LEASE_NAMESPACE},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": duration_s,
                     "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
    try:
        harness.api.get(LEASES, node, NODE_LEASE_NAMESPACE)
        harness.api.replace(LEASES, body)
    except Exception:  # noqa: BLE001 - not there yet
        harness.api.create(LEASES, body, NODE_LEASE_NAMESPACE)


def pod_names(harness: Harness) -> set[str]:
    return {p["metadata"]["name"] for p in harness.api.objects(PODS, NS)}


def delete_node(harness: Harness) -> tuple[dict[str, Any], str]:
    wl = harness.admitted("train", 1)
    (failed,) = assigned_hosts(wl)
    run_pod(harness, "train-0", failed, wl["metadata"]["name"])
    harness.api.delete(NODES, failed)
    harness.sync()
    return wl, failed


def test_with_its_lease_gone_long_enough_the_pod_is_deleted_after_its_slot_moved(harness: Harness) -> None:
    wl, failed = delete_node(harness)
    harness.controller.node_failures.run()
    assert assigned_hosts(harness.workload()) == {SPARE[failed]: 1}  # the slot moves at once
    assert "train-0" in pod_names(harness)  # the Lease just went: a running kubelet would recreate it
    harness.clock.advance(10)
    harness.controller.node_failures.run()
    assert "train-0" in pod_names(harness)
    harness.clock.advance(6)
    harness.controller.node_failures.run()
    assert "train-0" not in pod_names(harness)
    assert ("pods", "train-0", {"gracePeriodSeconds": 0}) in harness.api.delete_options
    events = [e for e in harness.events_of(REASON)]
    assert len(events) == 1 and events[0]["involvedObject"]["name"] == wl["metadata"]["name"]
    assert events[0]["message"] == (
        f"Deleted pod train-0 bound to node {failed}: the Node object is gone and its Lease "
        f"kube-node-lease/{failed} has been gone for 16s (a running kubelet recreates it within its renew "
        "interval), so no kubelet runs it; its job controller creates it again on the node that replaced it")


def test_an_expired_lease_is_evidence_at_once_a_renewed_one_keeps_the_pod(harness: Harness) -> None:
    wl, failed = delete_node(harness)
    lease(harness, failed, renewed_s_ago=5)  # a kubelet renewed it 5 s ago: it may still run the pod
    for _ in range(4):
        harness.controller.node_failures.run()
        harness.clock.advance(20)
        lease(harness, failed, renewed_s_ago=5)
    assert "train-0" in pod_names(harness)
    lease(harness, failed, renewed_s_ago=41)  # nobody renewed it for a whole lease duration
    harness.controller.node_failures.run()
    assert "train-0" not in pod_names(harness)
    (event,) = harness.events_of(REASON)
    assert f"its Lease kube-node-lease/{failed} was last renewed 41s ago (its duration is 40s)" in event["message"]


def test_only_pods_of_workloads_holding_quota_on_nodes_gone_from_the_api_server(harness: Harness) -> None:
    wl, failed = delete_node(harness)
    other = next(n for n in ("n0", "n1", "n2", "n3") if n not in (failed, SPARE[failed]))
    run_pod(harness, "unmanaged", failed, None)
    run_pod(harness, "someone-elses", failed, "not-a-workload")
    run_pod(harness, "on-a-live-node", other, wl["metadata"]["name"])
    lease(harness, failed, renewed_s_ago=100)
    harness.sync()
    harness.controller.node_failures.run()
    assert pod_names(harness) == {"unmanaged", "someone-elses", "on-a-live-node"}  # train-0 deleted


def test_a_node_the_cache_missed_but_the_api_server_has_keeps_its_pods(harness: Harness) -> None:
    wl, failed = delete_node(harness)
    harness.controller.node_failures.run()  # recorded as deleted
    harness.api.create(NODES, node(failed, "b9"))  # back, before the watch tells the cache
    lease(harness, failed, renewed_s_ago=100)
    harness.controller.node_failures.run()
    assert "train-0" in pod_names(harness) and harness.events_of(REASON) == []
    harness.api.delete(NODES, failed)  # gone for good
    harness.controller.node_failures.run()
    assert "train-0" not in pod_names(harness)


def test_nothing_is_deleted_while_not_leading_or_when_turned_off(harness: Harness) -> None:
    wl, failed = delete_node(harness)
    lease(harness, failed, renewed_s_ago=100)
    harness.leading = False
    harness.controller.node_failures.run()
    assert "train-0" in pod_names(harness)
    harness.leading = True
    releaser, harness.controller.node_failures.gone_pods = harness.controller.node_failures.gone_pods, None
    harness.controller.node_failures.run()  # --deleted-node-lease-absent-seconds -1: the pod GC's
    assert "train-0" in pod_names(harness)
    harness.controller.node_failures.gone_pods = releaser
    harness.controller.node_failures.run()
    assert "train-0" not in pod_names(harness)


def test_a_stale_copy_of_a_deleted_pod_is_neither_deleted_nor_reported_again(harness: Harness) -> None:
    wl, failed = delete_node(harness)
    stale = harness.api.get(PODS, "train-0", NS)
    lease(harness, failed, renewed_s_ago=100)
    harness.controller.node_failures.run()
    assert "train-0" not in pod_names(harness)
    harness.cache.pods.put(stale)  # a watch event from before the deletion, arriving after it
    harness.controller.node_failures.run()
    assert [d for d in harness.api.delete_options if d[0] == "pods"] == [("pods", "train-0", {"gracePeriodSeconds": 0})]
    (event,) = harness.events_of(REASON)
    assert event["count"] == 1
