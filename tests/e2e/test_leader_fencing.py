"""Two live controllers race over a stream of small Jobs on a dedicated local control plane
while the leader is paused (SIGSTOP) the moment it writes an admission and resumed once the
other one leads (several times), and then the API server itself is paused for 20 s. A watcher
holds the API server's history of Workloads (a watch delivers every change in resourceVersion
order, so the checks run on every state the server ever had, not on samples) and asserts that
no ClusterQueue (nor cohort) ever holds more than its quota and that no Workload is ever
admitted twice.

The cluster is this test's own: pausing the session cluster's API server would stall every
other test. ``TOPOSCHED_FENCING_JOBS`` sets the number of Jobs (default 200, as issue 13 asks),
``TOPOSCHED_FENCING_PAUSES`` the leader pauses (default 4). On main before fencing this test
failed (a Workload admitted twice by two leaders); with fencing, 200 Jobs take about 110 s.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.core.fakecluster import generate_nodes
from scheduler.devcluster import peers, processes
from scheduler.devcluster.apply import apply_objects, create_nodes, wait_nodes_settled
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, FAKE_POD_PHASE_LABEL, LocalCluster, free_ports
from scheduler.k8s.informer import JOBS, LEASES, WORKLOADS, Api, Informer, object_key

JOBS_TOTAL = int(os.environ.get("TOPOSCHED_FENCING_JOBS", "200"))
# Leader pauses: each one lands the moment the watch sees an admission (the leader is then in
# the middle of writing a cycle's decisions) and lasts until the other controller leads.
PAUSE_CYCLES = int(os.environ.get("TOPOSCHED_FENCING_PAUSES", "4"))
TIME_LIMIT_S = float(os.environ.get("TOPOSCHED_FENCING_TIME_LIMIT_S", "240"))
NS = "fencing"
FLAVOR = "fencing-plain"
KUEUE = "kueue.x-k8s.io/v1beta2"
LEASE_NS, LEASE_NAME = "toposched-system", "toposched-controller"
# Small quotas, so admission is contended. Two queues share a cohort and may borrow up to 2 CPUs.
QUEUES: dict[str, dict[str, Any]] = {
    "fence-a": {"nominal": 4, "cohort": "fence", "borrowing_limit": 2},
    "fence-b": {"nominal": 4, "cohort": "fence", "borrowing_limit": 2},
    "fence-c": {"nominal": 3, "cohort": None, "borrowing_limit": 0},
    "fence-d": {"nominal": 5, "cohort": None, "borrowing_limit": 0},
}
# Short leases, so handovers happen inside the test's time: a leader stops writing 3 s after
# its last renewal, a successor needs 4 s of seeing no change.
LEASE_ARGS = ("--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
              "--leader-elect-retry-period", "0.5", "--resync-seconds", "1")


# ---------------------------------------------------------------------- objects


def cluster_queue(name: str, nominal: int, cohort: str | None, borrowing_limit: int) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": "cpu", "nominalQuota": str(nominal)}
    spec: dict[str, Any] = {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                            "resourceGroups": [{"coveredResources": ["cpu"],
                                                "flavors": [{"name": FLAVOR, "resources": [quota]}]}]}
    if cohort:
        spec["cohortName"] = cohort
        quota["borrowingLimit"] = str(borrowing_limit)
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def queue_objects() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NS}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}, "spec": {}},
    ]
    for name, q in QUEUES.items():
        objects.append(cluster_queue(name, q["nominal"], q["cohort"], q["borrowing_limit"]))
        objects.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": NS},
                        "spec": {"clusterQueue": name}})
    return objects


def small_job(i: int) -> dict[str, Any]:
    """1-3 pods of 1 CPU that finish as soon as they run (KWOK's fake-phase stage)."""
    pods = 1 + i % 3
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"job-{i:03d}", "namespace": NS,
                     "labels": {"kueue.x-k8s.io/queue-name": list(QUEUES)[i % len(QUEUES)]}},
        # suspend: true as Kueue's webhook would set it (no webhook runs here).
        "spec": {"parallelism": pods, "completions": pods, "suspend": True, "backoffLimit": 0, "template": {
            "metadata": {"labels": {FAKE_POD_PHASE_LABEL: "Succeeded"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}}},
    }


# ---------------------------------------------------------------------- the watcher


