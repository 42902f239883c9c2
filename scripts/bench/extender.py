#!/usr/bin/env python3
"""Extender benchmark: decision latency in-process vs over HTTP, and the real kube-scheduler's
pods/s on fake nodes with and without the extender, in one run.

    python scripts/bench/extender.py                         # latency at 1,000 and 5,000 nodes
    python scripts/bench/extender.py --cluster --pods 300    # + kube-scheduler throughput, 5,000 nodes

Latency part (no cluster): a SlotBook over generated HyperPod nodes, one admitted workload with
one pod per node on ``--assigned`` nodes; filter gets every node name (nodeCacheCapable payload,
as with percentageOfNodesToScore=100), prioritize gets the nodes filter passed. Bounded:
``--requests`` calls per verb and size, after a short warm-up.

Throughput part (``--cluster``): its own local control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, KWOK) with ``--cluster-nodes`` fake nodes (or one
fresh cluster per size of ``--series``) and two extender processes. The nodes are waited for
until Ready and free of the node-lifecycle controller's not-ready taint (an unsettled node is
invisible to kube-scheduler's own filters, which once made the extender look twice as costly as
it is). Then rounds of three phases, seconds apart: A, kube-scheduler with the toposched
profile and no extender; B, the same profile calling the extender with ``--binder extender``
(filter, prioritize, bind); C, with ``--binder kube-scheduler`` (filter only: it passes one
node and reserves its slot; kube-scheduler binds). B and C place pods of an admitted Workload
whose assignment is spread over the whole cluster. In each phase the pods are created while no
profile serves them, then kube-scheduler is restarted with the phase's configuration; pods/s =
pods / (last bind - first bind) as a pod watch sees the binds, with the gaps between binds (a
stall is a gap over 100 ms); the phase's pods are then deleted. Small clusters pack several
pods a node.

Order and stopping rule: round r runs A, B, C when r is even and C, B, A when it is odd, so
over each pair of rounds every phase has the same mean position (the earlier bench always ran
A first and reported a cost of -15 %: an order bias, not a result). Each round gives a cost per
extender mode, 1 - (its pods/s) / (A's pods/s); rounds are added in pairs, at least
``--rounds`` and at most ``--max-rounds``, until the 95 % t interval of the mean cost of each
mode is at most ``--resolve`` either side of its mean or lies wholly on one side of both 0 and
the 20 % goal. The figure is that mean with its interval, printed with every round's order,
ratios and load average. ``--profile DIR`` records each extender with py-spy during its phases.
Everything it starts is stopped at the end.

    python scripts/bench/extender.py --skip-latency --cluster --series 100,1300,5000,10000 --pods 800
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.core.assignment import encode_v1beta2  # noqa: E402
from scheduler.core.fakecluster import generate_nodes  # noqa: E402
from scheduler.core.nodes import HOSTNAME_LABEL, node_from_k8s  # noqa: E402
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement  # noqa: E402
from scheduler.devcluster.processes import run_owning_processes  # noqa: E402
from scheduler.extender.book import SlotBook  # noqa: E402
from scheduler.extender.server import Extender, ExtenderHTTPServer  # noqa: E402
from scheduler.extender.workload_view import pod_ref, workload_view  # noqa: E402
from scripts.bench.benchlib import Interval, balanced_order, even_rounds, load_average, mean_interval, resolved  # noqa: E402


def description(n: int) -> dict[str, Any]:
    return {
        "name": f"bench-{n}",
        "layers": [2, 5, 25],
        "nodesPerDomain": max(1, -(-n // 250)),
        "nodeCount": n,
    }


def assignment(hosts: list[str] | dict[str, int], per_node: int = 1) -> dict[str, Any]:
    counts = hosts if isinstance(hosts, dict) else dict.fromkeys(hosts, per_node)
    placement = PodSetPlacement(
        "main",
        sum(counts.values()),
        (HOSTNAME_LABEL,),
        tuple(DomainAssignment((h,), counts[h]) for h in sorted(counts)),
    )
    return encode_v1beta2(placement)


def workload_obj(ns: str, name: str, ta: dict[str, Any], count: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"nvidia.com/gpu": "8"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def pod_obj(ns: str, name: str, workload: str | None, scheduler: str = "toposched",
            gpus: int = 8) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"uid-{name}"}
    if workload:
        meta["annotations"] = {"kueue.x-k8s.io/workload": workload}
        meta["labels"] = {"kueue.x-k8s.io/podset": "main"}
    gpu = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": scheduler,
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": gpu, "limits": gpu}}],
        },
    }


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def timed(fn: Callable[[], Any], n: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def latency(n_nodes: int, n_assigned: int, requests: int) -> list[tuple[str, float, float]]:
    nodes = generate_nodes(description(n_nodes))
    names = [n["metadata"]["name"] for n in nodes]
    book = SlotBook()
    for n in nodes:
        book.upsert_node(node_from_k8s(n))
    # Assigned nodes spread over layer-3 domains, like a fragmented cluster.
    hosts = names[:: max(1, n_nodes // n_assigned)][:n_assigned]
    wl = workload_obj("bench", "wl", assignment(hosts), len(hosts))
    wl["status"] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "count": len(hosts), "topologyAssignment": assignment(hosts)}
            ],
        },
        "conditions": [{"type": "Admitted", "status": "True"}],
    }
    book.upsert_workload(workload_view(wl))
    # Half the slots are already taken by bound siblings (realistic mid-gang state).
    for i, h in enumerate(hosts[: len(hosts) // 2]):
        sib = pod_obj("bench", f"sib-{i}", "wl")
        sib["spec"]["nodeName"] = h
        book.observe_pod(pod_ref(sib))
    ext = Extender(book)
    ext.ready.set()
    ours = pod_obj("bench", "p", "wl")
    other = pod_obj("bench", "web", None, "default-scheduler")
    f_args = {"Pod": ours, "Nodes": None, "NodeNames": names}
    passed = ext.filter(f_args)["NodeNames"]
    p_args = {"Pod": ours, "Nodes": None, "NodeNames": passed}
    t_args = {"Pod": other, "Nodes": None, "NodeNames": names}
    rows = []
    server = ExtenderHTTPServer(ext, "127.0.0.1", 0)
    server.start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)

    def over_http(verb: str, body: bytes) -> Callable[[], Any]:
        def call() -> Any:
            conn.request("POST", f"/{verb}", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return json.loads(resp.read())

        return call

    try:
        for label, verb, args in (
            ("filter", "filter", f_args),
            ("prioritize", "prioritize", p_args),
            ("filter pass-through", "filter", t_args),
        ):
            fn = getattr(ext, verb)
            s = timed(lambda fn=fn, args=args: fn(args), requests)
            rows.append((f"{label} in-process", pct(s, 0.5), pct(s, 0.99)))
            body = json.dumps(args).encode()
            s = timed(over_http(verb, body), requests)
            rows.append((f"{label} HTTP", pct(s, 0.5), pct(s, 0.99)))
    finally:
        conn.close()
        server.stop()
    print(
        f"\n{n_nodes} nodes, {len(hosts)} assigned ({len(hosts) // 2} taken), filter passes {len(passed)}, "
        f"{requests} requests each"
    )
    print(f"  {'verb':34} {'p50 ms':>9} {'p99 ms':>9}")
    for label, p50, p99 in rows:
        print(f"  {label:34} {p50:9.3f} {p99:9.3f}")
    return rows


# ---- real kube-scheduler throughput -----------------------------------------------------------


STALL_S = 0.1  # a gap between two binds longer than this is a stall, not a scheduling cycle
BINDER_PHASES = {"extender": "B", "kube-scheduler": "C"}  # extender --binder mode -> phase
# KWOK's node leases: the default (40 s, renewed every 10 s, as a kubelet) is 500 writes a
# second at 5,000 nodes and 1,000 at 10,000, made on the same 2 cores as the API server, etcd,
# kube-scheduler and the extender. With it, B and C phases at 5,000 and 10,000 nodes had gaps
# of up to 66 s between binds (one C phase: 2 pods/s) and 1.3 filter calls a pod; with a
# one-hour lease, at most 0.24 s at those sizes and one filter call a pod (docs/performance.md). A kubelet's
# lease writes come from its own machine; kube-scheduler's scheduler_perf runs no heartbeats.
NODE_LEASE_S = 3600


def wait_ready(port: int, log: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"extender not ready: see {log}")


def over_assignment(pods_inf: Any, ns: str, names: list[str], counts: dict[str, int]) -> int:
    """Pods bound beyond their node's assigned count (the slot guarantee says 0)."""
    on: dict[str, int] = {}
    for n in names:
        pod = pods_inf.get(f"{ns}/{n}")
        node = pod and pod["spec"].get("nodeName")
        if node:
            on[node] = on.get(node, 0) + 1
    return sum(max(0, k - counts.get(node, 0)) for node, k in on.items())


