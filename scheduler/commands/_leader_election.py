"""The leader-election flags and elector shared by ``toposched controller`` and
``toposched mk-dispatch``: one Lease protocol (``scheduler/k8s/leader.py``), one set of flags,
each command with its own Lease name."""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

from scheduler.errors import UserError

# Imports inside functions: the Lease module loads the Kubernetes client, so it is imported in
# ``make_elector`` and `toposched --help` stays fast (scheduler.cli registers every command).


def add_leader_election_arguments(p: Any, lease_name: str) -> None:
    p.add_argument("--lease-name", default=lease_name, help=f"the leader-election Lease in --namespace "
                                                             f"(default {lease_name})")
    p.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}", help="leader-election identity")
    p.add_argument("--leader-elect-lease-duration", type=float, default=15.0, metavar="SECONDS",
                   help="how long candidates wait, after last seeing the Lease change, before taking it over")
    p.add_argument("--leader-elect-renew-deadline", type=float, default=10.0, metavar="SECONDS",
                   help="the leader stops writing and steps down when it has not renewed for this long "
                   "(must be below the lease duration: the difference is the fencing margin)")
    p.add_argument("--leader-elect-retry-period", type=float, default=2.0, metavar="SECONDS",
                   help="how often the Lease is renewed or campaigned for")


def make_elector(api: Any, args: argparse.Namespace) -> Any:
    """The LeaseElector the flags describe; a UserError naming the rule the durations break."""
    from scheduler.k8s.leader import LeaseElector

    try:
        return LeaseElector(api, args.lease_name, args.namespace, args.identity,
                            lease_duration_s=args.leader_elect_lease_duration,
                            renew_deadline_s=args.leader_elect_renew_deadline,
                            retry_period_s=args.leader_elect_retry_period)
    except ValueError as exc:
        raise UserError(f"leader election: {exc}") from exc
