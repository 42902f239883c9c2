"""The release the topology ungater writes is one the real kube-apiserver accepts on a gated pod:
the ``kueue.x-k8s.io/topology`` gate removed (other gates kept) and the domain's labels added to
the node selector in one JSON merge patch (what the writer sends: the gate list goes whole; a
strategic merge patch would merge the list by name and remove nothing); adding a gate back is
refused (gates only ever go)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from scheduler.k8s.informer import PODS, Api
from scheduler.kube.topology_ungater import release_patch

L3 = "topology.k8s.aws/network-node-layer-3"


def test_release_patch_is_accepted_on_a_gated_pod(kube_api: Any, namespace: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gated", "namespace": namespace},
           "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/topology"}, {"name": "other"}],
                    "nodeSelector": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"},
                    "containers": [{"name": "c", "image": "busybox"}]}}
    api = Api(kube_api)
    created = api.create(PODS, pod, namespace)
    patched = api.merge_patch(PODS, "gated", release_patch(created, {L3: "nn-1"}), namespace)
    assert patched["spec"]["schedulingGates"] == [{"name": "other"}]
    assert patched["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "ml.p5.48xlarge", L3: "nn-1"}
    with pytest.raises(client.ApiException) as refused:
        api.merge_patch(PODS, "gated", {"spec": {"schedulingGates": [
            {"name": "other"}, {"name": "kueue.x-k8s.io/topology"}]}}, namespace)
    assert refused.value.status == 422


def test_releasing_the_last_gate_makes_the_pod_schedulable(kube_api: Any, namespace: str) -> None:
    api = Api(kube_api)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "last", "namespace": namespace},
           "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
                    "containers": [{"name": "c", "image": "busybox"}]}}
    created = api.create(PODS, pod, namespace)
    patched = api.merge_patch(PODS, "last", release_patch(created, {L3: "nn-2"}), namespace)
    assert "schedulingGates" not in patched["spec"] and patched["spec"]["nodeSelector"] == {L3: "nn-2"}