def pods_per_node(n_nodes: int, n_pods: int) -> tuple[int, int]:
    """(pods, pods per node): a phase's pods must fit (8 GPUs a node; each phase's pods are
    deleted after it); small clusters pack several pods a node (each asking 8 / per-node GPUs),
    and the pods are capped at capacity."""
    per_node = next((k for k in (1, 2, 4, 8) if k * n_nodes >= n_pods), 8)
    return min(n_pods, per_node * n_nodes), per_node



PHASES = ("A", "B", "C")  # A: no extender; then one phase per extender binder mode (BINDER_PHASES)
COST_GOAL = 0.20  # issue 18: the extender costs kube-scheduler under 20 % of its pods/s


@dataclass(frozen=True)
class Round:
    """One round's pods/s per phase, in the order the phases ran, and the load after it."""

    rates: dict[str, float]
    order: tuple[str, ...]
    load: str

    def cost(self, phase: str) -> float:
        """1 - phase / A; NaN when either phase did not complete."""
        a, x = self.rates.get("A", 0.0), self.rates.get(phase, 0.0)
        return 1 - x / a if a > 0 and x > 0 else float("nan")


def cost_interval(rounds: list[Round], phase: str) -> Interval:
    return mean_interval([r.cost(phase) for r in rounds])


def should_stop(rounds: list[Round], min_rounds: int, max_rounds: int, half_width: float) -> bool:
    """After a whole pair of rounds (so the orders stay balanced), at least ``min_rounds``: stop
    once every extender phase's cost is resolved (benchlib.resolved, bounds 0 and the goal), or
    at ``max_rounds`` whatever the intervals say."""
    done = len(rounds)
    if done >= max_rounds:
        return True
    if done < min_rounds or done % 2:
        return False
    return all(resolved(cost_interval(rounds, phase), half_width, bounds=(0.0, COST_GOAL)) for phase in PHASES[1:])


