"""The node-failure policy flags that ``toposched controller`` and ``toposched simulate`` share
(eviction-storm guard, NodeFailures requeue backoff): defined once, so a simulation runs with
exactly the policy the controller would, flag for flag."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from scheduler.commands._numbers import DAY_S, bounded

# Imports inside functions: the core (numpy) loads only when a command runs, not for
# `toposched --help` (scheduler.cli registers every command at start-up).
if TYPE_CHECKING:
    from scheduler.core.kueue.failures import RequeueBackoff, StormPolicy


def add_failure_policy_arguments(p: Any) -> None:
    p.add_argument("--eviction-storm-threshold", type=float, default=0.55,
                   help="hold node-failure evictions and replacements when more than this share of a flavor's "
                   "nodes (or of all nodes) failed within the window (default 0.55, kube-controller-manager's "
                   "--unhealthy-zone-threshold); resume when the share drops")
    p.add_argument("--eviction-storm-window-seconds", type=float, default=120.0,
                   help="failures this recent count towards starting an eviction-storm hold")
    p.add_argument("--eviction-storm-min-nodes", type=int, default=3,
                   help="fewest failed nodes that can start a hold (kube-controller-manager: more than 2)")
    p.add_argument("--node-failure-requeue-base-seconds", type=float, default=60.0,
                   help="a workload evicted for node failures is requeued at once the first time (as Kueue), then "
                   "after base*2^(n-2) s, n its requeue count (Kueue's waitForPodsReady.requeuingStrategy."
                   "backoffBaseSeconds, default 60)")
    p.add_argument("--node-failure-requeue-max-seconds", type=float, default=3600.0,
                   help="the cap of that backoff (Kueue's backoffMaxSeconds, default 3600)")


def storm_policy(args: argparse.Namespace) -> StormPolicy:
    from scheduler.core.kueue.failures import StormPolicy

    return StormPolicy(bounded(args.eviction_storm_threshold, "--eviction-storm-threshold", 0, 1),
                       bounded(args.eviction_storm_window_seconds, "--eviction-storm-window-seconds", 0, DAY_S,
                               "seconds"),
                       int(bounded(args.eviction_storm_min_nodes, "--eviction-storm-min-nodes", 0, 1_000_000)))


def requeue_backoff(args: argparse.Namespace) -> RequeueBackoff:
    from scheduler.core.kueue.failures import RequeueBackoff

    return RequeueBackoff(bounded(args.node_failure_requeue_base_seconds, "--node-failure-requeue-base-seconds", 0,
                                  DAY_S, "seconds"),
                          bounded(args.node_failure_requeue_max_seconds, "--node-failure-requeue-max-seconds", 0,
                                  7 * DAY_S, "seconds"))
