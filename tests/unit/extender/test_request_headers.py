"""The extender reads request headers itself (scheduler/http/lean.py): the same answers as the
stdlib for what kube-scheduler sends, keep-alive and close as HTTP/1.0 and 1.1 say, and a clear
400 / 431 (connection closed) for header blocks it cannot take; other request lines still get
the stdlib's own answers."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from scheduler.http.lean import MAX_HEADERS, Headers
from tests.unit.extender.serving import serving
from tests.unit.extender.test_logic import ALL, pod

BODY = json.dumps({"Pod": pod("p"), "NodeNames": ALL}).encode()


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with serving({"a1": 2}) as (httpd, _):
        yield httpd.port


def exchange(port: int, raw: bytes, answers: int = 1) -> tuple[list[tuple[int, dict[str, str], bytes]], bool]:
    """Send ``raw``, read ``answers`` responses; and whether the server closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(raw)
        reader = sock.makefile("rb")
        out = []
        for _ in range(answers):
            status = int(reader.readline().split()[1])
            headers = {}
            while (line := reader.readline()) not in (b"\r\n", b""):
                key, _, value = line.decode().partition(":")
                headers[key.strip().lower()] = value.strip()
            out.append((status, headers, reader.read(int(headers.get("content-length", "0")))))
        sock.settimeout(0.3)
        try:
            closed = reader.read(1) == b""
        except TimeoutError:
            closed = False
        return out, closed


def post(body: bytes = BODY, version: str = "HTTP/1.1", extra: str = "") -> bytes:
    return (f"POST /filter {version}\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
            f"Content-Type: application/json\r\n{extra}\r\n").encode() + body


def test_keep_alive_requests_are_answered_in_turn_on_one_connection(port: int) -> None:
    (first, second), closed = exchange(port, post() + post(extra="User-Agent: Go-http-client/1.1\r\n"), 2)
    for status, headers, body in (first, second):
        assert status == 200 and headers["content-type"] == "application/json"
        assert json.loads(body)["NodeNames"] == ["a1"]
    assert not closed


@pytest.mark.parametrize("version, extra, closed", [
    ("HTTP/1.1", "Connection: close\r\n", True),
    ("HTTP/1.1", "connection: CLOSE\r\n", True),
    ("HTTP/1.0", "", True),
    ("HTTP/1.0", "Connection: keep-alive\r\n", False),
])
def test_connection_header_and_version_decide_keep_alive(port: int, version: str, extra: str, closed: bool) -> None:
    (answer,), was_closed = exchange(port, post(version=version, extra=extra))
    assert answer[0] == 200 and json.loads(answer[2])["NodeNames"] == ["a1"]
    assert was_closed is closed


def test_header_names_ignore_case_and_the_first_repeat_wins() -> None:
    headers = Headers()
    headers.setdefault("content-length", "5")
    headers.setdefault("content-length", "9")
    assert headers.get("Content-Length") == "5" and headers["CONTENT-LENGTH"] == "5" and "Content-length" in headers
    assert headers.get("Expect", "") == ""


def test_expect_100_continue_gets_the_interim_answer(port: int) -> None:
    raw = (f"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: {len(BODY)}\r\nExpect: 100-continue\r\n\r\n"
           ).encode() + BODY
    (interim, final), _ = exchange(port, raw, 2)
    assert interim[0] == 100 and final[0] == 200 and json.loads(final[2])["NodeNames"] == ["a1"]


@pytest.mark.parametrize("extra, status, needle", [
    ("NoColonHere\r\n", 400, b"is not 'Name: value'"),
    (" folded: line\r\n", 400, b"folded lines are not accepted"),
    ("Bad : spaced name\r\n", 400, b"Bad header line"),
    (": no name\r\n", 400, b"Bad header line"),
    ("".join(f"X-{i}: v\r\n" for i in range(MAX_HEADERS)), 431, b"more than 100 headers"),
    ("X-Long: " + "v" * 70_000 + "\r\n", 431, b"longer than 65536 bytes"),
])
def test_header_blocks_it_cannot_take_are_refused_and_the_connection_closed(port: int, extra: str, status: int,
                                                                             needle: bytes) -> None:
    (answer,), closed = exchange(port, post(extra=extra))
    assert answer[0] == status and needle in answer[2] and answer[1]["connection"] == "close"
    assert closed


@pytest.mark.parametrize("line, status", [
    (b"POST /filter HTTP/2.0\r\n\r\n", 505),
    (b"POST /filter HTTP/1.x\r\n\r\n", 400),
    (b"POST /filter\r\n\r\n", 400),
    (b"GARBAGE\r\n\r\n", 400),
])
def test_other_request_lines_get_the_stdlib_answers(port: int, line: bytes, status: int) -> None:
    """(The stdlib answers these as HTTP/0.9: the error page alone, then it closes.)"""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(line)
        answer = sock.makefile("rb").read()  # to the close
    assert f"Error code: {status}".encode() in answer


def test_double_slash_paths_are_reduced_as_the_stdlib_does(port: int) -> None:
    raw = f"POST //filter HTTP/1.1\r\nHost: x\r\nContent-Length: {len(BODY)}\r\n\r\n".encode() + BODY
    (answer,), _ = exchange(port, raw)
    assert answer[0] == 200 and json.loads(answer[2])["NodeNames"] == ["a1"]
