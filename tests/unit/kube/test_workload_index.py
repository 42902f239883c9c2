"""The Workload informer's indexes (scheduler.kube.workload_index) always equal a recount of its
store, whichever path changed the store: a watch event, a relist, our own write's answer
(write_through, only if newer) or forgetting an object."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from scheduler.core.kueue_names import LABEL_JOB_UID
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import WORKLOADS, Informer, object_key
from scheduler.kube import status as st
from scheduler.kube import workload_index as wi
from scheduler.kube.cache import ClusterCache

NS = "team"
NOW = st.utcnow()


def _workload(name: str, rng: random.Random) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {}
    state = rng.choice(["pending", "reserved", "admitted", "evicting", "finished", "finished-reserved"])
    if state != "pending":
        status["admission"] = {"clusterQueue": rng.choice(["cq-a", "cq-b"]), "podSetAssignments": []}
        conditions = st.set_condition(conditions, st.QUOTA_RESERVED, "True", "QuotaReserved", "", NOW)
    if state == "admitted":
        conditions = st.set_condition(conditions, st.ADMITTED, "True", "Admitted", "", NOW)
    if state == "evicting":
        conditions = st.set_condition(conditions, st.EVICTED, "True", "Preempted", "", NOW)
    if state.startswith("finished"):
        conditions = st.set_condition(conditions, st.FINISHED, "True", "Succeeded", "", NOW)
        if state == "finished":
            conditions = st.set_condition(conditions, st.QUOTA_RESERVED, "False", "Pending", "", NOW)
    if conditions:
        status["conditions"] = conditions
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    owner = rng.choice([None, "ref", "label"])
    if owner == "ref":
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"uid-{name}",
                                    "controller": True}]
    elif owner == "label":
        meta["labels"] = {LABEL_JOB_UID: f"uid-{name}"}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta,
            "spec": {"queueName": "lq", "podSets": []}, "status": status}


def _recount(store: dict[str, dict[str, Any]]) -> dict[str, Any]:
    finished: dict[str, int] = {}
    for wl in store.values():
        cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")
        if cq and st.is_finished(wl):
            finished[cq] = finished.get(cq, 0) + 1
    return {
        "live": sorted(k for k, wl in store.items() if not st.is_finished(wl)),
        "holding": sorted(k for k, wl in store.items() if st.has_reservation(wl) and not st.is_finished(wl)),
        "owners": sorted((wi.owner_uid(wl), k) for k, wl in store.items() if wi.owner_uid(wl)),
        "finished": finished,
    }


def _indexed(informer: Informer) -> dict[str, Any]:
    return {
        "live": sorted(object_key(wl) for wl in wi.live(informer)),
        "holding": sorted(object_key(wl) for wl in wi.holding(informer)),
        "owners": sorted((wi.owner_uid(wl), object_key(wl)) for wl in informer.items()
                         if wi.owner_uid(wl) and wi.owned_by(informer, str(wi.owner_uid(wl))) is wl),
        "finished": wi.finished_counts(informer),
    }


@pytest.mark.parametrize("seed", range(20))
def test_indexes_equal_a_recount_after_any_sequence_of_writes(seed: int) -> None:
    rng = random.Random(seed)
    api = FakeApi()
    cache = ClusterCache.create(api)
    informer = cache.workloads
    names = [f"wl-{i}" for i in range(12)]
    for step in range(120):
        name = rng.choice(names)
        key = f"{NS}/{name}"
        action = rng.random()
        if action < 0.55:
            current = informer.get(key)
            body = _workload(name, rng)
            version = int(((current or {}).get("metadata") or {}).get("resourceVersion") or 0)
            # A write's answer, sometimes one older than the copy held (it must not win).
            body["metadata"]["resourceVersion"] = str(version + rng.choice([-1, 1, 2]))
            cache.write_through(informer, body)
        elif action < 0.75:
            if informer.get(key) is not None:
                cache.forget(informer, informer.get(key) or {})
        elif action < 0.9:
            api.create(WORKLOADS, _workload(f"{name}-{step}", rng), NS)
            informer.relist()
        else:
            for wl in api.objects(WORKLOADS, NS)[:3]:
                api.delete(WORKLOADS, wl["metadata"]["name"], NS)
            informer.relist()
        assert _indexed(informer) == _recount(informer.store), f"seed {seed}, step {step}"


def test_watch_events_keep_the_indexes() -> None:
    api = FakeApi()
    informer = ClusterCache.create(api).workloads
    informer.start()
    try:
        rng = random.Random(7)
        for i in range(30):
            api.create(WORKLOADS, _workload(f"w{i}", rng), NS)
        for wl in api.objects(WORKLOADS, NS)[:10]:
            api.delete(WORKLOADS, wl["metadata"]["name"], NS)
        deadline = time.monotonic() + 10
        while len(informer.items()) != 20 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(informer.items()) == 20
        assert _indexed(informer) == _recount(informer.store)
    finally:
        informer.stop()


def test_an_indexer_that_raises_files_the_object_nowhere_and_the_rest_go_on() -> None:
    informer = Informer(FakeApi(), WORKLOADS)
    informer.add_indexer("queue", lambda wl: (wl["spec"]["queueName"],))
    informer.put({"metadata": {"name": "good", "namespace": NS}, "spec": {"queueName": "lq"}})
    informer.put({"metadata": {"name": "bad", "namespace": NS}, "spec": None})
    assert [object_key(o) for o in informer.indexed("queue", "lq")] == [f"{NS}/good"]
    assert len(informer.items()) == 2