class Profiler:
    """py-spy recording the extender's Python stacks during the B phases (raw collapsed stacks,
    one file per phase, under ``directory``); off when ``directory`` is None."""

    def __init__(self, directory: Path | None, pid: int) -> None:
        self.directory, self.pid = directory, pid
        self.proc: Any = None

    def start(self, label: str) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        out = self.directory / f"{label}.txt"
        self.proc = subprocess.Popen(["py-spy", "record", "-p", str(self.pid), "-r", "200", "-f", "raw",
                                      "-o", str(out), "--threads", "--nonblocking"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=60)
            self.proc = None


def throughput(n_nodes: int, n_pods: int, timeout_s: float, rounds: int = 4, max_rounds: int = 16,
               resolve: float = 0.05, debug_extender: bool = False,
               profile_dir: Path | None = None) -> list[Round]:
    """Rounds of A, B, C at ``n_nodes`` in alternating order until should_stop."""
    from kubernetes import client

    from scheduler.devcluster.apply import create_nodes, node_is_settled, wait_nodes_settled
    from scheduler.devcluster.controlplane import (
        FAKE_NODE_LABEL,
        LocalCluster,
        default_scheduler_config,
        free_port,
    )
    from scheduler.extender.config import extender_entry, toposched_profile
    from scheduler.k8s.informer import PODS, WORKLOADS, Api, Informer, wait_synced
    from scheduler.kube.status import admit_status

    n_pods, per_node = pods_per_node(n_nodes, n_pods)
    gpus = 8 // per_node
    results: list[Round] = []
    tmp = Path(tempfile.mkdtemp(prefix="toposched-bench-extender-"))
    cluster = LocalCluster(tmp, node_lease_s=NODE_LEASE_S)
    t0 = time.monotonic()
    cluster.start()
    try:
        print(f"\n== {n_nodes} nodes, {n_pods} pods a phase ({per_node} a node, {gpus} GPU each), "
              f"load {load_average()}")
        print(f"control plane up in {time.monotonic() - t0:.1f}s ({tmp})", flush=True)
        api_client = cluster.api_client()
        api = Api(api_client)
        nodes = generate_nodes(description(n_nodes))
        t0 = time.monotonic()
        chunks = [nodes[i::8] for i in range(8)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda c: create_nodes(cluster.api_client(), c, FAKE_NODE_LABEL), chunks))
        # Every phase must see the same, settled cluster: a fresh node keeps the not-ready taint
        # until the node-lifecycle controller lifts it, and assigned nodes still tainted would
        # stall phase B/C pods (seen: one pod filtered 9 times while its last slots settled).
        try:
            wait_nodes_settled(api_client, [n["metadata"]["name"] for n in nodes], timeout_s=300)
        except TimeoutError as exc:  # a loaded machine: leave the stragglers out of the assignments
            raw = client.CoreV1Api(api_client).list_node(_preload_content=False)
            settled = {n["metadata"]["name"] for n in json.loads(raw.data)["items"] if node_is_settled(n)}
            nodes = [n for n in nodes if n["metadata"]["name"] in settled]
            print(f"  {exc}; {len(nodes)} settled nodes are used", flush=True)
        print(f"{n_nodes} fake nodes created and Ready in {time.monotonic() - t0:.1f}s", flush=True)
        core = client.CoreV1Api(api_client)
        ns = "bench"
        core.create_namespace({"metadata": {"name": ns}})
        # Two extender processes, one per binder mode: B (the extender binds) and C (kube-scheduler
        # binds, filter picks the node); the idle one costs next to nothing.
        ports = {mode: free_port() for mode in BINDER_PHASES}
        exts = {
            mode: cluster.start_process(
                f"toposched-extender-{mode}",
                [sys.executable, "-m", "scheduler.cli", *(["-v"] if debug_extender else []), "extender",
                 "--kubeconfig", str(cluster.kubeconfig), "--port", str(ports[mode]), "--binder", mode],
            )
            for mode in BINDER_PHASES
        }
        kubeconfig = cluster.dir / "scheduler.kubeconfig"
        base = default_scheduler_config(kubeconfig)
        profile = toposched_profile()
        bound_at: dict[str, float] = {}
        lock = threading.Lock()

        def on_pod(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            if obj["spec"].get("nodeName") and not (old or {}).get("spec", {}).get("nodeName"):
                with lock:
                    bound_at.setdefault(obj["metadata"]["name"], time.monotonic())

        pods_inf = Informer(api, PODS, field_selector="spec.schedulerName=toposched")
        pods_inf.add_handler(on_pod)
        pods_inf.start()
        wait_synced([pods_inf])
        for mode, port in ports.items():
            wait_ready(port, exts[mode].log)

        def create_pods(prefix: str, workload: str | None) -> list[str]:
            names = [f"{prefix}-{i}" for i in range(n_pods)]
            bodies = []
            for name in names:
                body = pod_obj(ns, name, workload, gpus=gpus)
                del body["metadata"]["uid"]
                bodies.append(body)
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda b: core.create_namespaced_pod(ns, b), bodies))
            return names

        def delete_pods(names: list[str]) -> None:
            """Free the phase's capacity for the next one (force delete; KWOK runs no kubelet)."""
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda n: core.delete_namespaced_pod(n, ns, grace_period_seconds=0), names))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and any(pods_inf.get(f"{ns}/{n}") for n in names):
                time.sleep(0.2)

        def run_phase(label: str, names: list[str], config: dict[str, Any]) -> float:
            t_restart = time.monotonic()
            cluster.reconfigure_scheduler(config)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                with lock:
                    done = sum(1 for n in names if n in bound_at)
                if done == len(names):
                    break
                time.sleep(0.2)
            with lock:
                times = sorted(bound_at[n] for n in names if n in bound_at)
            if len(times) < 2:
                print(f"  {label}: only {len(times)}/{len(names)} pods bound in {timeout_s:.0f}s")
                return 0.0
            rate = (len(times) - 1) / max(1e-6, times[-1] - times[0])
            gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))
            stalls = [g for g in gaps if g > STALL_S]
            print(
                f"  {label:28} {len(times)}/{len(names)} bound, first bind {times[0] - t_restart:5.1f}s "
                f"after restart, {rate:7.1f} pods/s (gap between binds ms: p50 {1000 * gaps[len(gaps) // 2]:.1f} "
                f"p90 {1000 * gaps[int(0.9 * len(gaps))]:.1f} max {1000 * gaps[-1]:.0f}; "
                f"{len(stalls)} stalls > {1000 * STALL_S:.0f} ms = {sum(stalls):.1f}s of {times[-1] - times[0]:.1f}s)",
                flush=True,
            )
            return rate

        def admit_on_free_hosts(workload: str) -> dict[str, int]:
            """A Workload admitted on n_pods free slots spread over the cluster (per_node a node
            at most)."""
            used: dict[str, int] = {}
            for p in list(pods_inf.store.values()):
                if p["spec"].get("nodeName"):
                    used[p["spec"]["nodeName"]] = used.get(p["spec"]["nodeName"], 0) + 1
            free = {n["metadata"]["name"]: per_node - used.get(n["metadata"]["name"], 0) for n in nodes}
            free_hosts = [h for h, k in free.items() if k > 0]
            stride = max(1, len(free_hosts) // -(-n_pods // per_node))
            counts: dict[str, int] = {}
            for h in free_hosts[::stride] + free_hosts:
                if sum(counts.values()) >= n_pods:
                    break
                if h not in counts:
                    counts[h] = min(free[h], n_pods - sum(counts.values()))
            ta = assignment(counts)
            wl = api.create(WORKLOADS, workload_obj(ns, workload, ta, n_pods), ns)
            psa = {
                "name": "main",
                "flavors": {"nvidia.com/gpu": "rf"},
                "resourceUsage": {"nvidia.com/gpu": str(gpus * n_pods)},
                "count": n_pods,
                "topologyAssignment": ta,
            }
            api.merge_patch(
                WORKLOADS,
                workload,
                {"status": admit_status(wl, "cq", [psa], dt.datetime.now(dt.UTC))},
                ns,
                subresource="status",
            )
            time.sleep(2)  # the extender's informer sees the admission
            return counts

        without_extender = default_scheduler_config(kubeconfig, [profile])
        configs = {mode: default_scheduler_config(kubeconfig, [profile], [extender_entry(port, binder=mode)])
                   for mode, port in ports.items()}
        # Rounds of A, B, C and C, B, A: the shared machine's load drifts, so each round's ratios
        # compare phases that ran seconds apart, and the alternating order cancels the position.
        binder_of = {label: mode for mode, label in BINDER_PHASES.items()}

        def phase(label: str, r: int) -> float:
            cluster.reconfigure_scheduler(base)  # no profile serves toposched pods while they are created
            tag = f"{label.lower()}{r}"
            if label == "A":  # the toposched profile without the extender (kube-scheduler alone)
                names = create_pods(tag, None)
                rate = run_phase("A: profile, no extender", names, without_extender)
                delete_pods(names)
                return rate
            # The same profile calling the extender; pods of an admitted Workload whose
            # assignment is spread over the whole cluster.
            mode = binder_of[label]
            counts = admit_on_free_hosts(f"wl-{tag}")
            names = create_pods(tag, f"wl-{tag}")
            profiler = Profiler(profile_dir and profile_dir / f"{n_nodes}-{mode}", exts[mode].pid)
            profiler.start(f"round{r + 1}")
            try:
                rate = run_phase(f"{label}: extender, {mode} binds", names, configs[mode])
            finally:
                profiler.stop()
            print(f"  {label} pods over their assigned slots: {over_assignment(pods_inf, ns, names, counts)}")
            delete_pods(names)
            return rate

        min_rounds = even_rounds(rounds)
        while not should_stop(results, min_rounds, max(max_rounds, min_rounds), resolve):
            r = len(results)
            order = tuple(balanced_order(PHASES, r))
            print(f" round {r + 1} (order {' '.join(order)}; at least {min_rounds}, at most "
                  f"{max(max_rounds, min_rounds)})", flush=True)
            rates = {label: phase(label, r) for label in order}
            results.append(Round(rates, order, load_average()))
            print(f"  ratios B/A {1 - results[-1].cost('B'):.2f}, C/A {1 - results[-1].cost('C'):.2f} "
                  f"(load {results[-1].load}); cost so far B {cost_interval(results, 'B')}, "
                  f"C {cost_interval(results, 'C')}", flush=True)
        for mode, port in ports.items():
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/stats")
                print(f"  extender ({mode} binds) server-side: {json.loads(conn.getresponse().read())['requests']}")
            except OSError:
                pass
        pods_inf.stop()
    finally:
        cluster.stop()
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,5000", help="node counts for the latency part")
    ap.add_argument("--assigned", type=int, default=256, help="assigned nodes (one pod each)")
    ap.add_argument("--requests", type=int, default=200, help="timed requests per verb and size")
    ap.add_argument("--cluster", action="store_true", help="also measure the real kube-scheduler's pods/s")
    ap.add_argument("--cluster-nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=300, help="pods per throughput phase")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per throughput phase")
    ap.add_argument("--rounds", type=int, default=4,
                    help="at least this many rounds of A, B, C (rounded up to whole A-B-C / C-B-A pairs)")
    ap.add_argument("--max-rounds", type=int, default=16,
                    help="at most this many rounds, whether or not the cost is resolved")
    ap.add_argument("--resolve", type=float, default=0.05,
                    help="stop when the 95 %% interval of each mode's mean cost is within this of its mean "
                         "(0.05: +-5 points) or clear of both 0 and the 20 %% goal")
    ap.add_argument("--series", default="",
                    help="comma-separated node counts: one fresh cluster each (e.g. 100,1300,5000,10000), "
                         "then a table of A and B pods/s and the cost")
    ap.add_argument("--profile", type=Path, default=None,
                    help="record the extender with py-spy during every B phase (raw stacks under this directory)")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--debug-extender", action="store_true",
                    help="run the extender with -v (one log line per request and filter decision)")
    args = ap.parse_args()
    if not args.skip_latency:
        for size in (int(s) for s in args.sizes.split(",")):
            latency(size, min(args.assigned, size), args.requests)
    if not args.cluster:
        return 0
    sizes = [int(s) for s in args.series.split(",")] if args.series else [args.cluster_nodes]
    table = [(size, throughput(size, args.pods, args.timeout, args.rounds, args.max_rounds, args.resolve,
                               args.debug_extender, args.profile))
             for size in sizes]
    print("\nseries (mean over rounds with its 95 % interval; rounds alternate A-B-C and C-B-A; "
          "cost = 1 - pods/s of the mode / pods/s of A in the same round)")
    print("\n".join(series_table(table, args.pods)))
    return 0


