"""Cached copies carry no ``metadata.managedFields`` (scheduler/k8s/informer.py, on the in-memory
API): listed, watched and written-through objects alike, as Kueue's cache strips them (issue 42,
the doors' memory)."""

from __future__ import annotations

import time
from typing import Any

from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import PODS, Informer

MANAGED = [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}}]


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "labels": {"team": "a"}, "managedFields": MANAGED},
            "spec": {"containers": [{"name": "main", "image": "x"}]}}


def test_listed_watched_and_written_through_copies_drop_managed_fields() -> None:
    api = FakeApi()
    api.create(PODS, pod("listed"), "team-a")
    informer = Informer(api, PODS)
    seen: list[dict[str, Any]] = []
    informer.add_handler(lambda _kind, obj, _old: seen.append(obj))
    informer.start()
    try:
        deadline = time.monotonic() + 5
        while not informer.synced.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        api.create(PODS, pod("watched"), "team-a")
        while len(informer.items()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        informer.put(pod("written"))
        cached = {o["metadata"]["name"]: o for o in informer.items()}
        assert sorted(cached) == ["listed", "watched", "written"]
        assert all("managedFields" not in o["metadata"] for o in [*cached.values(), *seen])
        assert cached["watched"]["metadata"]["labels"] == {"team": "a"}  # the rest is kept
    finally:
        informer.stop()
