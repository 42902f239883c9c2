"""The Kueue guard (scheduler/kube/kueueguard.py): admission held while Kueue's leader Lease
keeps changing, judged on this process's clock; wired into the leading loop and the command."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.commands import controller as command
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import LEASES, NAMESPACES
from scheduler.k8s.leader import WriteFence
from scheduler.kube.kueueguard import KueueGuard, parse_lease_ref
from scheduler.kube.leading import LeadingLoop
from tests.unit.kube.test_leader import ManualClock, elector
from tests.unit.kube.test_leader_fencing import _Seeded

KUEUE_NS, LEASE = "kueue-system", "c1f6bfd2.kueue.x-k8s.io"


def kueue_lease(api: FakeApi, holder: str = "kueue-0", renew: str = "2026-12-03T12:00:00.000000Z") -> None:
    body = {"metadata": {"name": LEASE, "namespace": KUEUE_NS},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": 15}}
    try:
        current = api.get(LEASES, LEASE, KUEUE_NS)
    except ApiException:  # first time: create it
        api.create(LEASES, body, KUEUE_NS)
        return
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    api.replace(LEASES, body)


def test_no_lease_never_holds() -> None:
    assert not KueueGuard(FakeApi(), KUEUE_NS, LEASE).holds()


def test_a_renewed_lease_holds_and_a_stale_one_releases_after_its_duration() -> None:
    api, clock = FakeApi(), ManualClock()
    api.create(NAMESPACES, {"metadata": {"name": KUEUE_NS}})
    kueue_lease(api)
    guard = KueueGuard(api, KUEUE_NS, LEASE, monotonic=clock)
    assert guard.holds()  # first seen with a holder: live until it stays unchanged for 15 s
    clock.advance(10)
    kueue_lease(api, renew="2026-12-03T12:00:10.000000Z")  # Kueue renews
    assert guard.holds()
    clock.advance(14)
    assert guard.holds()  # 14 s since the last change
    clock.advance(2)
    assert not guard.holds()  # Kueue stopped renewing (scaled to 0)
    kueue_lease(api, holder="kueue-1", renew="2026-12-03T12:05:00.000000Z")  # a Kueue came back
    assert guard.holds()
    kueue_lease(api, holder="")  # released on shutdown
    assert not guard.holds()


def test_an_unreadable_lease_holds(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    api.fail_next(403, "get", "leases")
    assert KueueGuard(api, KUEUE_NS, LEASE).holds()
    assert "holding admission" in caplog.text


def test_the_loop_skips_passes_while_the_guard_holds() -> None:
    clock = ManualClock()
    seeded = _Seeded(jobs=0)
    leader = elector(seeded.api, "a", monotonic=clock)
    assert leader.step()
    holding = [True]
    passes: list[int] = []
    loop = LeadingLoop(seeded.api, seeded.cache, leader, WriteFence(leader), lambda: passes.append(1),
                       lambda _s: None, 5.0, hold=lambda: holding[0])
    assert not loop.run_pass() and passes == []
    holding[0] = False
    assert loop.run_pass() and passes == [1]


@pytest.mark.parametrize("text", ["kueue-system", "/lease", "ns/", "a/b/c"])
def test_lease_reference_needs_namespace_and_name(text: str) -> None:
    with pytest.raises(ValueError, match="NAMESPACE/NAME"):
        parse_lease_ref(text)


def test_the_controller_command_refuses_a_malformed_lease_before_connecting(monkeypatch: Any) -> None:
    def no_cluster(_kubeconfig: Any) -> None:
        raise AssertionError("connected to a cluster")

    monkeypatch.setattr("scheduler.k8s.client.api_client", no_cluster)
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    args = parser.parse_args(["controller", "--kueue-lease", "kueue-system"])
    with pytest.raises(Exception, match="NAMESPACE/NAME"):
        command.run(args)
