#!/usr/bin/env python3
"""Admission benchmark in the shape of Kueue's TAS performance test, END TO END on the local
control plane (the in-process twin is scripts/bench/admission.py; its shape definitions are
imported, not repeated).

Real batch/v1 Jobs go through the webhook (suspend + scheduler name), toposched's controller
(Workload, admission cycle, unsuspend with the rack selector), the Job controller (pods),
kube-scheduler + the toposched extender (binding) and KWOK (Running). A small driver plays the
workload: once all pods of a job are Running it waits the class's runtime (200 ms / 500 ms /
1 s) and labels the pods ``toposched.dev/fake-phase=Succeeded``, so the job completes and its
quota is released exactly as in a live cluster.

Shape (reference/kueue.md 5.1): 1 block x ``--racks`` racks x ``--nodes-per-rack`` nodes (96
CPU, 256Gi), ``--cohorts`` x ``--queues-per-cohort`` ClusterQueues (nominal 20 CPU,
borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue LowerPriority), per CQ
``round(350/100/50 x --scale)`` small/medium/large workloads split rack-required/preferred,
with Kueue's arrival intervals and priorities. Kueue's run is 640 nodes and 15,000 workloads
(``--scale 1``) in ~401.5 s (~37 admissions/s) on envtest (API server + etcd, no Job
controller, no kube-scheduler, no pods); this run includes all of those, on 2 shared cores.

Printed: admissions/s, time to admission p50/p99 per class (driver clock: Job created ->
QuotaReserved=True seen on the watch), ClusterQueue utilisation (time-average admitted CPU /
nominal over the run), preemptions, and the ratio to Kueue's figure.

    python scripts/bench/admission_e2e.py                        # 300 workloads, 640 nodes (~2 min)
    python scripts/bench/admission_e2e.py --nodes-per-rack 8     # 80 nodes
    python scripts/bench/admission_e2e.py --scale 0.05 --timeout 600
"""

from __future__ import annotations

import argparse
import heapq
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

