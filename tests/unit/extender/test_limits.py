"""Every request to the extender's HTTP server gets a well-formed answer (issue 13 item 6):
malformed JSON, wrong types, deep nesting, bodies over the limit, bad Content-Length, more
connections than the limit. Nothing drops the connection without an answer, and a managed
pod never passes a filter it could not be checked by."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.extender import server as server_module
from scheduler.extender.server import ExtenderHTTPServer
from scheduler.extender.wire import MAX_JSON_DEPTH, BindingArgs, FilterArgs, WireError, decode_body
from tests.unit.extender.serving import serving
from tests.unit.extender.test_logic import ALL, pod


@pytest.fixture
def served() -> Iterator[ExtenderHTTPServer]:
    with serving({"a1": 2}, max_connections=4) as (httpd, _):
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


def test_connections_over_the_limit_get_a_503_answer_and_threads_stay_bounded(served: ExtenderHTTPServer) -> None:
    idle = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(4)]
    try:
        deadline = time.monotonic() + 5
        while served.open_connections < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert served.open_connections == 4
        status, out = raw_post(served.port, "/filter", json.dumps({"Pod": pod("p"), "NodeNames": ALL}).encode())
        assert status == 503 and "limit of" in out["Error"] and out["NodeNames"] == []
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 5
    while served.open_connections and time.monotonic() < deadline:
        time.sleep(0.01)
    status, out = raw_post(served.port, "/filter", json.dumps({"Pod": pod("p"), "NodeNames": ALL}).encode())
    assert status == 200 and out["NodeNames"] == ["a1"]


def test_decoding_names_the_field() -> None:
    with pytest.raises(WireError) as err:
        FilterArgs.decode({"Pod": {"metadata": {"annotations": {"kueue.x-k8s.io/workload": 3}}}})
    assert err.value.field == "Pod.metadata.annotations[kueue.x-k8s.io/workload]"
    with pytest.raises(WireError) as err:
        FilterArgs.decode({"Pod": {"metadata": {"ownerReferences": [{"controller": "yes"}]}}})
    assert err.value.field == "Pod.metadata.ownerReferences[0].controller"
    assert BindingArgs.decode({"podname": "p", "node": "n"}) == BindingArgs("default", "p", "", "n")
    assert decode_body(b"") == {}
