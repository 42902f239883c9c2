#!/usr/bin/env python3
"""Recovery from node failures: a running 16-pod training job that requires one layer-3 domain
loses a node; how soon does every rank run again, did any rank run twice, did any leave the
domain? The real Kueue v0.17.0 against toposched, each on a fresh control plane of the same shape
(issue 34, item 3).

Cluster: 4 layer-3 domains of 20 p5 nodes (8 GPUs each); one ClusterQueue with the whole
cluster as quota. The job: an Indexed Job of ``--pods`` pods (8 GPUs each: a node a pod,
ranks = completion indexes), ``kueue.x-k8s.io/podset-required-topology`` layer-3, so the
domain it lands in keeps 4 spare nodes: a hot swap inside the domain is possible. Both engines
run with Kueue's ``TASFailedNodeReplacement`` gate on (its v0.17 default, stated in both
Configurations) and every other setting at its default (toposched's
``--node-failure-grace-seconds`` 3 s).

Failure kinds, injected on the node of the middle rank once every rank runs:
- ``health``: HyperPod's health agent marks the node: label
  ``sagemaker.amazonaws.com/node-health-status=UnschedulablePendingReplacement`` and taint
  ``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule`` (as
  tests/e2e/test_node_failure.py does). The node and its pods keep running.
- ``notready``: the node's kubelet goes silent: KWOK stops managing it (its label is removed)
  and its ``Ready`` condition is set to ``False``; the node-lifecycle controller then taints it
  ``node.kubernetes.io/not-ready``. Pods on it are never finished by anything (no kubelet), as on
  a dead instance.
- ``deleted``: the Node object is deleted (HyperPod replacing the instance).

Measured per kind, polling the job's pods every 0.2 s from the injection: seconds until every
rank has a Running, not terminating pod on a node other than the failed one (``--timeout-s``
without it: "not recovered"), seconds until anything about the job's pods changed at all
(whether the engine reacted), ranks that ran twice (two Running, not terminating pods of one
rank at the same poll), ranks restarted (a different pod at the end than before), ranks that
ended outside the original layer-3 domain. Kueue v0.17 reacts to a deleted node at once, to a
NotReady node after 30 s (``NodeFailureDelay``) and only once its pods stop running
(``TASReplaceNodeOnPodTermination``), and to an untolerated ``NoSchedule`` taint only when the
pods on the node terminate (``TASReplaceNodeOnNodeTaints``): the ``health`` kind, whose pods
keep running, is expected to show no reaction from Kueue. Goal (issue 34): at most 0.5x Kueue's
time, 0 ranks lost or doubled.

    python scripts/bench/recovery.py --timeout-s 240                 # validation, about 20 minutes
    python scripts/bench/recovery.py --rounds 2 --timeout-s 600      # the issue's run
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kubernetes import client  # noqa: E402

from scheduler.devcluster.apply import wait_nodes_settled  # noqa: E402
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL  # noqa: E402
from scheduler.devcluster.processes import run_owning_processes  # noqa: E402
from scheduler.k8s.informer import JOBS, NODES, PODS  # noqa: E402
from scripts.bench.benchlib import balanced_order, code_from, load_average, ratio, split_engine  # noqa: E402
from tests.conformance.harness import LAYER, Run, job_object, start_run, team_namespace  # noqa: E402

ENGINES = ("kueue", "toposched")
KINDS = ("health", "notready", "deleted")
L3 = LAYER + "3"
HEALTH = "sagemaker.amazonaws.com/node-health-status"
HEALTH_TAINT = {"key": HEALTH, "value": "Unschedulable", "effect": "NoSchedule"}
INDEX = "batch.kubernetes.io/job-completion-index"
TEAM = "team-a"
DESCRIPTION = {"name": "recovery", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 4], "nodesPerDomain": 20}
KUEUE_CONFIG = {"featureGates": {"TASFailedNodeReplacement": True}}


# ---------------------------------------------------------------------- what a poll sees


def running_ranks(pods: Sequence[Mapping[str, Any]]) -> dict[int, list[tuple[str, str]]]:
    """Rank -> [(pod uid, node)] of the pods that run it now: phase Running, bound, not being
    deleted. A rank with two entries runs twice."""
    out: dict[int, list[tuple[str, str]]] = {}
    for pod in pods:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        index = (meta.get("annotations") or {}).get(INDEX) or (meta.get("labels") or {}).get(INDEX)
        if index is None or meta.get("deletionTimestamp") or status.get("phase") != "Running" or \
                not spec.get("nodeName"):
            continue
        out.setdefault(int(index), []).append((meta["uid"], spec["nodeName"]))
    return out


@dataclass
class RecoveryTrack:
    """The ranks before the failure and what the polls after it saw."""

    ranks: int
    failed_node: str
    before: dict[int, tuple[str, str]]  # rank -> (uid, node)
    domain_of: Mapping[str, str]  # node -> layer-3 domain
    injected: float = 0.0
    first_change: float | None = None
    recovered: float | None = None
    doubled: set[int] = field(default_factory=set)
    after: dict[int, tuple[str, str]] = field(default_factory=dict)

    def observe(self, now: float, ranks: Mapping[int, list[tuple[str, str]]]) -> bool:
        """Record one poll; True once every rank runs exactly once away from the failed node."""
        self.doubled |= {r for r, pods in ranks.items() if len(pods) > 1}
        current = {r: pods[0] for r, pods in ranks.items() if len(pods) == 1}
        if self.first_change is None and current != self.before:
            self.first_change = now
        whole = len(current) == self.ranks and len(ranks) == self.ranks and \
            all(node != self.failed_node for _, node in current.values())
        if whole and self.recovered is None:
            self.recovered = now
            self.after = current
        return whole


@dataclass(frozen=True)
class RecoveryResult:
    engine: str
    kind: str
    recovered_s: float  # NaN: not recovered within the timeout
    reacted_s: float  # NaN: no change to the job's pods at all
    ranks_doubled: int
    ranks_restarted: int  # of those running at the end (or last seen)
    ranks_out_of_domain: int
    load: str


def result_of(track: RecoveryTrack, engine: str, kind: str, load: str) -> RecoveryResult:
    end = track.after
    domain = {track.domain_of.get(node) for _, node in track.before.values()}
    home = next(iter(domain)) if len(domain) == 1 else None
    return RecoveryResult(
        engine, kind,
        track.recovered - track.injected if track.recovered is not None else math.nan,
        track.first_change - track.injected if track.first_change is not None else math.nan,
        len(track.doubled),
        sum(1 for r, (uid, _) in end.items() if track.before.get(r, ("", ""))[0] != uid),
        sum(1 for _, node in end.values() if home is not None and track.domain_of.get(node) != home),
        load)


# ---------------------------------------------------------------------- failures


def inject(run: Run, kind: str, node: str) -> None:
    if kind == "health":
        current = run.api.get(NODES, node)
        taints = [t for t in (current["spec"].get("taints") or []) if t["key"] != HEALTH] + [HEALTH_TAINT]
        run.api.merge_patch(NODES, node, {"metadata": {"labels": {HEALTH: "UnschedulablePendingReplacement"}},
                                          "spec": {"taints": taints}})
    elif kind == "notready":
        run.api.merge_patch(NODES, node, {"metadata": {"labels": {FAKE_NODE_LABEL: None}}})
        current = run.api.get(NODES, node)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [c for c in (current.get("status") or {}).get("conditions") or [] if c["type"] != "Ready"]
        conditions.append({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                           "message": "kubelet stopped posting node status (recovery bench)",
                           "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
        run.api.merge_patch(NODES, node, {"status": {"conditions": conditions}}, subresource="status")
    elif kind == "deleted":
        run.fail_node(node)  # remembered by the run: cleanup() creates it again
    else:
        raise ValueError(f"unknown failure kind {kind!r}")


def restore(run: Run, kind: str, node: str) -> None:
    """The node healthy again (the job is gone by now)."""
    if kind == "health":
        current = run.api.get(NODES, node)
        taints = [t for t in (current["spec"].get("taints") or []) if t["key"] != HEALTH]
        run.api.merge_patch(NODES, node, {"metadata": {"labels": {HEALTH: "Schedulable"}},
                                          "spec": {"taints": taints or None}})
    elif kind == "notready":
        run.api.merge_patch(NODES, node, {"metadata": {"labels": {FAKE_NODE_LABEL: "true"}}})  # KWOK again
    elif kind == "deleted":
        pass  # run.cleanup() creates it again
    wait_nodes_settled(run.kube, [n["metadata"]["name"] for n in run.nodes if n["metadata"]["name"] != node
                                  or kind != "deleted"], timeout_s=180)


def force_delete_pods(run: Run, ns: str) -> None:
    """Pods left terminating on a node no kubelet serves are never finished: remove them."""
    for pod in run.api.list(PODS, ns).get("items", []):
        if pod["metadata"].get("deletionTimestamp"):
            try:
                run.api.delete(PODS, pod["metadata"]["name"], ns, gracePeriodSeconds=0)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


# ---------------------------------------------------------------------- one engine


def job_pods(run: Run, name: str) -> list[dict[str, Any]]:
    return run.api.list(PODS, team_namespace(TEAM), labelSelector=f"batch.kubernetes.io/job-name={name}")["items"]


def one_kind(run: Run, engine: str, kind: str, args: argparse.Namespace) -> RecoveryResult:
    name = f"rec-{kind}"
    ns = team_namespace(TEAM)
    domain_of = {n["metadata"]["name"]: n["metadata"]["labels"][L3] for n in run.nodes}
    run.api.create(JOBS, job_object({"name": name, "team": TEAM, "pods": args.pods, "gpus": 8,
                                     "required": "layer-3"}), ns)
    deadline = time.monotonic() + 180
    while True:
        ranks = running_ranks(job_pods(run, name))
        if len(ranks) == args.pods and all(len(v) == 1 for v in ranks.values()):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{engine}: {name} did not get {args.pods} running ranks in 180 s; "
                             f"logs in {run.cluster.logs}")
        time.sleep(0.3)
    before = {r: v[0] for r, v in ranks.items()}
    failed = before[args.pods // 2][1]
    track = RecoveryTrack(args.pods, failed, before, domain_of)
    load = load_average()
    track.injected = time.monotonic()
    inject(run, kind, failed)
    while time.monotonic() - track.injected < args.timeout_s:
        if track.observe(time.monotonic(), running_ranks(job_pods(run, name))):
            # watch a little longer: a late second copy of a rank still counts
            settle = time.monotonic() + args.settle_s
            while time.monotonic() < settle:
                track.observe(time.monotonic(), running_ranks(job_pods(run, name)))
                time.sleep(0.2)
            break
        time.sleep(0.2)
    if track.recovered is None:  # what runs at the end, for the restarted / domain counts
        track.after = {r: v[0] for r, v in running_ranks(job_pods(run, name)).items() if len(v) == 1}
    result = result_of(track, engine, kind, load)
    print(f"   {engine} {kind}: {describe(result)}", flush=True)
    run.api.delete(JOBS, name, ns, propagationPolicy="Background")
    deadline = time.monotonic() + 120
    while job_pods(run, name) and time.monotonic() < deadline:
        force_delete_pods(run, ns)
        time.sleep(0.5)
    restore(run, kind, failed)
    run.cleanup()  # workloads gone, deleted nodes back, caches settled
    return result


def run_engine(engine: str, args: argparse.Namespace, round_index: int) -> list[RecoveryResult]:
    directory = Path(tempfile.mkdtemp(prefix=f"recovery-{engine.replace('/', '_')}-"))
    print(f"-- round {round_index + 1}: {engine} (load {load_average()})", flush=True)
    queues = {"teams": {TEAM: {"gpu": 8 * 80, "withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}}}
    name, tree = split_engine(engine)
    with code_from(tree):
        run = start_run(name, directory, DESCRIPTION, queues, kueue_config=KUEUE_CONFIG)
    try:
        return [one_kind(run, engine, kind, args) for kind in args.kinds]
    finally:
        run.stop()
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------------- report


def describe(r: RecoveryResult) -> str:
    recovered = f"every rank running again after {r.recovered_s:.1f}s" if not math.isnan(r.recovered_s) \
        else "NOT recovered within the timeout"
    reacted = f"first change {r.reacted_s:.1f}s" if not math.isnan(r.reacted_s) else "no reaction at all"
    return (f"{recovered}; {reacted}; ranks doubled {r.ranks_doubled}, restarted {r.ranks_restarted}, "
            f"outside the domain {r.ranks_out_of_domain} (load {r.load})")


def seconds(value: float) -> str:
    return "not recovered" if math.isnan(value) else f"{value:.1f}s"


def ratio_lines(results: Sequence[RecoveryResult], rounds: int, reference: str = "kueue") -> list[str]:
    """Each engine / ``reference`` per kind within each round (results in run order, rounds of
    equal size): toposched against Kueue, or new code against old (``toposched@OLD``)."""
    per_round = len(results) // max(1, rounds)
    peer_name = "Kueue" if reference == "kueue" else reference
    lines = []
    for r in range(rounds):
        chunk = results[r * per_round:(r + 1) * per_round]
        by = {(x.engine, x.kind): x for x in chunk}
        for kind in dict.fromkeys(x.kind for x in chunk):
            k = by.get((reference, kind))
            for engine in dict.fromkeys(x.engine for x in chunk if x.engine != reference):
                t = by.get((engine, kind))
                if k is None or t is None:
                    continue
                if math.isnan(k.recovered_s):
                    verdict = f"{peer_name} did not recover within the timeout" + (
                        " and did not react" if math.isnan(k.reacted_s) else "")
                else:
                    verdict = f"{engine}/{peer_name} {ratio(t.recovered_s, k.recovered_s):.2f}x"
                lines.append(f"round {r + 1} {kind}: {engine} {seconds(t.recovered_s)}, {peer_name} "
                             f"{seconds(k.recovered_s)}: {verdict}")
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default=",".join(ENGINES), help="round 1 in this order, round 2 reversed, ...")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"failure kinds, from {', '.join(KINDS)}")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--pods", type=int, default=16, help="ranks of the job (at most 20: one layer-3 domain)")
    ap.add_argument("--timeout-s", type=float, default=600, help="per failure, from the injection")
    ap.add_argument("--settle-s", type=float, default=5.0, help="keep watching this long after recovery")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    try:
        names = [split_engine(e)[0] for e in args.engines]
    except ValueError as exc:
        ap.error(f"--engines: {exc}")
    if not args.engines or any(n not in ENGINES for n in names):
        ap.error(f"--engines: choose from {', '.join(ENGINES)} (toposched may end in @DIR: that tree's code)")
    if not args.kinds or any(k not in KINDS for k in args.kinds):
        ap.error(f"--kinds: choose from {', '.join(KINDS)}")
    if not 2 <= args.pods <= 20 or args.rounds < 1 or args.timeout_s <= 0:
        ap.error("--pods 2..20, --rounds and --timeout-s positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    results: list[RecoveryResult] = []
    for round_index in range(args.rounds):
        for engine in balanced_order(args.engines, round_index):
            results += run_engine(engine, args, round_index)
    print("\n== summary")
    for r in results:
        print(f"{r.engine} {r.kind}: {describe(r)}")
    reference = "kueue" if "kueue" in args.engines else args.engines[0]
    print("\n".join(ratio_lines(results, args.rounds, reference)))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    # Its control planes never outlive it: stopped on SIGTERM/SIGINT/SIGHUP, ended with it on SIGKILL.
    sys.exit(run_owning_processes(main))
