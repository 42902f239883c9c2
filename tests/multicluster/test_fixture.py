"""The two-plane fixture itself: the manager's Kueue connects to each worker through its
kubeconfig Secret (MultiKueueCluster Active) and the MultiKueue AdmissionCheck is Active."""

from __future__ import annotations

from typing import Any

from scheduler.k8s.informer import Resource
from tests.multicluster.conftest import MultiCluster

MK_CLUSTERS = Resource("kueue.x-k8s.io", "v1beta2", "multikueueclusters", namespaced=False)
ADMISSION_CHECKS = Resource("kueue.x-k8s.io", "v1beta2", "admissionchecks", namespaced=False)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions") or () if c.get("type") == kind), None)


def test_manager_reaches_a_toposched_and_a_kueue_worker(multicluster_factory: Any) -> None:
    mc: MultiCluster = multicluster_factory({"topo": "toposched", "kueue": "kueue"})
    api = mc.manager.api
    for name in mc.workers:
        mc.manager.wait(lambda n=name: (condition(api.get(MK_CLUSTERS, n), "Active") or {}).get("status")
                        == "True", timeout_s=90, what=f"MultiKueueCluster {name} Active")
    mc.manager.wait(lambda: (condition(api.get(ADMISSION_CHECKS, "multikueue"), "Active") or {}).get("status")
                    == "True", timeout_s=60, what="AdmissionCheck multikueue Active")
