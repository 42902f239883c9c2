"""Cached copies carry no ``metadata.managedFields`` (scheduler/k8s/informer.py, on the in-memory
API): listed, watched and written-through objects alike, as Kueue's cache strips them (issue 42,
the doors' memory)."""

from __future__ import annotations

import copy
import time
from typing import Any

from scheduler.extender.workload_view import without_pod_templates, workload_view
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import PODS, WORKLOADS, Informer

MANAGED = [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}}]


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "labels": {"team": "a"}, "managedFields": MANAGED},
            "spec": {"containers": [{"name": "main", "image": "x"}]}}


def test_listed_watched_and_written_through_copies_drop_managed_fields() -> None:
    api = FakeApi()
    api.create(PODS, pod("listed"), "team-a")
    informer = Informer(api, PODS)
    seen: list[dict[str, Any]] = []
    informer.add_handler(lambda _kind, obj, _old: seen.append(obj))
    informer.start()
    try:
        deadline = time.monotonic() + 5
        while not informer.synced.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        api.create(PODS, pod("watched"), "team-a")
        while len(informer.items()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        informer.put(pod("written"))
        cached = {o["metadata"]["name"]: o for o in informer.items()}
        assert sorted(cached) == ["listed", "watched", "written"]
        assert all("managedFields" not in o["metadata"] for o in [*cached.values(), *seen])
        assert cached["watched"]["metadata"]["labels"] == {"team": "a"}  # the rest is kept
    finally:
        informer.stop()


def test_an_informer_transform_keeps_only_what_its_door_reads() -> None:
    """The extender's Workloads are kept without pod templates (extender/workload_view.py): the
    views it builds from them are the same with or without."""
    hosts = {"individual": {"roots": ["node-a", "node-b"]}}
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "job-a", "namespace": "team-a"},
                "spec": {"podSets": [{"name": "main", "count": 2,
                                      "topologyRequest": {"preferred": "topology.k8s.aws/network-node-layer-3"},
                                      "template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}}]},
                "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
                    {"name": "main", "count": 2, "flavors": {"nvidia.com/gpu": "p5"},
                     "topologyAssignment": {"levels": ["kubernetes.io/hostname"],
                                            "slices": [{"domainCount": 2, "podCounts": {"universal": 1},
                                                        "valuesPerLevel": [hosts]}]}}]},
                           "conditions": [{"type": "Admitted", "status": "True"}]}}
    before = workload_view(copy.deepcopy(workload))
    api = FakeApi()
    api.create(WORKLOADS, copy.deepcopy(workload), "team-a")
    informer = Informer(api, WORKLOADS, transform=without_pod_templates)
    informer.relist()
    [kept] = informer.items()
    assert "template" not in kept["spec"]["podSets"][0] and kept["spec"]["podSets"][0]["count"] == 2
    assert before.pod_sets and not before.errors  # a decoded assignment, not only an error
    assert workload_view(kept) == before