def cpus(quantity: Any) -> float:
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def condition(wl: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (wl.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return {}


def holds_quota(wl: dict[str, Any]) -> bool:
    """Kueue: a Workload holds quota while QuotaReserved is True and it is not Finished."""
    return condition(wl, "QuotaReserved").get("status") == "True" and \
        condition(wl, "Finished").get("status") != "True"


def evictions(wl: dict[str, Any]) -> int:
    stats = (wl.get("status") or {}).get("schedulingStats") or {}
    return sum(int(e.get("count") or 0) for e in stats.get("evictions") or ())


@dataclass
class Invariants:
    """Checked on every state of the Workload collection the watch delivers."""

    violations: list[str] = field(default_factory=list)
    # uid -> (reservation, evictions seen when it was made); a reservation is identified by
    # the QuotaReserved transition time and the admission it wrote.
    reservations: dict[str, tuple[str, int]] = field(default_factory=dict)
    admitted_ever: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    states_checked: int = 0
    new_admission: threading.Event = field(default_factory=threading.Event)
    peak_usage: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def check(self, store: dict[str, dict[str, Any]], changed: dict[str, Any]) -> None:
        self.states_checked += 1
        self._check_no_double_admission(changed)
        self._check_quota(store, f"after {object_key(changed)} rv {changed['metadata'].get('resourceVersion')}")

    def _check_no_double_admission(self, wl: dict[str, Any]) -> None:
        uid = wl["metadata"]["uid"]
        if condition(wl, "Finished").get("status") == "True":
            self.finished.add(wl["metadata"]["name"])
        if not holds_quota(wl):
            return
        admission = (wl.get("status") or {}).get("admission") or {}
        reservation = json.dumps([condition(wl, "QuotaReserved").get("lastTransitionTime"), admission], sort_keys=True)
        self.admitted_ever.add(wl["metadata"]["name"])
        previous = self.reservations.get(uid)
        if previous is not None and previous[0] != reservation and evictions(wl) <= previous[1]:
            self.violations.append(f"{object_key(wl)} admitted twice without an eviction between: "
                                   f"{previous[0]} then {reservation}")
        if previous is None or previous[0] != reservation:
            self.new_admission.set()
        self.reservations[uid] = (reservation, evictions(wl))

    def _check_quota(self, store: dict[str, dict[str, Any]], when: str) -> None:
        usage: dict[str, float] = defaultdict(float)
        for wl in store.values():
            if not holds_quota(wl):
                continue
            admission = (wl.get("status") or {}).get("admission") or {}
            for psa in admission.get("podSetAssignments") or ():
                usage[admission.get("clusterQueue", "?")] += cpus((psa.get("resourceUsage") or {}).get("cpu", 0))
        cohort_usage: dict[str, float] = defaultdict(float)
        for cq, used in usage.items():
            q = QUEUES[cq]
            self.peak_usage[cq] = max(self.peak_usage[cq], used)
            if used > q["nominal"] + q["borrowing_limit"]:
                self.violations.append(f"{cq} holds {used:g} CPUs > nominal {q['nominal']} + borrowable "
                                       f"{q['borrowing_limit']} ({when})")
            if q["cohort"]:
                cohort_usage[q["cohort"]] += used
        for cohort, used in cohort_usage.items():
            limit = sum(q["nominal"] for q in QUEUES.values() if q["cohort"] == cohort)
            if used > limit:
                self.violations.append(f"cohort {cohort} holds {used:g} CPUs > its {limit} ({when})")


# ---------------------------------------------------------------------- processes


@dataclass
class Controller:
    name: str
    identity: str
    health_port: int
    proc: processes.Started | None = None


def start_controller(cluster: LocalCluster, ctl: Controller) -> None:
    ctl.proc = cluster.start_process(ctl.name, [
        sys.executable, "-m", "scheduler.cli", "controller", "--kubeconfig", str(cluster.controller_kubeconfig),
        "--identity", ctl.identity, "--health-port", str(ctl.health_port), "--grpc-port", "0",
        "--solver", "greedy", *LEASE_ARGS])
    peers.wait_http_ready(f"http://127.0.0.1:{ctl.health_port}/readyz", ctl.proc, 90)


def signal_process(proc: processes.Started, signo: signal.Signals) -> None:
    """Only a process this test started, recognised by pid AND executable."""
    assert processes.is_ours(proc.pid, proc.executable), f"pid {proc.pid} is no longer {proc.name}"
    os.kill(proc.pid, signo)


def lease_holder(api: Api) -> str | None:
    try:
        return (api.get(LEASES, LEASE_NAME, LEASE_NS).get("spec") or {}).get("holderIdentity") or None
    except client.ApiException:
        return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(Path(tmp_path_factory.mktemp("fencing"))).start()
    try:
        kube = local.api_client()
        nodes = generate_nodes({"name": "e2e-fencing", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 1],
                                "nodesPerDomain": 3})
        create_nodes(kube, nodes, FAKE_NODE_LABEL)
        wait_nodes_settled(kube, [n["metadata"]["name"] for n in nodes])
        apply_objects(kube, queue_objects())
        yield local
    finally:
        local.stop()


def test_two_controllers_never_overcommit_or_double_admit_through_pauses(cluster: LocalCluster) -> None:
    began = time.monotonic()
    api = Api(cluster.api_client())
    ports = free_ports(2)
    controllers = [Controller("toposched-controller-a", "ctl-a", ports[0]),
                   Controller("toposched-controller-b", "ctl-b", ports[1])]
    for ctl in controllers:
        start_controller(cluster, ctl)

    invariants = Invariants()
    watcher = Informer(api, WORKLOADS)
    watcher.add_handler(lambda _kind, wl, _old: invariants.check(watcher.store, wl))
    watcher.start()
    assert watcher.synced.wait(30)

    submitted: list[str] = []

    def submit_stream() -> None:  # a steady stream, ~6 Jobs a second
        for i in range(JOBS_TOTAL):
            job = small_job(i)
            for _attempt in range(40):  # the API server may be paused: keep trying
                try:
                    api.create(JOBS, job, NS)
                    break
                except client.ApiException as exc:
                    if exc.status == 409:
                        break
                    time.sleep(0.5)
                except Exception:
                    time.sleep(0.5)
            submitted.append(job["metadata"]["name"])
            time.sleep(0.15)

    submitter = threading.Thread(target=submit_stream, name="submit", daemon=True)
    submitter.start()
    timeline: list[str] = []
    by_identity = {ctl.identity: ctl for ctl in controllers}
    apiserver = cluster.state.processes["kube-apiserver"]
    try:
        # 1. Pause the leader mid-write, until the other one leads; resume it; repeat.
        time.sleep(5)
        for cycle in range(PAUSE_CYCLES):
            invariants.new_admission.clear()
            invariants.new_admission.wait(15)
            holder = lease_holder(api)
            assert holder in by_identity, f"no controller leads (holder {holder!r})"
            paused = by_identity[holder]
            assert paused.proc is not None
            signal_process(paused.proc, signal.SIGSTOP)
            timeline.append(f"{time.monotonic() - began:5.1f}s SIGSTOP leader {holder} (pause {cycle + 1})")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and lease_holder(api) in (holder, None):
                time.sleep(0.2)
            successor = lease_holder(api)
            time.sleep(1)  # the successor admits while the old leader is frozen mid-pass
            signal_process(paused.proc, signal.SIGCONT)
            timeline.append(f"{time.monotonic() - began:5.1f}s SIGCONT {holder}; lease held by {successor}")
            assert successor not in (holder, None), "nobody took over from the paused leader"

        # 2. Pause the API server itself for 20 s while admissions are in flight.
        time.sleep(2)
        signal_process(apiserver, signal.SIGSTOP)
        timeline.append(f"{time.monotonic() - began:5.1f}s SIGSTOP kube-apiserver")
        time.sleep(20)
        signal_process(apiserver, signal.SIGCONT)
        timeline.append(f"{time.monotonic() - began:5.1f}s SIGCONT kube-apiserver")

        # 3. Everything submitted is admitted and finishes.
        submitter.join(timeout=max(1.0, TIME_LIMIT_S - (time.monotonic() - began)))
        deadline = began + TIME_LIMIT_S
        while time.monotonic() < deadline and len(invariants.finished) < JOBS_TOTAL:
            time.sleep(1)
        timeline.append(f"{time.monotonic() - began:5.1f}s {len(invariants.finished)}/{JOBS_TOTAL} finished")
    finally:
        watcher.stop()
        for proc in (apiserver, *(c.proc for c in controllers if c.proc)):
            if processes.alive(proc.pid) and processes.is_ours(proc.pid, proc.executable):
                os.kill(proc.pid, signal.SIGCONT)  # never leave a stopped process behind
    elapsed = time.monotonic() - began
    summary = (f"{JOBS_TOTAL} jobs, {invariants.states_checked} Workload states checked, "
               f"{len(invariants.admitted_ever)} admitted, {len(invariants.finished)} finished in {elapsed:.0f}s; "
               f"peak CPU usage {dict(invariants.peak_usage)}")
    print("\n[fencing] " + "\n[fencing] ".join([*timeline, summary]))
    assert invariants.violations == [], "\n".join(invariants.violations[:20])
    assert all(processes.alive(c.proc.pid) for c in controllers if c.proc), "a controller died"
    assert len(invariants.finished) == JOBS_TOTAL, f"only {len(invariants.finished)}/{JOBS_TOTAL} finished " \
        f"within {TIME_LIMIT_S:.0f}s ({summary}); logs in {cluster.logs}"
