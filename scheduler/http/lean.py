"""A request handler that reads HTTP/1.x request headers without the email parser.

``BaseHTTPRequestHandler.parse_request`` hands the header block to ``email.parser`` (about
16 us a request here, most of the stdlib's per-request cost); kube-scheduler waits for every
extender answer within its serial scheduling cycle, so the extender reads well-formed
HTTP/1.0 and 1.1 requests itself. Anything else on the request line (HTTP/0.9, HTTP/2,
garbage) still goes to the stdlib, which answers it as before.

Headers are kept by lower-cased name, the first of repeated ones winning (as
``http.client.HTTPMessage.get`` does); a header line without a colon, an obsolete folded
line, more than :data:`MAX_HEADERS` headers or a line over :data:`MAX_LINE` bytes is
answered with 400 or 431 and the connection is closed.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from scheduler.http.bounded import BufferedHandler

MAX_LINE = 65536  # the stdlib's limit (http.client._MAXLINE)
MAX_HEADERS = 100  # likewise (http.client._MAXHEADERS)
_VERSIONS = frozenset({"HTTP/1.0", "HTTP/1.1"})
_END = frozenset({b"\r\n", b"\n", b""})


class Headers(dict[str, str]):
    """Request headers by lower-cased name; lookups ignore case, like ``HTTPMessage``."""

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())


class LeanRequestHandler(BufferedHandler):
    raw_requestline: bytes  # set by handle_one_request before parse_request

    def parse_request(self) -> bool:
        requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = requestline.split()
        if len(words) != 3 or words[2] not in _VERSIONS:
            return super().parse_request()  # the stdlib's answers for the unusual
        self.requestline = requestline
        self.command, path, self.request_version = words
        self.path = "/" + path.lstrip("/") if path.startswith("//") else path  # as the stdlib (gh-87389)
        # HTTP/1.1 keeps the connection by default (when this server speaks 1.1), 1.0 closes it
        self.close_connection = not (self.request_version == "HTTP/1.1" and self.protocol_version >= "HTTP/1.1")
        headers = self._read_headers()
        if headers is None:
            return False
        self.headers = headers  # type: ignore[assignment]  # read with .get(), like HTTPMessage
        conntype = headers.get("connection", "").lower()
        if conntype == "close":
            self.close_connection = True
        elif conntype == "keep-alive" and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        if (headers.get("expect", "").lower() == "100-continue" and self.protocol_version >= "HTTP/1.1"
                and self.request_version >= "HTTP/1.1"):
            return self.handle_expect_100()
        return True

    def _read_headers(self) -> Headers | None:
        """The header block, or None after answering a malformed one (the connection closes)."""
        headers = Headers()
        for _ in range(MAX_HEADERS + 1):
            line = self.rfile.readline(MAX_LINE + 1)
            if len(line) > MAX_LINE:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long",
                                f"a header line is longer than {MAX_LINE} bytes")
                return None
            if line in _END:
                return headers
            if len(headers) == MAX_HEADERS:
                break
            name, colon, value = line.partition(b":")
            if not colon or not name or name[:1] in b" \t" or name != name.rstrip():
                self.send_error(HTTPStatus.BAD_REQUEST, "Bad header line",
                                f"{line[:80]!r} is not 'Name: value' (folded lines are not accepted)")
                return None
            headers.setdefault(name.decode("iso-8859-1").lower(), value.decode("iso-8859-1").strip())
        self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers",
                        f"more than {MAX_HEADERS} headers")
        return None
