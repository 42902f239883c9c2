"""``--max-connections`` and ``--max-connections-per-client``, shared by the servers' commands."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.errors import UserError
from scheduler.http.limits import Caps


def add_connection_arguments(p: Any, caps: Caps, client: str) -> None:
    """``client``: who the server's honest clients are, for the help text."""
    p.add_argument("--max-connections", type=int, default=caps.total,
                   help=f"open connections in all (default {caps.total}); idle ones hold no thread, and over "
                        "a limit the least recently active idle one is closed (docs/security.md)")
    p.add_argument("--max-connections-per-client", type=int, default=caps.per_client,
                   help=f"open connections per client address (default {caps.per_client}); keep it above what "
                        f"{client} opens in a burst")


def connection_caps(args: argparse.Namespace) -> Caps:
    """The caps the flags ask for, or exit 2 naming the flag."""
    if args.max_connections < 1:
        raise UserError(f"--max-connections must be at least 1, got {args.max_connections}")
    if not 1 <= args.max_connections_per_client <= args.max_connections:
        raise UserError(f"--max-connections-per-client must be between 1 and --max-connections "
                        f"({args.max_connections}), got {args.max_connections_per_client}")
    return Caps(args.max_connections, args.max_connections_per_client)
