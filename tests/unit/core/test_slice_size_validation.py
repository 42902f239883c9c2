"""Kueue v0.19's slice-size validation of Workloads (``TASValidateWorkloadSliceSize``, beta on;
``pkg/webhooks/workload_webhook.go`` ``validateTASSliceSize``). Kueue refuses such a Workload at
creation; toposched, which has no Workload webhook, holds it pending with Kueue's field errors
under the gate, and places it as before without the gate (v0.17)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates, KueueConfig
from scheduler.core.kueue.cycle import Admit, Pending, run_cycle
from scheduler.core.reasons import written_reason
from scheduler.core.topology_request import slice_size_errors
from scheduler.core.workload import workload_from_kueue

from ._admission import cq, lqs, pending, snapshot

P = "spec.podSets[0].topologyRequest"
RACK = "cloud.com/topology-rack"


@pytest.mark.parametrize(("request_", "errors"), [
    ({"podSetSliceRequiredTopology": RACK}, [f"{P}.podSetSliceSize: Required value: must be set when "
                                             "podSetSliceRequiredTopology is specified"]),
    ({"podSetSliceRequiredTopology": RACK, "podSetSliceSize": 0},
     [f"{P}.podSetSliceSize: Invalid value: 0: must be greater than 0"]),
    ({"podSetSliceRequiredTopology": RACK, "podSetSliceSize": -2},
     [f"{P}.podSetSliceSize: Invalid value: -2: must be greater than 0"]),
    ({"podSetSliceSize": 4}, [f"{P}.podSetSliceSize: Forbidden: may not be set when podSetSliceRequiredTopology "
                              "is not specified"]),
    ({"podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 4}, {"topology": "h", "size": 0}]},
     [f"{P}.podsetSliceRequiredTopologyConstraints[1].size: Invalid value: 0: must be greater than 0"]),
    ({"podSetSliceRequiredTopology": RACK, "podSetSliceSize": 4}, []),
    ({"required": RACK}, []),
])
def test_kueues_slice_size_rules(request_: dict[str, Any], errors: list[str]) -> None:
    assert list(slice_size_errors(request_, P)) == errors


def _workload(topology_request: dict[str, Any]) -> Any:
    return workload_from_kueue({"kind": "Workload", "metadata": {"name": "w", "namespace": "team", "uid": "u"},
                                "spec": {"queueName": "lq", "podSets": [{
                                    "name": "main", "count": 1, "topologyRequest": topology_request,
                                    "template": {"spec": {"containers": [{"name": "c", "resources": {
                                        "requests": {"cpu": "1"}}}]}}}]}})


def _decide(release: str, topology_request: dict[str, Any]) -> Any:
    config = KueueConfig(feature_gates=FeatureGates(release=release))
    snap = snapshot(cluster_queues={"cq": cq("cq")}, local_queues=lqs(("lq", "cq")),
                    pending=(pending(_workload(topology_request)),), config=config)
    (decision,) = run_cycle(snap)
    return decision


def test_held_under_v019_with_kueues_field_error() -> None:
    decision = _decide(KUEUE_V019, {"podSetSliceSize": 4})
    assert isinstance(decision, Pending) and decision.reason == "Misconfigured"
    assert decision.message == ("Workload is invalid (Kueue rejects it under TASValidateWorkloadSliceSize): "
                                f"{P}.podSetSliceSize: Forbidden: may not be set when podSetSliceRequiredTopology "
                                "is not specified")
    assert written_reason(decision.reason, observability=False,
                          by_workload_controller=decision.by_workload_controller) == "Inadmissible"


def test_admitted_under_v017_as_kueue_v017_does() -> None:
    assert isinstance(_decide(KUEUE_V017, {"podSetSliceSize": 4}), Admit)  # no TAS flavor: quota only
    assert isinstance(_decide(KUEUE_V019, {}), Admit)