def series_table(table: list[tuple[int, list[Round]]], pods: int) -> list[str]:
    lines = [f"  {'nodes':>6} {'pods':>5} {'A pods/s':>9} {'B pods/s':>9} {'C pods/s':>9} {'rounds':>6}  "
             f"{'B cost [95 % interval]':>24}  {'C cost [95 % interval]':>24}  per round: order C/A; load"]
    for size, rows in table:
        done = [r for r in rows if r.rates.get("A")]
        if not done:
            lines.append(f"  {size:6} (no complete round)")
            continue
        med = {p: statistics.median(r.rates.get(p, 0.0) for r in done) for p in PHASES}
        cells = []
        for phase in PHASES[1:]:
            interval = cost_interval(done, phase)
            cells.append(f"{100 * interval.mean:5.1f} % [{100 * interval.low:5.1f}, {100 * interval.high:5.1f}]")
        per_round = ", ".join(f"{''.join(r.order)} {1 - r.cost('C'):.2f}" for r in done)
        lines.append(f"  {size:6} {pods_per_node(size, pods)[0]:5} {med['A']:9.1f} {med['B']:9.1f} {med['C']:9.1f} "
                     f"{len(done):6}  {cells[0]:>24}  {cells[1]:>24}  {per_round}; {' | '.join(r.load for r in done)}")
    return lines


if __name__ == "__main__":
    # Its control planes never outlive it: stopped on SIGTERM/SIGINT/SIGHUP, ended with it on SIGKILL.
    sys.exit(run_owning_processes(main))
