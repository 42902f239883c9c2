"""The QuotaReserved=False reason and Event the controller writes follow
``UnadmittedWorkloadsObservability`` (in-memory API server): Kueue v0.17 and v0.19 by default
write ``Pending`` / ``Inadmissible``, the gate gives the granular reasons
(docs/kueue-versions.md)."""

from __future__ import annotations

import pytest

from scheduler.core.config import KUEUE_V019, FeatureGates, KueueConfig, kueue_defaults
from scheduler.k8s.informer import JOBS, LOCAL_QUEUES
from scheduler.kube import status as st

from .test_phases import NS, Harness, job

GRANULAR = KueueConfig(feature_gates=FeatureGates({"UnadmittedWorkloadsObservability": True}, KUEUE_V019))


def _pending_condition(h: Harness) -> dict[str, str]:
    h.sync()
    h.controller.ensure_workloads()
    h.sync()
    h.controller.admit()
    h.sync()
    cond = st.find_condition(h.workload(), st.QUOTA_RESERVED) or {}
    assert cond.get("status") == "False"
    return cond


@pytest.mark.parametrize(("config", "reason"), [(None, "Pending"), (kueue_defaults(KUEUE_V019), "Pending"),
                                                (GRANULAR, "ExceedsMaxQuota")])
def test_a_workload_over_quota(config: KueueConfig | None, reason: str) -> None:
    h = Harness()  # 32 GPUs of quota: 5 pods of 8 never fit under the nominal quota
    if config is not None:
        h.rebuild(config=config)
    h.api.create(JOBS, job("big", 5), NS)
    cond = _pending_condition(h)
    assert cond["reason"] == reason and "insufficient" in cond["message"]
    assert reason in h.event_reasons()


@pytest.mark.parametrize(("config", "reason"), [(None, "Inadmissible"), (GRANULAR, "Misconfigured")])
def test_a_workload_whose_local_queue_is_gone(config: KueueConfig | None, reason: str) -> None:
    h = Harness()
    if config is not None:
        h.rebuild(config=config)
    h.api.create(JOBS, job("orphan", 1), NS)
    h.sync()
    h.controller.ensure_workloads()
    h.api.delete(LOCAL_QUEUES, "lq", NS)
    cond = _pending_condition(h)
    assert (cond["reason"], cond["message"]) == (reason, "LocalQueue lq doesn't exist")
