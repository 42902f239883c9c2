"""An optional informer (a CRD that may not be installed: JobSet, Kueue's alpha PreemptionConfig
/ PreemptionLimit) reads an unserved resource as empty without an error, empties its store when
the resource goes away, idles instead of watching, and picks the resource up once it is served
(scheduler/k8s/informer.py, on the in-memory API)."""

from __future__ import annotations

import time

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import PREEMPTION_CONFIGS, Informer

CONFIG = {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionConfig", "metadata": {"name": "defrag"},
          "spec": {"rules": []}}


def test_an_unserved_resource_lists_empty_and_its_objects_are_deleted() -> None:
    api = FakeApi()
    api.create(PREEMPTION_CONFIGS, CONFIG)
    informer = Informer(api, PREEMPTION_CONFIGS, optional=True)
    events: list[tuple[str, str]] = []
    informer.add_handler(lambda kind, obj, _old: events.append((kind, obj["metadata"]["name"])))
    informer.relist()
    assert [o["metadata"]["name"] for o in informer.items()] == ["defrag"] and not informer.absent
    api.fail_next(404, "list", PREEMPTION_CONFIGS.plural)  # the CRD was deleted
    informer.relist()
    assert informer.items() == [] and informer.absent
    assert events == [("ADDED", "defrag"), ("DELETED", "defrag")]
    informer.relist()  # served again
    assert [o["metadata"]["name"] for o in informer.items()] == ["defrag"] and not informer.absent


def test_a_required_resource_that_is_not_served_still_raises() -> None:
    api = FakeApi()
    api.fail_next(404, "list", PREEMPTION_CONFIGS.plural)
    with pytest.raises(ApiException):
        Informer(api, PREEMPTION_CONFIGS).relist()


def test_the_running_informer_is_synced_while_absent_and_finds_the_resource_later() -> None:
    api = FakeApi()
    api.fail_next(404, "list", PREEMPTION_CONFIGS.plural)
    informer = Informer(api, PREEMPTION_CONFIGS, optional=True)
    informer.ABSENT_RETRY_S = 0.05
    informer.start()
    try:
        assert informer.synced.wait(5) and informer.items() == []
        api.create(PREEMPTION_CONFIGS, CONFIG)
        deadline = time.monotonic() + 5
        while not informer.items() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [o["metadata"]["name"] for o in informer.items()] == ["defrag"] and not informer.absent
    finally:
        informer.stop()
