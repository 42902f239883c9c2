"""An extender over HTTP on a free port, its book holding the test nodes and one admitted
Workload (the shared set-up of the server-level tests)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from scheduler.core.nodes import node_from_k8s
from scheduler.extender.book import SlotBook
from scheduler.extender.server import Extender, ExtenderHTTPServer
from scheduler.extender.workload_view import workload_view
from tests.unit.extender.test_logic import NODES, v1beta2, workload


@contextmanager
def serving(slots: dict[str, int], binder: Callable[..., None] = lambda *_: None,
            **server_options: Any) -> Iterator[tuple[ExtenderHTTPServer, Extender]]:
    """``slots``: pod set "main"'s assignment, hostname -> pods."""
    book = SlotBook()
    for n in NODES:
        book.upsert_node(node_from_k8s(n))
    book.upsert_workload(workload_view(workload(assignments={"main": v1beta2(slots)})))
    ext = Extender(book, binder=binder)
    ext.ready.set()
    httpd = ExtenderHTTPServer(ext, "127.0.0.1", 0, **server_options)
    httpd.start()
    try:
        yield httpd, ext
    finally:
        httpd.stop()
