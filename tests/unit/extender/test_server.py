"""The HTTP shell without a cluster: extender/v1 wire names (Go field names, no JSON tags),
both node payload modes, bind through a fake binder, concurrent binds over HTTP, the config
helper."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.extender.book import SlotBook
from scheduler.extender.config import dedicated_scheduler_config, extender_entry, toposched_scheduler_config
from scheduler.extender.server import Extender
from tests.unit.extender.serving import serving
from tests.unit.extender.test_logic import ALL, NODES, pod


class FakeBinder:
    def __init__(self, fail_for: set[str] | None = None) -> None:
        self.calls: list[tuple[str, str, str, str]] = []
        self.fail_for = fail_for or set()
        self.lock = threading.Lock()

    def __call__(self, ns: str, name: str, uid: str, node: str) -> None:
        if name in self.fail_for:
            raise RuntimeError('pods "x" not found')
        with self.lock:
            self.calls.append((ns, name, uid, node))


@pytest.fixture
def served() -> Iterator[tuple[str, Extender, FakeBinder]]:
    binder = FakeBinder(fail_for={"doomed"})
    with serving({"a1": 2, "b1": 1}, binder) as (server, ext):
        yield f"http://127.0.0.1:{server.port}", ext, binder


def post(base: str, verb: str, body: Any) -> Any:
    req = urllib.request.Request(
        f"{base}/{verb}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
        return json.loads(resp.read())


def test_filter_node_names_go_field_names(served: tuple[str, Extender, FakeBinder]) -> None:
    base, _, _ = served
    out = post(base, "filter", {"Pod": pod("p"), "Nodes": None, "NodeNames": ALL})
    assert set(out) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert out["NodeNames"] == ["a1", "b1"] and out["Nodes"] is None and out["Error"] == ""
    assert set(out["FailedAndUnresolvableNodes"]) == set(ALL) - {"a1", "b1"}


def test_filter_full_node_list(served: tuple[str, Extender, FakeBinder]) -> None:
    base, _, _ = served
    out = post(base, "filter", {"Pod": pod("p"), "Nodes": {"items": NODES}, "NodeNames": None})
    assert out["NodeNames"] is None
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["a1", "b1"]


def test_lower_case_keys_are_accepted_too(served: tuple[str, Extender, FakeBinder]) -> None:
    base, _, _ = served
    out = post(base, "filter", {"pod": pod("p"), "nodenames": ["a1", "a2"]})
    assert out["NodeNames"] == ["a1"]


def test_pass_through_echoes_input(served: tuple[str, Extender, FakeBinder]) -> None:
    base, _, binder = served
    other = pod("web", wl=None, sched="default-scheduler")
    out = post(base, "filter", {"Pod": other, "NodeNames": ALL})
    assert out["NodeNames"] == ALL and out["FailedNodes"] == {} and out["Error"] == ""
    assert post(base, "prioritize", {"Pod": other, "NodeNames": ALL}) == []
    assert post(
        base, "bind", {"PodName": "web", "PodNamespace": "ns", "PodUID": "uid-web", "Node": "sick"}
    ) == {"Error": ""}
    assert binder.calls == [("ns", "web", "uid-web", "sick")]


def test_prioritize_host_score(served: tuple[str, Extender, FakeBinder]) -> None:
    base, _, _ = served
    out = post(base, "prioritize", {"Pod": pod("p"), "NodeNames": ["a1", "b1"]})
    assert [set(h) for h in out] == [{"Host", "Score"}] * 2
    assert all(0 <= h["Score"] <= 10 for h in out)


def test_bind_failure_releases_the_slot(served: tuple[str, Extender, FakeBinder]) -> None:
    base, ext, _ = served
    post(base, "filter", {"Pod": pod("doomed"), "NodeNames": ["b1"]})
    out = post(
        base, "bind", {"PodName": "doomed", "PodNamespace": "ns", "PodUID": "uid-doomed", "Node": "b1"}
    )
    assert "binding ns/doomed to b1 failed" in out["Error"]
    assert ext.book.occupancy(("ns", "wl", "main")) == {}


def test_not_ready_is_a_retryable_error() -> None:
    ext = Extender(SlotBook())
    out = ext.filter({"Pod": pod("p"), "NodeNames": ALL})
    assert "starting" in out["Error"] and out["NodeNames"] == []
    assert ext.filter({"Pod": pod("q", wl=None), "NodeNames": ALL})["NodeNames"] == ALL


def test_concurrent_http_binds_take_each_slot_once(served: tuple[str, Extender, FakeBinder]) -> None:
    base, ext, binder = served
    names = [f"p{i}" for i in range(12)]
    for name in names:
        post(base, "filter", {"Pod": pod(name), "NodeNames": ALL})
    results: dict[str, str] = {}
    barrier = threading.Barrier(len(names))

    def bind(name: str) -> None:
        barrier.wait()
        for node in ("a1", "b1"):
            out = post(
                base, "bind", {"PodName": name, "PodNamespace": "ns", "PodUID": f"uid-{name}", "Node": node}
            )
            if out["Error"] == "":
                results[name] = node
                return

    threads = [threading.Thread(target=bind, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    per_node: dict[str, int] = {}
    for node in results.values():
        per_node[node] = per_node.get(node, 0) + 1
    assert per_node == {"a1": 2, "b1": 1}
    assert len(binder.calls) == 3


def test_config_helper() -> None:
    parts = toposched_scheduler_config(9999)
    ext = parts["extender"]
    assert ext["urlPrefix"] == "http://127.0.0.1:9999"
    assert ext["filterVerb"] == "filter" and "bindVerb" not in ext  # kube-scheduler binds by default
    assert toposched_scheduler_config(9999, binder="extender")["extender"]["bindVerb"] == "bind"
    assert ext["nodeCacheCapable"] is True and ext["ignorable"] is False
    assert ext["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]
    assert parts["profile"]["schedulerName"] == "toposched"
    assert parts["profile"]["percentageOfNodesToScore"] == 100
    assert "managedResources" not in extender_entry(managed_resources=())
    with pytest.raises(ValueError):
        extender_entry(weight=0)
    whole = dedicated_scheduler_config("/k", 8888)
    assert [p["schedulerName"] for p in whole["profiles"]] == ["toposched"]
    assert whole["extenders"][0]["urlPrefix"] == "http://127.0.0.1:8888"
