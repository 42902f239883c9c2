"""Every request to the extender's HTTP server gets a well-formed answer (issue 13 item 6):
malformed JSON, wrong types, deep nesting, bodies over the limit, bad Content-Length, more
connections than the limit. Nothing drops the connection without an answer, and a managed
pod never passes a filter it could not be checked by."""

from __future__ import annotations

import dataclasses
import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.extender import server as server_module
from scheduler.extender.server import ExtenderHTTPServer, extender_limits
from scheduler.extender.wire import MAX_JSON_DEPTH, BindingArgs, FilterArgs, WireError, decode_body
from scheduler.http.limits import EXTENDER_CAPS
from tests.unit.extender.serving import serving
from tests.unit.extender.test_logic import ALL, pod
from tests.unit.http.hostile import ATTACKER, closed_by_server, idle_sockets, wait_until


@pytest.fixture
def served() -> Iterator[ExtenderHTTPServer]:
    with serving({"a1": 2}) as (httpd, _):
        yield httpd


def raw_post(port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("POST", path)
        for key, value in (headers if headers is not None else {"Content-Length": str(len(body))}).items():
            conn.putheader(key, value)
        conn.endheaders()
        if body:
            conn.send(body)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


@pytest.mark.parametrize("body, needle", [
    (b"{not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "a JSON list, not an object"),
    (b"null", "a JSON NoneType, not an object"),
    (b"[" * 50_000 + b"]" * 50_000, f"nests deeper than {MAX_JSON_DEPTH} levels"),
    (json.dumps({"Pod": {"metadata": {"labels": [[[]]] * 2}}}).encode(), "Pod.metadata.labels: must be an object"),
    (json.dumps({"Pod": {"a": [[[[[[[[[[]]]]]]]]]] * 10}, "NodeNames": ["a1"]}).encode() * 1, ""),
    (json.dumps({"Pod": pod("p"), "NodeNames": "a1"}).encode(), "NodeNames: must be a list, not a string"),
    (json.dumps({"Pod": pod("p"), "NodeNames": [1]}).encode(), "NodeNames[0]: must be a string"),
    (json.dumps({"Pod": 7}).encode(), "Pod: must be an object, not a number"),
    (json.dumps({}).encode(), "Pod: must be an object, not null"),
])
def test_filter_answers_any_body_and_passes_nothing_it_could_not_check(served: ExtenderHTTPServer, body: bytes,
                                                                     needle: str) -> None:
    status, out = raw_post(served.port, "/filter", body)
    assert status == 200 and set(out) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    if needle:
        assert needle in out["Error"] and not out["NodeNames"], out


def test_deep_nesting_within_a_pod_is_refused_naming_the_limit(served: ExtenderHTTPServer) -> None:
    p = pod("p")
    p["metadata"]["x"] = json.loads("[" * (MAX_JSON_DEPTH + 5) + "]" * (MAX_JSON_DEPTH + 5))
    status, out = raw_post(served.port, "/filter", json.dumps({"Pod": p, "NodeNames": ALL}).encode())
    assert status == 200 and "nests deeper" in out["Error"] and out["NodeNames"] == []


@pytest.mark.parametrize("verb, shape", [("filter", dict), ("prioritize", list), ("bind", dict)])
def test_every_verb_answers_garbage_in_its_own_shape(served: ExtenderHTTPServer, verb: str, shape: type) -> None:
    status, out = raw_post(served.port, f"/{verb}", b"\x00garbage")
    assert status == 200 and isinstance(out, shape)
    if shape is dict:
        assert out["Error"].startswith(f"toposched extender {verb}: bad request")


def test_bind_with_wrong_types_is_refused(served: ExtenderHTTPServer) -> None:
    status, out = raw_post(served.port, "/bind", json.dumps({"PodName": ["x"], "Node": "a1"}).encode())
    assert status == 200 and "PodName: must be a string, not a list" in out["Error"]
    status, out = raw_post(served.port, "/bind", json.dumps({"PodName": "x"}).encode())
    assert "Node: is required" in out["Error"]


@pytest.mark.parametrize("headers, needle", [
    ({"Content-Length": str(server_module.MAX_BODY + 1)}, "the limit is"),
    ({"Content-Length": "-5"}, "the limit is"),
    ({"Content-Length": "lots"}, "the limit is"),
    ({"Transfer-Encoding": "chunked"}, "not chunked"),
])
def test_bodies_that_cannot_be_taken_are_answered_and_the_connection_closed(served: ExtenderHTTPServer,
                                                                            headers: dict[str, str],
                                                                            needle: str) -> None:
    status, out = raw_post(served.port, "/filter", b"", headers)
    assert status == 200 and needle in out["Error"] and out["NodeNames"] == []


def test_an_internal_error_is_an_answer_not_a_dropped_connection(served: ExtenderHTTPServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(served.extender, "filter", broken)
    status, out = raw_post(served.port, "/filter", json.dumps({"Pod": pod("p"), "NodeNames": ALL}).encode())
    assert status == 200 and "internal error (RecursionError" in out["Error"] and out["NodeNames"] == []


def _filter(port: int, timeout_s: float) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("POST", "/filter", json.dumps({"Pod": pod("p"), "NodeNames": ALL}).encode())
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_1000_idle_sockets_do_not_delay_kube_schedulers_filter() -> None:
    """Issue 30: 64 idle connections took every slot and the 65th got a 503. Idle sockets now
    hold no thread, and an address over its limit loses its own idle connections first."""
    with serving({"a1": 2}) as (httpd, _):
        threads_before = threading.active_count()
        with idle_sockets(httpd.port, 1000):
            assert wait_until(lambda: httpd.open_connections >= EXTENDER_CAPS.per_client)
            status, out = _filter(httpd.port, timeout_s=1.0)
            assert status == 200 and out["NodeNames"] == ["a1"] and not out["Error"]
            assert httpd.connections_of(ATTACKER) <= EXTENDER_CAPS.per_client
            assert threading.active_count() <= threads_before + 1


def test_a_trickled_body_is_cut_at_its_deadline_and_never_reaches_filter() -> None:
    limits = dataclasses.replace(extender_limits(), body_timeout_s=0.5, header_timeout_s=0.5)
    with serving({"a1": 2}, limits=limits) as (httpd, _):
        head = b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{"
        with idle_sockets(httpd.port, 1, first_bytes=head) as (trickle,), \
                idle_sockets(httpd.port, 50, first_bytes=b"POST /filter HTTP/1.1\r\n") as half_sent:
            for _ in range(3):
                trickle.sendall(b" ")
                time.sleep(0.05)
            status, _ = _filter(httpd.port, timeout_s=1.0)
            assert status == 200
            assert closed_by_server(trickle, within_s=5)
            assert all(closed_by_server(sock, within_s=5) for sock in half_sent)
        assert httpd.stats.snapshot()["filter"]["count"] == 1  # only the honest one was decided


def test_decoding_names_the_field() -> None:
    with pytest.raises(WireError) as err:
        FilterArgs.decode({"Pod": {"metadata": {"annotations": {"kueue.x-k8s.io/workload": 3}}}})
    assert err.value.field == "Pod.metadata.annotations[kueue.x-k8s.io/workload]"
    with pytest.raises(WireError) as err:
        FilterArgs.decode({"Pod": {"metadata": {"ownerReferences": [{"controller": "yes"}]}}})
    assert err.value.field == "Pod.metadata.ownerReferences[0].controller"
    assert BindingArgs.decode({"podname": "p", "node": "n"}) == BindingArgs("default", "p", "", "n")
    assert decode_body(b"") == {}
