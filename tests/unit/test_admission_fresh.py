"""Denials are decided again on a view listed from the API server (admission/fresh.py): a watch
cache that has not yet seen what was written just before a Job never refuses it."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from admission import review
from admission.fresh import FreshViews
from admission.server import WebhookApp
from admission.view import ClusterView
from scheduler.k8s.fakeapi import FakeApi
from scheduler.k8s.informer import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NODES,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
    object_key,
)

L3 = "topology.k8s.aws/network-node-layer-3"
HOST = "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def _cluster(api: FakeApi, nodes: int) -> None:
    api.create(TOPOLOGIES, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
                            "spec": {"levels": [{"nodeLabel": L3}, {"nodeLabel": HOST}]}})
    api.create(RESOURCE_FLAVORS, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                  "metadata": {"name": "f"},
                                  "spec": {"nodeLabels": {"pool": "p"}, "topologyName": "t"}})
    api.create(CLUSTER_QUEUES, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                "metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": [{
                                    "coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f", "resources": [
                                        {"name": "nvidia.com/gpu", "nominalQuota": "64"}]}]}]}})
    api.create(LOCAL_QUEUES, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                              "metadata": {"name": "lq", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}},
               "team-a")
    _nodes(api, range(nodes))


def _nodes(api: FakeApi, indexes: range) -> None:
    for i in indexes:
        api.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": f"n{i}", "labels": {"pool": "p", HOST: f"n{i}", L3: "r0"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}})


def _job_review(pods: int) -> bytes:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"parallelism": pods, "completions": pods, "template": {
               "metadata": {"annotations": {REQUIRED: L3}},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i", "resources": {
                   "requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}}}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "batch", "version": "v1", "kind": "Job"}, "operation": "CREATE",
        "namespace": "team-a", "object": job}}).encode()


def _allowed(answer: tuple[int, dict[str, Any]]) -> bool:
    return answer[0] == 200 and answer[1]["response"]["allowed"] is True


def test_a_job_on_a_quota_raise_the_cache_has_not_seen_yet_is_admitted() -> None:
    """``kubectl apply -f dir/`` raises a ClusterQueue's quota and creates a Job in one go: the
    watch cache still holds the old quota when the Job is reviewed."""
    api = FakeApi()
    app = WebhookApp(api)  # type: ignore[arg-type]  # informers not started: the test fills the caches
    _cluster(api, nodes=4)
    _cache(app, api)
    api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": "8"}]}]}]}})
    _cache(app, api)  # the cache has seen the lowered quota ...
    api.merge_patch(CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": "64"}]}]}]}})  # ... not yet the raise
    on_cache = review.answer(review.VALIDATE_JOB, _job_review(4), app.view)
    assert not _allowed(on_cache), "the cached view alone would refuse it"
    assert "can never be admitted by ClusterQueue" in on_cache[1]["response"]["status"]["message"]
    assert _allowed(app.decide(review.VALIDATE_JOB, _job_review(4)))
    assert app.fresh is not None and app.fresh.built == 1


def _cache(app: WebhookApp, api: FakeApi) -> None:
    """Fill the app's informer stores as their watches would have, from the API now."""
    for inf in app.informers:
        inf.store.clear()  # in place: the view reads the same dicts
        inf.store.update({object_key(o): o for o in api.list(inf.resource).get("items") or ()})
    app.view.nodes_version += 1


def test_a_job_that_never_fits_is_still_refused_after_the_fresh_read() -> None:
    api = FakeApi()
    app = WebhookApp(api)  # type: ignore[arg-type]
    _cluster(api, nodes=4)
    _cache(app, api)
    status, body = app.decide(review.VALIDATE_JOB, _job_review(5))  # 5 nodes' worth in a 4-node rack
    assert status == 200 and body["response"]["allowed"] is False
    assert "even on an empty cluster" in body["response"]["status"]["message"]


def test_an_allowed_job_costs_no_read() -> None:
    api = FakeApi()
    app = WebhookApp(api)  # type: ignore[arg-type]
    _cluster(api, nodes=4)
    _cache(app, api)
    assert _allowed(app.decide(review.VALIDATE_JOB, _job_review(4)))
    assert app.fresh is not None and app.fresh.built == 0


def test_an_object_refused_on_its_own_costs_no_read() -> None:
    api = FakeApi()
    app = WebhookApp(api)  # type: ignore[arg-type]
    _cluster(api, nodes=4)
    _cache(app, api)
    body = json.loads(_job_review(4))
    body["request"]["object"]["spec"]["template"]["metadata"]["annotations"] = {
        "kueue.x-k8s.io/podset-requried-topology": L3}  # a typo: refused whatever the cluster holds
    status, out = app.decide(review.VALIDATE_JOB, json.dumps(body).encode())
    assert status == 200 and out["response"]["allowed"] is False
    assert "did you mean kueue.x-k8s.io/podset-required-topology" in out["response"]["status"]["message"]
    assert app.fresh is not None and app.fresh.built == 0


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_one_snapshot_answers_every_request_that_arrived_before_its_lists_started() -> None:
    clock = _Clock()
    views: list[ClusterView] = []

    def build() -> ClusterView:
        clock.now += 0.1  # listing takes 100 ms
        views.append(ClusterView())
        return views[-1]

    fresh = FreshViews(build, min_interval_s=1.0, clock=clock, sleep=clock.sleep)
    first = fresh.after(100.0)
    assert fresh.after(99.0) is first and fresh.after(100.0) is first
    # A request that arrived after the snapshot started needs a newer one, not before the interval.
    second = fresh.after(100.05)
    assert second is not first and clock.slept == [pytest.approx(0.9)] and fresh.built == 2


def test_a_slow_snapshot_spaces_the_next_by_five_times_its_duration() -> None:
    clock = _Clock()

    def build() -> ClusterView:
        clock.now += 2.0
        return ClusterView()

    fresh = FreshViews(build, min_interval_s=1.0, clock=clock, sleep=clock.sleep)
    fresh.after(100.0)
    fresh.after(clock.now)
    assert clock.slept == [pytest.approx(8.0)]


def test_concurrent_denials_share_one_snapshot() -> None:
    gate = threading.Event()
    calls = []

    def build() -> ClusterView:
        calls.append(1)
        gate.wait(5)
        return ClusterView()

    fresh = FreshViews(build, min_interval_s=0.0)
    arrived = 0.0  # every request arrived before the one snapshot started
    got: list[ClusterView] = []
    threads = [threading.Thread(target=lambda: got.append(fresh.after(arrived))) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(5)
    assert len(calls) == 1 and len(got) == 8 and len({id(v) for v in got}) == 1