def _load_shape() -> Any:
    """scripts/bench/admission.py, loaded by path: the name ``admission`` is the webhook package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_admission_shape", Path(__file__).with_name("admission.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_shape = _load_shape()
BLOCK, RACK, HOST, FLAVOR, CLASSES = _shape.BLOCK, _shape.RACK, _shape.HOST, _shape.FLAVOR, _shape.CLASSES
KUEUE_WALL_S, KUEUE_ADMISSIONS_PER_S = _shape.KUEUE_WALL_S, _shape.KUEUE_ADMISSIONS_PER_S
build_arrivals, build_nodes, build_queues = _shape.build_arrivals, _shape.build_nodes, _shape.build_queues

from kubernetes import client  # noqa: E402

from scheduler.core.resources import format_quantity  # noqa: E402
from scheduler.core.topology_request import request_to_annotations  # noqa: E402
from scheduler.devcluster.apply import apply_objects, create_nodes, wait_nodes_settled  # noqa: E402
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, LocalCluster  # noqa: E402
from scheduler.devcluster.processes import run_owning_processes  # noqa: E402
from scheduler.devcluster.stack import StackPorts, start_toposched  # noqa: E402
from scheduler.k8s.informer import JOBS, PODS, WORKLOADS, Api  # noqa: E402

KUEUE = "kueue.x-k8s.io/v1beta2"
TOPOLOGY = "default-topology"
FAKE_PHASE = "toposched.dev/fake-phase"


# ---------------------------------------------------------------------- shape -> Kubernetes objects


def node_objects(racks: int, per_rack: int) -> list[dict[str, Any]]:
    out = []
    for n in build_nodes(racks, per_rack):
        alloc = {res: format_quantity(v, res) for res, v in n.allocatable.items()}
        out.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": dict(n.labels)},
                    "spec": {}, "status": {"capacity": alloc, "allocatable": alloc, "conditions": [
                        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake node"}]}})
    return out


def queue_objects(cqs: dict[str, Any], lqs: dict[str, Any]) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": TOPOLOGY},
         "spec": {"levels": [{"nodeLabel": lv} for lv in (BLOCK, RACK, HOST)]}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
         "spec": {"nodeLabels": {"tas-node-group": "tas"}, "topologyName": TOPOLOGY}},
    ]
    for prio in sorted({c[4] for c in CLASSES.values()}):
        objs.append({"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": f"bench-p{prio}"},
                     "value": prio})
    for cq in cqs.values():
        groups = []
        for g in cq.resource_groups:
            flavors = []
            for f in g.flavors:
                resources = []
                for res, q in f.resources.items():
                    r = {"name": res, "nominalQuota": format_quantity(q.nominal, res)}
                    if q.borrowing_limit is not None:
                        r["borrowingLimit"] = format_quantity(q.borrowing_limit, res)
                    if q.lending_limit is not None:
                        r["lendingLimit"] = format_quantity(q.lending_limit, res)
                    resources.append(r)
                flavors.append({"name": f.name, "resources": resources})
            groups.append({"coveredResources": list(g.covered_resources), "flavors": flavors})
        objs.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq.name}, "spec": {
            "cohortName": cq.cohort, "namespaceSelector": {}, "queueingStrategy": cq.queueing_strategy,
            "preemption": {"withinClusterQueue": cq.preemption.within_cluster_queue,
                           "reclaimWithinCohort": cq.preemption.reclaim_within_cohort},
            "resourceGroups": groups}})
    for lq in lqs.values():
        objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": lq.namespace}})
        objs.append({"apiVersion": KUEUE, "kind": "LocalQueue",
                     "metadata": {"name": lq.name, "namespace": lq.namespace},
                     "spec": {"clusterQueue": lq.cluster_queue}})
    return objs


def job_object(spec: Any) -> dict[str, Any]:
    (ps,) = spec.pod_sets
    ann = request_to_annotations(ps.topology)
    cpu = format_quantity(ps.requests["cpu"], "cpu")
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": spec.name, "namespace": spec.namespace,
                     "labels": {"kueue.x-k8s.io/queue-name": spec.queue_name,
                                "kueue.x-k8s.io/priority-class": f"bench-p{spec.priority}"}},
        "spec": {"parallelism": ps.count, "completions": ps.count, "backoffLimit": 0, "template": {
            "metadata": {"annotations": ann},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}}},
    }


# ---------------------------------------------------------------------- the driver


@dataclass
class Row:
    key: str
    cls: str
    runtime: float
    pods: int
    cluster_queue: str
    created: float | None = None
    admitted: float | None = None
    completed: float | None = None
    running: set[str] = field(default_factory=set)
    finish_scheduled: bool = False
    reservations: list[list[float]] = field(default_factory=list)  # [start, end] of each reservation
    cpu: int = 0
    all_running: float | None = None  # last run: every pod Running
    labelled: float | None = None  # last run: the driver marked the pods Succeeded


class Driver:
    def __init__(self, api: Api, rows: dict[str, Row]) -> None:
        self.api, self.rows = api, rows
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.finishes: list[tuple[float, str]] = []
        self.preemptions = 0
        self.reserved: dict[str, bool] = {}
        self.preempted: dict[str, bool] = {}
        self.threads = [threading.Thread(target=self._watch, args=(r, h), daemon=True)
                        for r, h in ((WORKLOADS, self._workload), (PODS, self._pod), (JOBS, self._job))]
        self.threads.append(threading.Thread(target=self._finisher, daemon=True))
        for t in self.threads:
            t.start()

    def _watch(self, resource: Any, handle: Any) -> None:
        rv = self.api.list(resource, limit=1)["metadata"]["resourceVersion"]
        while not self.stop.is_set():
            try:
                for event in self.api.watch(resource, rv, timeout_s=30):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        rv = self.api.list(resource, limit=1)["metadata"]["resourceVersion"]
                        break
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if event["type"] != "BOOKMARK":
                        with self.lock:
                            handle(event["type"], obj, time.monotonic())
                    if self.stop.is_set():
                        return
            except Exception as exc:  # a dropped connection: resume from the last version
                if self.stop.is_set():
                    return
                print(f"  (watch {resource.plural} restarted: {type(exc).__name__})", file=sys.stderr)
                time.sleep(0.2)

    @staticmethod
    def _true(obj: dict[str, Any], type_: str) -> bool:
        return any(c.get("type") == type_ and c.get("status") == "True"
                   for c in (obj.get("status") or {}).get("conditions") or ())

    def _workload(self, kind: str, wl: dict[str, Any], now: float) -> None:
        owner = next((r["name"] for r in wl["metadata"].get("ownerReferences") or () if r.get("kind") == "Job"), "")
        row = self.rows.get(f"{wl['metadata']['namespace']}/{owner}")
        if row is None:
            return
        uid = wl["metadata"]["uid"]
        holds = (kind != "DELETED" and self._true(wl, "QuotaReserved") and not self._true(wl, "Finished"))
        if holds and not self.reserved.get(uid):
            if row.admitted is None:
                row.admitted = now
            cpu = 0
            for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
                q = (psa.get("resourceUsage") or {}).get("cpu", "0")
                cpu += int(float(q[:-1])) if q.endswith("m") else int(float(q) * 1000)
            row.cpu = cpu
            row.reservations.append([now, float("inf")])
        elif not holds and self.reserved.get(uid) and row.reservations:
            row.reservations[-1][1] = now
        self.reserved[uid] = holds
        preempted = self._true(wl, "Preempted")
        if preempted and not self.preempted.get(uid):
            self.preemptions += 1
        self.preempted[uid] = preempted

    def _pod(self, kind: str, pod: dict[str, Any], now: float) -> None:
        job = (pod["metadata"].get("labels") or {}).get("job-name")
        row = self.rows.get(f"{pod['metadata']['namespace']}/{job}")
        if row is None:
            return
        name = pod["metadata"]["name"]
        up = (kind != "DELETED" and pod.get("status", {}).get("phase") == "Running"
              and not pod["metadata"].get("deletionTimestamp")
              and FAKE_PHASE not in (pod["metadata"].get("labels") or {}))
        (row.running.add if up else row.running.discard)(name)
        if len(row.running) >= row.pods and not row.finish_scheduled:
            row.finish_scheduled = True
            row.all_running = now
            heapq.heappush(self.finishes, (now + row.runtime, row.key))
        elif len(row.running) < row.pods and up is False and FAKE_PHASE not in (pod["metadata"].get("labels") or {}):
            row.finish_scheduled = False  # pods gone before the run ended (preempted): run again when back

    def _job(self, kind: str, job: dict[str, Any], now: float) -> None:
        row = self.rows.get(f"{job['metadata']['namespace']}/{job['metadata']['name']}")
        if row is not None and row.completed is None and self._true(job, "Complete"):
            row.completed = now

    def _finisher(self) -> None:
        while not self.stop.is_set():
            due: list[tuple[str, list[str]]] = []
            with self.lock:
                while self.finishes and self.finishes[0][0] <= time.monotonic():
                    _, key = heapq.heappop(self.finishes)
                    row = self.rows[key]
                    if row.finish_scheduled and len(row.running) >= row.pods:
                        due.append((key, sorted(row.running)))
            for key, pods in due:
                self.rows[key].labelled = time.monotonic()
                ns = key.split("/", 1)[0]
                for pod in pods:
                    try:
                        self.api.merge_patch(PODS, pod, {"metadata": {"labels": {FAKE_PHASE: "Succeeded"}}}, ns)
                    except client.ApiException as exc:
                        if exc.status != 404:
                            raise
            time.sleep(0.05)


def component_cpu_seconds(cluster: LocalCluster) -> dict[str, float]:
    """CPU seconds (user + system) each process of the stack used so far, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, proc in cluster.state.processes.items():
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def run(a: argparse.Namespace) -> int:
    cqs, lqs = build_queues(a.cohorts, a.queues_per_cohort)
    arrivals = build_arrivals(cqs, a.scale)
    lq_cq = {lq.namespace: lq.cluster_queue for lq in lqs.values()}
    rows = {f"{job.spec.namespace}/{job.spec.name}": Row(
        f"{job.spec.namespace}/{job.spec.name}", job.cls, job.runtime, job.spec.pod_sets[0].count,
        lq_cq[job.spec.namespace]) for _, _, job in arrivals}
    nominal = {name: cq.resource_groups[0].flavors[0].resources["cpu"].nominal for name, cq in cqs.items()}
    workdir = Path(tempfile.mkdtemp(prefix="toposched-bench-e2e-"))
    cluster = LocalCluster(workdir)
    t_setup = time.monotonic()
    try:
        cluster.start()
        kube = cluster.api_client()
        api = Api(kube)
        node_list = node_objects(a.racks, a.nodes_per_rack)
        create_nodes(kube, node_list, FAKE_NODE_LABEL)
        wait_nodes_settled(kube, [n["metadata"]["name"] for n in node_list], timeout_s=300)
        apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "toposched-system"}}])
        apply_objects(kube, queue_objects(cqs, lqs))
        start_toposched(cluster, StackPorts.dynamic())
        print(f"setup: control plane + {a.racks * a.nodes_per_rack} nodes + {len(cqs)} CQs + toposched in "
              f"{time.monotonic() - t_setup:.1f}s (logs: {cluster.logs})")
        driver = Driver(api, rows)
        time.sleep(1)
        t0 = time.monotonic()
        for offset, _key, job in arrivals:  # Kueue's arrival times (creation is paced, never ahead)
            wait = t0 + offset - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            key = f"{job.spec.namespace}/{job.spec.name}"
            api.create(JOBS, job_object(job.spec), job.spec.namespace)
            rows[key].created = time.monotonic()
        t_submitted = time.monotonic()
        deadline = t0 + a.timeout
        while time.monotonic() < deadline and not all(r.completed for r in rows.values()):
            time.sleep(0.5)
        driver.stop.set()
        t_end = time.monotonic()
        cpu = component_cpu_seconds(cluster)
        load_end = os.getloadavg()[0]
    finally:
        cluster.stop()
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    total = len(rows)
    got = [r for r in rows.values() if r.admitted is not None]
    done = [r for r in rows.values() if r.completed is not None]
    last_admit = max((r.admitted for r in got), default=t0)
    makespan = max((r.completed for r in done), default=t_end) - t0
    admit_span = last_admit - t0
    print(f"workloads: {total} ({len(cqs)} ClusterQueues in {a.cohorts} cohorts, "
          f"{a.racks * a.nodes_per_rack} nodes = 1 block x {a.racks} racks x {a.nodes_per_rack}), scale={a.scale}")
    print(f"submitted in {t_submitted - t0:.1f}s; admitted {len(got)}/{total}, completed {len(done)}/{total}, "
          f"preemptions {driver.preemptions}" + ("" if len(done) == total else f"  (TIMEOUT {a.timeout:.0f}s)"))
    print(f"wall: first creation -> last admission {admit_span:.1f}s, -> last completion {makespan:.1f}s")
    rate = len(got) / admit_span if admit_span > 0 else float("nan")
    print(f"admissions/s: {rate:.1f} (first creation -> last admission), "
          f"{len(got) / makespan:.1f} over the makespan")
    for cls in ("large", "medium", "small"):
        tta = [r.admitted - r.created for r in got if r.cls == cls and r.created is not None]
        print(f"time to admission {cls:6s}: p50 {pct(tta, 50):6.2f}s  p99 {pct(tta, 99):6.2f}s  (n={len(tta)})")
    stages: dict[str, list[float]] = defaultdict(list)
    for r in done:
        if not r.reservations or r.all_running is None or r.labelled is None:
            continue
        start, end = r.reservations[-1]
        stages["reserved -> all pods Running"].append(r.all_running - start)
        stages["Running -> marked Succeeded (runtime)"].append(r.labelled - r.all_running)
        stages["marked -> Job Complete"].append(r.completed - r.labelled)
        if end != float("inf"):
            stages["Job Complete -> quota released"].append(end - r.completed)
            stages["quota held (reserved -> released)"].append(end - start)
    print("pipeline per job, mean (p99): " + "; ".join(
        f"{k} {statistics.mean(v):.2f}s ({pct(v, 99):.2f}s)" for k, v in stages.items()))
    util = {}
    for name in cqs:
        used = sum(r.cpu * (min(e, t0 + makespan) - s) for r in rows.values() if r.cluster_queue == name
                   for s, e in r.reservations)
        util[name] = used / (nominal[name] * makespan) if makespan > 0 else 0.0
    print(f"CQ utilisation (time-avg admitted CPU / nominal over the makespan): min {min(util.values()):.1%}, "
          f"mean {sum(util.values()) / len(util):.1%}, max {max(util.values()):.1%}")
    print("CPU seconds used by each process during the run (setup included): " + ", ".join(
        f"{k} {v:.0f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])))
    print(f"host load average (1 min) at the end: {load_end:.1f} on {os.cpu_count()} cores "
          "(other engineers' control planes share them)")
    print(f"vs Kueue's published TAS run (~{KUEUE_WALL_S} s for 15,000 workloads, ~{KUEUE_ADMISSIONS_PER_S:.0f} "
          f"admissions/s, envtest: no Job controller, scheduler or pods): {rate / KUEUE_ADMISSIONS_PER_S:.2f}x the "
          f"rate at {total / 15000:.1%} of its workloads and {a.racks * a.nodes_per_rack / 640:.1%} of its nodes")
    return 0 if len(done) == total else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=0.02,
                    help="fraction of Kueue's 350/100/50 workloads per CQ (default 0.02 = 10 per CQ, 300 in all)")
    ap.add_argument("--timeout", type=float, default=240, help="seconds from the first creation (default 240)")
    ap.add_argument("--racks", type=int, default=10)
    ap.add_argument("--nodes-per-rack", type=int, default=64, help="default 64 = Kueue's 640 nodes")
    ap.add_argument("--keep", action="store_true", help="keep the control plane's directory (logs) afterwards")
    ap.add_argument("--cohorts", type=int, default=5)
    ap.add_argument("--queues-per-cohort", type=int, default=6)
    sys.exit(run(ap.parse_args()))


if __name__ == "__main__":
    # Its control planes never outlive it: stopped on SIGTERM/SIGINT/SIGHUP, ended with it on SIGKILL.
    sys.exit(run_owning_processes(main))
