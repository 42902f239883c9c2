"""``resources.quotaCheckStrategy: IgnoreUndeclared`` (Kueue v0.19, ``QuotaCheckStrategy`` beta
on): a resource the ClusterQueue does not declare is not checked against quota nor counted in
the usage. Restated from Kueue v0.19.2's
test/integration/singlecluster/scheduler/quotacheckstrategy/quota_check_strategy_test.go:
"should ignore undeclared resources and not use them to calculate entry penalty" and, gate
disabled, "should not admit workload with undeclared resources" (pkg/scheduler/flavorassigner:
``IgnoreUndeclaredResources``, ``TotalRequestsFor``, ``toAPI``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates, KueueConfig, kueue_defaults
from scheduler.core.kueue.afs import total_requests
from scheduler.core.kueue.cycle import run_cycle
from scheduler.core.kueue.decisions import Admit, Pending

from ._admission import cq, lqs, pending, rq, snapshot, wl

GPU = "example.com/gpu"


def config(strategy: str, release: str = KUEUE_V019, gate: bool | None = None) -> KueueConfig:
    gates = FeatureGates({} if gate is None else {"QuotaCheckStrategy": gate}, release)
    return replace(kueue_defaults(release), feature_gates=gates, quota_check_strategy=strategy)


def decide(cfg: KueueConfig) -> Admit | Pending:
    cqs = {"cq": cq("cq", {"default": {"cpu": rq(10)}})}
    snap = snapshot(cluster_queues=cqs, local_queues=lqs(("lq", "cq")), config=cfg,
                    pending=[pending(wl("wl", 2, queue="lq", extra={GPU: 100}))])
    [decision] = run_cycle(snap)
    assert isinstance(decision, (Admit, Pending))
    return decision


def test_ignore_undeclared_admits_and_charges_only_declared_resources() -> None:
    decision = decide(config("IgnoreUndeclared"))
    assert isinstance(decision, Admit), decision
    [ps] = decision.pod_sets
    # "the undeclared resource is not in admission resource usage"; the ClusterQueue's usage
    # and Admission Fair Sharing's entry penalty are read from the same usage
    assert set(ps.resource_usage) == {"cpu"} and ps.flavors == {"cpu": "default"}
    assert set(total_requests({("default", r): v for r, v in ps.resource_usage.items()})) == {"cpu"}


@pytest.mark.parametrize("cfg", [
    # "quota check strategy is set to IgnoreUndeclared and feature gate is disabled"
    config("IgnoreUndeclared", gate=False),
    config("BlockUndeclared"),
    config("IgnoreUndeclared", release=KUEUE_V017),  # v0.17.0 has neither the field nor the gate
], ids=["gate off", "BlockUndeclared", "v0.17"])
def test_otherwise_an_undeclared_resource_blocks_the_workload(cfg: KueueConfig) -> None:
    decision = decide(cfg)
    assert isinstance(decision, Pending)
    assert decision.message == f"couldn't assign flavors to pod set main: resource {GPU} unavailable in ClusterQueue"
