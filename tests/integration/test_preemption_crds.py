"""The preemption CRDs on the real API server: toposched's PreemptionLimit
(``deploy/crds/toposched-preemption-limits.yaml``, toposched.io) and Kueue's PreemptionConfig
(``deploy/crds/kueue-preemptionconfig.yaml``, applied on request). Before they are installed
toposched's optional informers read nothing (no error); once applied, an object the schema refuses
is refused by the API server, valid ones are listed by the informers and read by the adapter, the
limit's status subresource takes ``status.counts[].key``, a PreemptionConfig field Kueue v0.20 does
not have is kept by the CRD so that toposched refuses it by name, and PreemptionLimits an earlier
toposched wrote in kueue.x-k8s.io are copied to toposched.io by the migration command."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.adapter.objects import ClusterObjects
from scheduler.adapter.preemption_rules import configured_preemption
from scheduler.commands.migrate_limits import migrate
from scheduler.k8s.informer import LEGACY_PREEMPTION_LIMITS, PREEMPTION_CONFIGS, PREEMPTION_LIMITS, Api, Informer
from tests.integration.test_deploy import KUBECTL

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
CONFIG = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionConfig", "metadata": {"name": "defrag"},
          "spec": {"rules": [{"name": "defrag-smaller",
                              "activationPolicy": {"trigger": "QuotaFeasibleAndInsufficientTopology"},
                              "candidateSelectors": [{"scope": "AnyClusterQueue"}]}]}}
LIMIT = {"apiVersion": "toposched.io/v1alpha1", "kind": "PreemptionLimit", "metadata": {"name": "hourly"},
         "spec": {"scope": "Global", "limit": 3, "limitWindowSeconds": 3600}}
# The PreemptionLimit CRD an earlier toposched installed in Kueue's group (before issue 41).
LEGACY_CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
              "metadata": {"name": "preemptionlimits.kueue.x-k8s.io"},
              "spec": {"group": "kueue.x-k8s.io", "scope": "Cluster",
                       "names": {"kind": "PreemptionLimit", "listKind": "PreemptionLimitList",
                                 "plural": "preemptionlimits", "singular": "preemptionlimit"},
                       "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                                     "subresources": {"status": {}},
                                     "schema": {"openAPIV3Schema": {
                                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
CRD_RESOURCE = client.ApiextensionsV1Api


def _listed(informer: Informer) -> list[dict[str, Any]]:
    informer.relist()
    return list(informer.items())


def _apply(local_cluster: Any, path: str) -> None:
    out = subprocess.run([KUBECTL, f"--kubeconfig={local_cluster.kubeconfig}", "apply", "--server-side",
                          "-f", path], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr


def _create_when_served(api: Api, resource: Any, body: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:  # the new resources are served a moment after the CRDs are established
        try:
            return api.create(resource, body)
        except client.ApiException as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_crds_apply_and_toposched_reads_the_objects(kube_api: client.ApiClient, local_cluster: Any) -> None:
    api = Api(kube_api)
    configs, limits = Informer(api, PREEMPTION_CONFIGS, optional=True), Informer(api, PREEMPTION_LIMITS, optional=True)
    assert _listed(configs) == [] and _listed(limits) == []  # not served yet: empty, no error
    _apply(local_cluster, str(CRDS / "toposched-preemption-limits.yaml"))
    _apply(local_cluster, str(CRDS / "kueue-preemptionconfig.yaml"))
    _create_when_served(api, PREEMPTION_CONFIGS, CONFIG)
    _create_when_served(api, PREEMPTION_LIMITS, LIMIT)
    with pytest.raises(client.ApiException) as refused:
        api.create(PREEMPTION_LIMITS, {**LIMIT, "metadata": {"name": "bad"}, "spec": {**LIMIT["spec"], "limit": -1}})
    assert refused.value.status == 422 and "spec.limit" in str(refused.value.body)
    # a field Kueue v0.20's type lacks is kept by the CRD, so toposched sees it and refuses it by name
    unknown = {**CONFIG, "metadata": {"name": "wider"},
               "spec": {"rules": [{"name": "wider", "activationPolicy": {"trigger": "Always"},
                                   "preemptorClasses": ["urgent"]}]}}
    api.create(PREEMPTION_CONFIGS, unknown)
    read = configured_preemption(ClusterObjects(preemption_configs=_listed(configs), preemption_limits=_listed(limits)))
    assert [p.split(": ")[:2] for p in read.problems] == [["PreemptionConfig wider", "spec.rules[0].preemptorClasses"]]
    assert set(read.rules.configs) == {"defrag"}
    assert [r.trigger for r in read.rules.configs["defrag"].rules] == ["QuotaFeasibleAndInsufficientTopology"]
    assert [(lim.name, lim.scope, lim.limit, lim.window_s) for lim in read.rules.limits] == [
        ("hourly", "Global", 3, 3600.0)]
    patched = api.merge_patch(PREEMPTION_LIMITS, "hourly", {"status": {"counts": [{"key": "Global", "count": 1}]}},
                              subresource="status")
    assert patched["status"]["counts"] == [{"key": "Global", "count": 1}]


def test_limits_an_earlier_toposched_wrote_in_kueues_group_are_copied(kube_api: client.ApiClient,
                                                                       local_cluster: Any) -> None:
    api = Api(kube_api)
    _apply(local_cluster, str(CRDS / "toposched-preemption-limits.yaml"))
    try:
        CRD_RESOURCE(kube_api).create_custom_resource_definition(LEGACY_CRD)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    old = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionLimit", "metadata": {"name": "nightly"},
           "spec": {"scope": "PreemptedWorkload", "limit": 1, "limitWindowSeconds": 86400}}
    _create_when_served(api, LEGACY_PREEMPTION_LIMITS, old)
    lines = migrate(api, dry_run=False)
    assert "PreemptionLimit nightly (kueue.x-k8s.io/v1alpha1): copied to toposched.io/v1alpha1 with its spec; " \
           "the old object is left in place" in lines
    copied = api.get(PREEMPTION_LIMITS, "nightly")
    assert copied["spec"] == old["spec"]
    assert api.get(LEGACY_PREEMPTION_LIMITS, "nightly")["spec"] == old["spec"]  # left in place
    assert any(line.startswith("PreemptionLimit nightly") and "already in toposched.io" in line
               for line in migrate(api, dry_run=False))
