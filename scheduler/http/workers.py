"""The worker threads of a :class:`~scheduler.http.bounded.BoundedHTTPServer`: each answers one
complete request at a time and sends what the socket takes at once; the serving loop sends the
rest and waits for the next request.

Keep-alive fast path: a worker that has answered on a connection may wait up to
:data:`LINGER_S` for that connection's next request and answer it itself, when it arrives whole,
without going back through the loop (two thread hand-offs less: kube-scheduler's filter calls
come one after another on one connection). At most half the workers linger, and none while a
request waits for a worker, so lingering never delays another client; anything else (a partial
request, silence, a closed connection) goes back to the loop with its deadlines.
"""

from __future__ import annotations

import logging
import queue
import select
import threading
from collections.abc import Callable

from scheduler.http.connection import Connection, find_head

log = logging.getLogger(__name__)

LINGER_S = 0.25

Answer = Callable[[Connection, bytes], tuple[bytes, bool]]


class Workers:
    def __init__(self, count: int, answer: Answer, done: Callable[[Connection], None], stopping: threading.Event,
                 max_body: int, name: str) -> None:
        self._answer = answer
        self._done = done
        self._stopping = stopping
        self._max_body = max_body
        self._queue: queue.SimpleQueue[tuple[Connection, bytes, bool] | None] = queue.SimpleQueue()
        self._linger_slots = threading.BoundedSemaphore(max(1, count // 2)) if count > 1 else None
        self._threads = [threading.Thread(target=self._run, name=f"{name}-worker-{i}", daemon=True)
                         for i in range(count)]
        for thread in self._threads:
            thread.start()

    def submit(self, conn: Connection, request: bytes, unframed: bool) -> None:
        self._queue.put((conn, request, unframed))

    def stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            conn, request, unframed = item
            while True:
                self._serve(conn, request, unframed)
                following = self._linger(conn)
                if following is None:
                    break
                request, unframed = following
            self._done(conn)

    def _serve(self, conn: Connection, request: bytes, unframed: bool) -> None:
        answer, close = self._answer(conn, request)
        conn.out = memoryview(answer)
        conn.close_after = close or unframed or self._stopping.is_set()
        try:
            conn.send_pending()
        except (OSError, ValueError):  # reset by the client, or closed by server_close
            conn.broken = True

    def _linger(self, conn: Connection) -> tuple[bytes, bool] | None:
        """The connection's next request when it arrives whole within LINGER_S, else None."""
        if conn.broken or conn.out or conn.close_after or self._linger_slots is None or not self._queue.empty():
            return None
        if not self._linger_slots.acquire(blocking=False):
            return None
        try:
            if not conn.buf:
                try:
                    poller = select.poll()  # not select(): descriptors above 1,024 are common here
                    poller.register(conn.sock, select.POLLIN)
                    readable = poller.poll(LINGER_S * 1000)
                except (OSError, ValueError):
                    return None
                if not readable or self._stopping.is_set():
                    return None
                if not conn.receive():
                    conn.broken = True  # the client closed it: the loop closes our end
                    return None
            head = find_head(conn.buf, self._max_body)
            if head is None or head.expect_continue or len(conn.buf) < head.end + head.body:
                return None  # partial, or wants "100 Continue": the loop takes it on, with deadlines
            return conn.take(head), head.unframed
        finally:
            self._linger_slots.release()
