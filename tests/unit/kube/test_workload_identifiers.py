"""Kueue's WorkloadIdentifierAnnotations in the controller (beta, on since v0.18, so under
``--kueue-version v0.19``): a StatefulSet's pods are tied to their group's prebuilt Workload by
annotations (``kueue.x-k8s.io/pod-group-name``, ``kueue.x-k8s.io/prebuilt-workload-name``), not
labels, and a plain pod group may be declared by the annotation; under v0.17 both are labels
and the annotation names no group.

Restates Kueue v0.19.2: ``pkg/controller/jobs/statefulset/statefulset_pod_reconciler_test.go``
(the WorkloadIdentifierAnnotations cases: the pod gets the group-name and prebuilt-workload
annotations) and ``pkg/controller/jobs/pod/pod_controller_test.go`` (pod groups named by
``GroupNameAnnotation`` under the gate make one group Workload).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.adapter.kinds.statefulset import STATEFULSET
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates, KueueConfig
from scheduler.core.kueue_names import LABEL_POD_GROUP_NAME, LABEL_PREBUILT_WORKLOAD
from scheduler.core.topology_request import ANN_REQUIRED
from scheduler.k8s.informer import PODS
from scheduler.kube import status as st
from scheduler.kube.jobs import resource_of
from tests.unit.kube.test_new_kinds_phases import Q, create, gated_pod, gates, pod_template, reconcile, workloads
from tests.unit.kube.test_phases import BLOCK, NS, Harness

KEY_GROUP, KEY_PREBUILT = LABEL_POD_GROUP_NAME, LABEL_PREBUILT_WORKLOAD  # the same keys in both forms


def harness(release: str) -> Harness:
    h = Harness()
    h.rebuild(config=KueueConfig(feature_gates=FeatureGates(release=release)))
    return h


def statefulset(h: Harness) -> list[dict[str, Any]]:
    sts = create(h, resource_of(STATEFULSET), {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": NS, "labels": dict(Q)},
        "spec": {"replicas": 2, "template": copy.deepcopy(pod_template({ANN_REQUIRED: BLOCK}))}})
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": sts["metadata"]["uid"],
             "controller": True}
    for i in range(2):
        pod = gated_pod(f"web-{i}", {"apps.kubernetes.io/pod-index": str(i)},
                        {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"}, owner)
        pod["metadata"].pop("finalizers")
        create(h, PODS, pod)
    reconcile(h, 4)
    return [h.api.get(PODS, f"web-{i}", NS) for i in range(2)]


def test_under_v019_a_statefulsets_pods_name_their_workload_by_annotation() -> None:
    h = harness(KUEUE_V019)
    pods = statefulset(h)
    [wl] = workloads(h)
    name = wl["metadata"]["name"]
    for pod in pods:
        assert pod["metadata"]["annotations"][KEY_GROUP] == name
        assert pod["metadata"]["annotations"][KEY_PREBUILT] == name
        assert KEY_GROUP not in pod["metadata"]["labels"] and KEY_PREBUILT not in pod["metadata"]["labels"]
    assert st.condition_true(wl, st.ADMITTED) and all(gates(p) == [] for p in pods)  # found and released


def test_under_v017_they_stay_labels() -> None:
    pods = statefulset(harness(KUEUE_V017))
    assert all(KEY_GROUP in p["metadata"]["labels"] and KEY_PREBUILT in p["metadata"]["labels"] for p in pods)
    assert all(KEY_GROUP not in p["metadata"]["annotations"] for p in pods)


@pytest.mark.parametrize(("release", "names"), [(KUEUE_V019, ["grp"]), (KUEUE_V017, ["pod-g-0", "pod-g-1"])])
def test_a_pod_group_declared_by_annotation(release: str, names: list[str]) -> None:
    """Under v0.19 one group Workload; under v0.17 the annotation names no group (each pod its own)."""
    h = harness(release)
    count = {"kueue.x-k8s.io/pod-group-total-count": "2", KEY_GROUP: "grp"}
    for name in ("g-0", "g-1"):
        create(h, PODS, gated_pod(name, Q, count))
    reconcile(h, 3)
    got = sorted(wl["metadata"]["name"] for wl in workloads(h))
    assert [n if n == "grp" else n.rsplit("-", 1)[0] for n in got] == names
