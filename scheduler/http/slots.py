"""Connection slots by client address: who may connect, and which connection to close to make
room. Used by a serving loop only (one thread): the bounded HTTP server's
(``scheduler/http/bounded.py``) and the gRPC front's (``scheduler/api/front.py``)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class Held(Protocol):
    """A connection as the slots see it: its client address, and whether it may be closed to
    make room (nobody is answering it)."""

    @property
    def client(self) -> str: ...

    @property
    def evictable(self) -> bool: ...


C = TypeVar("C", bound=Held)


@dataclass(frozen=True)
class Admission(Generic[C]):
    """The answer for a new connection: ``admit`` it, after closing ``evict`` (when set)."""

    admit: bool
    evict: C | None = None
    reason: str = ""


class Slots(Generic[C]):
    """Open connections per client address, least recently active first.

    A new connection from an address at ``per_client`` takes the place of that address's least
    recently active connection nobody is answering; at ``total`` it takes the place of such a
    connection of the address holding the most (so an address that holds many idle connections
    loses them before anyone else loses one). When no connection can give way, the new one is
    refused: every slot is then a request being answered."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self.count = 0
        self._by_client: dict[str, OrderedDict[C, None]] = {}

    def held_by(self, client: str) -> int:
        return len(self._by_client.get(client, ()))

    def admission(self, client: str) -> Admission[C]:
        mine = self._by_client.get(client)
        if mine is not None and len(mine) >= self.per_client:
            victim = _least_active(mine)
            if victim is None:
                return Admission(False, reason=f"its {self.per_client} connections (the per-client limit) are all "
                                               "being answered")
            return Admission(True, victim, f"the per-client limit of {self.per_client} connections")
        if self.count < self.total:
            return Admission(True)
        for held in sorted(self._by_client.values(), key=len, reverse=True):
            victim = _least_active(held)
            if victim is not None:
                return Admission(True, victim, f"the limit of {self.total} connections")
        return Admission(False, reason=f"all {self.total} connections (the server's limit) are being answered")

    def add(self, conn: C) -> None:
        self._by_client.setdefault(conn.client, OrderedDict())[conn] = None
        self.count += 1

    def touch(self, conn: C) -> None:
        """``conn`` was active: it becomes the last to give way."""
        held = self._by_client.get(conn.client)
        if held is not None and conn in held:
            held.move_to_end(conn)

    def remove(self, conn: C) -> None:
        held = self._by_client.get(conn.client)
        if held is None or conn not in held:
            return
        del held[conn]
        self.count -= 1
        if not held:
            del self._by_client[conn.client]

    def all(self) -> list[C]:
        return [conn for held in self._by_client.values() for conn in held]


def _least_active(held: OrderedDict[C, None]) -> C | None:
    return next((conn for conn in held if conn.evictable), None)
