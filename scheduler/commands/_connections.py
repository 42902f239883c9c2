"""``--max-connections`` and ``--max-connections-per-client``, shared by the servers' commands
(the controller's gRPC port spells them ``--grpc-max-connections...``)."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.errors import UserError
from scheduler.http.limits import Caps


def add_connection_arguments(p: Any, caps: Caps, client: str, prefix: str = "") -> None:
    """``client``: who the server's honest clients are, for the help text; ``prefix`` goes
    before the flags' names (``grpc-``)."""
    p.add_argument(f"--{prefix}max-connections", type=int, default=caps.total, metavar="N",
                   help=f"open connections in all (default {caps.total}); idle ones hold no thread, and over "
                        "a limit the least recently active one that may give way is closed (docs/security.md)")
    p.add_argument(f"--{prefix}max-connections-per-client", type=int, default=caps.per_client, metavar="N",
                   help=f"open connections per client address (default {caps.per_client}); keep it above what "
                        f"{client} opens in a burst")


def connection_caps(args: argparse.Namespace, prefix: str = "") -> Caps:
    """The caps the flags ask for, or exit 2 naming the flag."""
    dest = prefix.replace("-", "_")
    total, per_client = getattr(args, f"{dest}max_connections"), getattr(args, f"{dest}max_connections_per_client")
    if total < 1:
        raise UserError(f"--{prefix}max-connections must be at least 1, got {total}")
    if not 1 <= per_client <= total:
        raise UserError(f"--{prefix}max-connections-per-client must be between 1 and --{prefix}max-connections "
                        f"({total}), got {per_client}")
    return Caps(total, per_client)
