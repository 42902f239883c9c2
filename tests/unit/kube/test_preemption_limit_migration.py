"""PreemptionLimits an earlier toposched kept in ``kueue.x-k8s.io/v1alpha1`` (a group that is Kueue's)
are copied to toposched's own ``toposched.io/v1alpha1`` by the controller each pass
(kube/limit_migration.py) and by ``toposched migrate-preemption-limits`` (commands/migrate_limits.py):
the spec kept, the origin annotated, the step reported; never an old object changed or deleted,
never an admin's newer ``toposched.io`` object overwritten. A limit in force before the upgrade
holds right after it."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from scheduler.adapter.limit_migration import ANN_MIGRATED_FROM
from scheduler.commands.migrate_limits import migrate
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import LEGACY_PREEMPTION_LIMITS, PREEMPTION_LIMITS
from scheduler.kube import status as st
from scheduler.kube.events import EVENTS

from .test_phases import Harness
from .test_preemption_config import _by_job, _fragmented

SPEC = {"scope": "PreemptedClusterQueue", "limit": 0, "limitWindowSeconds": 3600,
        "clusterQueueSelector": {"matchLabels": {"tier": "prod"}}}


def legacy(name: str = "freeze", spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionLimit",
            "metadata": {"name": name, "labels": {"team": "infra"}},
            "spec": copy.deepcopy(spec or SPEC), "status": {"counts": [{"key": "cq", "count": 2}]}}


def test_the_controller_copies_an_old_limit_keeps_its_spec_and_reports_it(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    old = h.api.create(LEGACY_PREEMPTION_LIMITS, legacy())
    h.sync()
    with caplog.at_level(logging.WARNING):
        h.controller.migrate_preemption_limits()
        h.sync()
        h.controller.migrate_preemption_limits()  # idempotent: nothing more, nothing said twice
    new = h.api.get(PREEMPTION_LIMITS, "freeze")
    assert new["apiVersion"] == "toposched.io/v1alpha1" and new["spec"] == SPEC
    assert new["metadata"]["labels"] == {"team": "infra"}
    assert new["metadata"]["annotations"][ANN_MIGRATED_FROM] == "kueue.x-k8s.io/v1alpha1/preemptionlimits/freeze"
    assert "status" not in new  # the counts are recounted by the controller, not copied
    assert h.api.get(LEGACY_PREEMPTION_LIMITS, "freeze") == old  # the old object untouched
    lines = [r.getMessage() for r in caplog.records if "PreemptionLimit freeze" in r.getMessage()]
    assert lines == ["PreemptionLimit freeze (kueue.x-k8s.io/v1alpha1): copied to toposched.io/v1alpha1 with its "
                     "spec; the old object is left in place"]
    h.events.flush()
    assert [e["reason"] for e in h.api.objects(EVENTS)
            if e["involvedObject"].get("name") == "freeze"] == ["PreemptionLimitMigrated"]


def test_an_admins_newer_toposched_io_limit_is_never_overwritten() -> None:
    h = Harness()
    h.api.create(LEGACY_PREEMPTION_LIMITS, legacy())
    mine = {"apiVersion": "toposched.io/v1alpha1", "kind": "PreemptionLimit", "metadata": {"name": "freeze"},
            "spec": {"scope": "Global", "limit": 5, "limitWindowSeconds": 60}}
    h.api.create(PREEMPTION_LIMITS, mine)
    h.sync()
    h.controller.migrate_preemption_limits()
    assert h.api.get(PREEMPTION_LIMITS, "freeze")["spec"] == mine["spec"]


def test_a_limit_in_force_before_the_upgrade_holds_right_after_it() -> None:
    """The old limit of 0 (every preemption held back) is read in the pass that migrates it."""
    h = Harness()
    h.api.create(LEGACY_PREEMPTION_LIMITS, legacy(spec={"scope": "Global", "limit": 0, "limitWindowSeconds": 3600}))
    h.sync()
    h.controller.migrate_preemption_limits()
    _fragmented(h)
    wls = _by_job(h)
    assert not any(st.condition_true(w, st.EVICTED) for w in wls.values())
    assert (st.find_condition(wls["c"], "PreemptionBlockedByLimit") or {}).get("message") == \
        "Preemption was blocked by PreemptionLimit freeze"


def test_the_command_reports_each_old_object_and_its_dry_run_writes_nothing() -> None:
    api = FakeApi()
    api.create(LEGACY_PREEMPTION_LIMITS, legacy("a"))
    api.create(LEGACY_PREEMPTION_LIMITS, legacy("b"))
    api.create(PREEMPTION_LIMITS, {"apiVersion": "toposched.io/v1alpha1", "kind": "PreemptionLimit",
                                   "metadata": {"name": "b"}, "spec": SPEC})
    dry = migrate(api, dry_run=True)
    assert dry[0] == ("PreemptionLimit a (kueue.x-k8s.io/v1alpha1): would be copied to toposched.io/v1alpha1 with "
                      "its spec; the old object is left in place")
    assert [o["metadata"]["name"] for o in api.objects(PREEMPTION_LIMITS)] == ["b"]
    lines = migrate(api, dry_run=False)
    assert lines[:2] == [
        "PreemptionLimit a (kueue.x-k8s.io/v1alpha1): copied to toposched.io/v1alpha1 with its spec; the old object "
        "is left in place",
        "PreemptionLimit b (kueue.x-k8s.io/v1alpha1): already in toposched.io/v1alpha1 with the same spec; "
        "nothing to do"]
    assert sorted(o["metadata"]["name"] for o in api.objects(PREEMPTION_LIMITS)) == ["a", "b"]
    assert len(api.objects(LEGACY_PREEMPTION_LIMITS)) == 2
