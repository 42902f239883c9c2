"""toposched's definitions of Kueue's alpha PreemptionConfig / PreemptionLimit
(``deploy/crds/kueue-alpha-preemption.yaml``) on the real API server: before they are installed
toposched's optional informers read nothing (no error); once applied, an object the schema
refuses is refused by the API server, valid ones are listed by the informers and read by the
adapter, and the limit's status subresource takes ``status.counts``."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.adapter.objects import ClusterObjects
from scheduler.adapter.preemption_rules import configured_preemption
from scheduler.k8s.informer import PREEMPTION_CONFIGS, PREEMPTION_LIMITS, Api, Informer
from tests.integration.test_deploy import KUBECTL

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds" / "kueue-alpha-preemption.yaml"
CONFIG = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionConfig", "metadata": {"name": "defrag"},
          "spec": {"rules": [{"name": "defrag-smaller",
                              "activationPolicy": {"trigger": "QuotaFeasibleAndInsufficientTopology"},
                              "candidateSelectors": [{"scope": "AnyClusterQueue"}]}]}}
LIMIT = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionLimit", "metadata": {"name": "hourly"},
         "spec": {"scope": "Global", "limit": 3, "limitWindowSeconds": 3600}}


def _listed(informer: Informer) -> list[dict[str, Any]]:
    informer.relist()
    return list(informer.items())


def test_crds_apply_and_toposched_reads_the_objects(kube_api: client.ApiClient, local_cluster: Any) -> None:
    api = Api(kube_api)
    configs, limits = Informer(api, PREEMPTION_CONFIGS, optional=True), Informer(api, PREEMPTION_LIMITS, optional=True)
    assert _listed(configs) == [] and _listed(limits) == []  # not served yet: empty, no error
    out = subprocess.run([KUBECTL, f"--kubeconfig={local_cluster.kubeconfig}", "apply", "--server-side",
                          "-f", str(CRDS)], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    deadline = time.monotonic() + 30
    while True:  # the new resources are served a moment after the CRDs are established
        try:
            api.create(PREEMPTION_CONFIGS, CONFIG)
            break
        except client.ApiException as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    api.create(PREEMPTION_LIMITS, LIMIT)
    with pytest.raises(client.ApiException) as refused:
        api.create(PREEMPTION_LIMITS, {**LIMIT, "metadata": {"name": "bad"}, "spec": {**LIMIT["spec"], "limit": -1}})
    assert refused.value.status == 422 and "spec.limit" in str(refused.value.body)
    read = configured_preemption(ClusterObjects(preemption_configs=_listed(configs), preemption_limits=_listed(limits)))
    assert read.problems == ()
    assert [r.trigger for r in read.rules.configs["defrag"].rules] == ["QuotaFeasibleAndInsufficientTopology"]
    assert [(lim.name, lim.scope, lim.limit, lim.window_s) for lim in read.rules.limits] == [
        ("hourly", "Global", 3, 3600.0)]
    patched = api.merge_patch(PREEMPTION_LIMITS, "hourly", {"status": {"counts": [{"key": "Global", "count": 1}]}},
                              subresource="status")
    assert patched["status"]["counts"] == [{"key": "Global", "count": 1}]
