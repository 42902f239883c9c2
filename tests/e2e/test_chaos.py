"""Chaos, end to end (issue 13 item 6): a stream of small Jobs on a dedicated local control
plane with the whole toposched stack (two controllers racing for the Lease, the webhook, the
extender behind kube-scheduler) while, during the stream:

1. a few nodes holding running ranks get HyperPod's ``UnschedulablePendingReplacement``
   health label, and one such node is deleted (hot swaps and NodeFailures evictions);
2. the leading controller is SIGKILLed and started again as a new process;
3. kube-apiserver is restarted (stopped and started);
4. the leader is paused (SIGSTOP) until the other controller leads, then resumed.

A watcher (tests/e2e/chaos_invariants.py) checks every state it observes: quota never
exceeded (per ClusterQueue and cohort), no rank runs twice, nothing pending without a reason;
at the end every Job is Complete or Failed with a reason and its Workload Finished with a
message. The figures (faults, time from each fault to recovery) are printed (``-s``).

The cluster is this test's own: restarting the session cluster's API server would stall every
other test. ``TOPOSCHED_CHAOS_JOBS`` sets the number of Jobs (default 200),
``TOPOSCHED_CHAOS_SEED`` the random choices, ``TOPOSCHED_CHAOS_TIME_LIMIT_S`` the bound for
every Job to end. With 200 Jobs the whole test takes about 160 s (cluster start included) on a
loaded 2-core machine, so it stays in the default suite; ``-m "not chaos"`` leaves it out.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.core.fakecluster import HEALTH_STATUS_LABEL, HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, generate_nodes
from scheduler.devcluster import peers, processes
from scheduler.devcluster.apply import apply_objects, create_nodes, wait_nodes_settled
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, FAKE_POD_PHASE_LABEL, LocalCluster, free_ports
from scheduler.devcluster.stack import StackPorts, start_toposched
from scheduler.k8s.informer import JOBS, LEASES, NODES, PODS, WORKLOADS, Api, Informer, Resource
from tests.e2e.chaos_invariants import ChaosWatch, QueueLimit, condition

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]

JOBS_TOTAL = int(os.environ.get("TOPOSCHED_CHAOS_JOBS", "200"))
SEED = int(os.environ.get("TOPOSCHED_CHAOS_SEED", "13"))
# The bound for every Job to end. After a node is deleted, its pods go only when PodGC
# force-deletes them (40 s quarantine), and the Job controller's pod-failure backoff comes on top:
# replacements of a deleted node's ranks took 60-100 s in these runs. (Before the controller kept
# a deleted node's labels, a Job with every pod on it was moved to another block its
# nodeSelector excludes, and its pods stayed Pending for good: this test found that.)
TIME_LIMIT_S = float(os.environ.get("TOPOSCHED_CHAOS_TIME_LIMIT_S", "240"))
NS = "chaos"
FLAVOR = "chaos-p5"
TOPOLOGY = "chaos-topology"
KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
L2 = "topology.k8s.aws/network-node-layer-2"
L3 = "topology.k8s.aws/network-node-layer-3"
LEVELS = ("topology.k8s.aws/network-node-layer-1", L2, L3, HOSTNAME_LABEL)
LEASE_NS, LEASE_NAME = "toposched-system", "toposched-controller"
RUN_SECONDS_ANNOTATION = "toposched.dev/chaos-run-seconds"
EVENTS = Resource("", "v1", "events")
HEALTH_TAINT = {"key": HEALTH_STATUS_LABEL, "value": "Unschedulable", "effect": "NoSchedule"}
# 3 layer-3 domains of 5 nodes (8 GPUs each): 120 GPUs, far more than the quotas below, so
# quota is what is contended and every required domain has spares for a hot swap.
CLUSTER = {"name": "e2e-chaos", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 3], "nodesPerDomain": 5}
QUEUES: dict[str, QueueLimit] = {
    "chaos-a": QueueLimit(nominal=8, borrowing_limit=4, cohort="chaos"),
    "chaos-b": QueueLimit(nominal=8, borrowing_limit=4, cohort="chaos"),
    "chaos-c": QueueLimit(nominal=6, borrowing_limit=0, cohort=None),
    "chaos-d": QueueLimit(nominal=10, borrowing_limit=0, cohort=None),
}
# Short leases so handovers fit in the test; a 1 s node-failure grace and requeue backoff base
# (Kueue's default base is 60 s) keep recoveries inside the bound.
CONTROLLER_ARGS = ("--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3",
                   "--leader-elect-retry-period", "0.5", "--resync-seconds", "1", "--solver", "greedy",
                   "--node-failure-grace-seconds", "1", "--node-failure-requeue-base-seconds", "1",
                   "--node-failure-requeue-max-seconds", "4")


# ---------------------------------------------------------------------- objects


def cluster_queue(name: str, limit: QueueLimit) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": GPU, "nominalQuota": str(int(limit.nominal))}
    spec: dict[str, Any] = {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                            "resourceGroups": [{"coveredResources": [GPU],
                                                "flavors": [{"name": FLAVOR, "resources": [quota]}]}]}
    if limit.cohort:
        spec["cohortName"] = limit.cohort
        quota["borrowingLimit"] = str(int(limit.borrowing_limit))
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def queue_objects() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NS}},
        {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": TOPOLOGY},
         "spec": {"levels": [{"nodeLabel": level} for level in LEVELS]}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
         "spec": {"nodeLabels": {INSTANCE_TYPE_LABEL: "ml.p5.48xlarge"}, "topologyName": TOPOLOGY}},
    ]
    for name, limit in QUEUES.items():
        objects.append(cluster_queue(name, limit))
        objects.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": NS},
                        "spec": {"clusterQueue": name}})
    return objects


def chaos_job(i: int, rng: random.Random) -> dict[str, Any]:
    """Small Jobs of 1-4 one-GPU pods that run 1-4 s (the test's finisher ends them). Three
    in four are Indexed (ranks); half require a layer-3 domain (hot swaps inside it), a
    quarter prefer layer 2, the rest ask nothing."""
    pods = rng.randint(1, 4)
    shape = i % 4
    annotations = {RUN_SECONDS_ANNOTATION: str(rng.randint(1, 4))}
    if shape in (0, 2):
        annotations["kueue.x-k8s.io/podset-required-topology"] = L3
    elif shape == 1:
        annotations["kueue.x-k8s.io/podset-preferred-topology"] = L2
    spec: dict[str, Any] = {
        "parallelism": pods, "completions": pods, "backoffLimit": 100,
        "template": {"metadata": {"annotations": annotations},
                     "spec": {"restartPolicy": "Never", "containers": [{
                         "name": "main", "image": "busybox",
                         "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}}}
    if shape != 3:
        spec["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"chaos-{i:03d}", "namespace": NS,
                         "labels": {"kueue.x-k8s.io/queue-name": list(QUEUES)[(i // 4 + i) % len(QUEUES)]}},
            "spec": spec}


# ---------------------------------------------------------------------- processes


@dataclass
class Controllers:
    """The two controller processes; a killed one is started again under a new identity (a
    new pod of the Deployment, as Kubernetes would)."""

    cluster: LocalCluster
    procs: dict[str, processes.Started] = field(default_factory=dict)  # identity -> process
    generation: int = 0

    def start(self, slot: str) -> str:
        self.generation += 1
        identity = f"ctl-{slot}-{self.generation}"
        port = free_ports(1)[0]
        proc = self.cluster.start_process(f"toposched-controller-{slot}", [
            sys.executable, "-m", "scheduler.cli", "controller",
            "--kubeconfig", str(self.cluster.controller_kubeconfig),
            "--identity", identity, "--health-port", str(port), "--grpc-port", "0", *CONTROLLER_ARGS])
        peers.wait_http_ready(f"http://127.0.0.1:{port}/readyz", proc, 90)
        self.procs[identity] = proc
        return identity

    def slot_of(self, identity: str) -> str:
        return self.procs[identity].name.rsplit("-", 1)[1]

    def signal(self, identity: str, signo: signal.Signals) -> None:
        """Only a process this test started, recognised by pid AND executable."""
        proc = self.procs[identity]
        assert processes.is_ours(proc.pid, proc.executable), f"pid {proc.pid} is no longer {proc.name}"
        os.kill(proc.pid, signo)

    def kill(self, identity: str) -> None:
        processes.kill(self.procs.pop(identity))

    def alive(self) -> list[str]:
        return [i for i, p in self.procs.items() if processes.alive(p.pid)]

    def resume_all(self) -> None:
        for proc in self.procs.values():  # never leave a stopped process behind
            if processes.alive(proc.pid) and processes.is_ours(proc.pid, proc.executable):
                os.kill(proc.pid, signal.SIGCONT)


def lease_holder(api: Api) -> str | None:
    try:
        return (api.get(LEASES, LEASE_NAME, LEASE_NS).get("spec") or {}).get("holderIdentity") or None
    except Exception:  # the API server may be restarting
        return None


def retry(call: Callable[[], Any], attempts: int = 60, pause_s: float = 0.5) -> Any:
    """Keep trying through an API-server restart; a 404/409 is an answer, not an outage."""
    for attempt in range(attempts):
        try:
            return call()
        except client.ApiException as exc:
            if exc.status in (404, 409) or attempt == attempts - 1:
                raise
        except Exception:
            if attempt == attempts - 1:
                raise
        time.sleep(pause_s)
    return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, list[dict[str, Any]]]]:
    local = LocalCluster(Path(tmp_path_factory.mktemp("chaos"))).start()
    try:
        kube = local.api_client()
        nodes = generate_nodes(CLUSTER)
        create_nodes(kube, nodes, FAKE_NODE_LABEL)
        wait_nodes_settled(kube, [n["metadata"]["name"] for n in nodes])
        apply_objects(kube, queue_objects())
        # The webhook (suspends and routes the Jobs) and the extender; the controllers are the test's.
        start_toposched(local, StackPorts.dynamic(), components=("toposched-extender", "toposched-webhook"))
        yield local, nodes
    finally:
        local.stop()


# ---------------------------------------------------------------------- the run


@dataclass
class Figures:
    began: float = field(default_factory=time.monotonic)
    timeline: list[str] = field(default_factory=list)
    recoveries: list[str] = field(default_factory=list)
    faults: int = 0

    def note(self, text: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.began:6.1f}s {text}")


class Run:
    """One chaos run: the stream, the finisher, the faults, the watcher."""

    def __init__(self, local: LocalCluster, nodes: list[dict[str, Any]]) -> None:
        self.cluster = local
        self.api = Api(local.api_client())
        self.node_names = [n["metadata"]["name"] for n in nodes]
        self.watch = ChaosWatch(QUEUES, GPU, cluster_queue_of={name: name for name in QUEUES})
        self.controllers = Controllers(local)
        self.figures = Figures()
        self.rng = random.Random(SEED)
        self.stop = threading.Event()
        self.informers = [Informer(self.api, WORKLOADS, namespace=NS), Informer(self.api, PODS, namespace=NS),
                          Informer(self.api, NODES)]
        self.watch.attach(*self.informers)
        self.failed_nodes: list[str] = []

    # ---- background threads ------------------------------------------------------------
    def submit_stream(self) -> None:
        jobs = [chaos_job(i, self.rng) for i in range(JOBS_TOTAL)]
        for job in jobs:
            try:
                retry(lambda job=job: self.api.create(JOBS, job, NS))
            except client.ApiException as exc:
                if exc.status != 409:
                    raise
            time.sleep(0.2)

    def finish_pods(self) -> None:
        """KWOK finishes a pod labelled with the fake phase: label each running pod once it has
        run for its Job's run seconds."""
        labelled: set[str] = set()
        while not self.stop.is_set():
            now = time.monotonic()
            pods = self.informers[1].items()
            with self.watch.lock:
                due = [(key, pod) for pod in pods
                       if (key := f"{NS}/{pod['metadata']['name']}") not in labelled
                       and (pod.get("status") or {}).get("phase") == "Running"
                       and not pod["metadata"].get("deletionTimestamp")
                       # a failed node's pods do not complete: they must be replaced
                       and pod["spec"].get("nodeName") not in self.failed_nodes
                       and now - self.watch.running_since.get(key, now) >=
                       float((pod["metadata"].get("annotations") or {}).get(RUN_SECONDS_ANNOTATION, "1"))]
            for key, pod in due:
                try:
                    self.api.merge_patch(PODS, pod["metadata"]["name"],
                                         {"metadata": {"labels": {FAKE_POD_PHASE_LABEL: "Succeeded"}}}, NS)
                    labelled.add(key)
                except Exception:
                    pass  # gone, or the API server is restarting: next round
            self.stop.wait(0.25)

    def check_reasons(self) -> None:
        while not self.stop.is_set():
            self.watch.check_reasons(time.monotonic())
            self.stop.wait(1.0)

    # ---- faults -----------------------------------------------------------------------
    def busy_node(self) -> tuple[str, list[tuple[str, str]]]:
        """A healthy node with the most running ranks (waits for one, up to 30 s)."""
        deadline = time.monotonic() + 30
        while True:
            candidates = [n for n in self.node_names if n not in self.failed_nodes]
            ranked = sorted(((len(self.watch.ranks_on(n)), self.rng.random(), n) for n in candidates), reverse=True)
            if ranked and (ranked[0][0] > 0 or time.monotonic() > deadline):
                node = ranked[0][2]
                return node, self.watch.ranks_on(node)
            time.sleep(0.2)

    def fail_node(self, delete: bool) -> tuple[float, str, list[tuple[str, str]]]:
        node, ranks = self.busy_node()
        self.failed_nodes.append(node)
        t0 = time.monotonic()
        if delete:
            retry(lambda: self.api.delete(NODES, node))
        else:
            current = retry(lambda: self.api.get(NODES, node))
            taints = [t for t in (current["spec"].get("taints") or []) if t["key"] != HEALTH_STATUS_LABEL]
            retry(lambda: self.api.merge_patch(NODES, node, {
                "metadata": {"labels": {HEALTH_STATUS_LABEL: "UnschedulablePendingReplacement"}},
                "spec": {"taints": [*taints, HEALTH_TAINT]}}))
        self.figures.faults += 1
        self.figures.note(f"{'deleted node' if delete else 'UnschedulablePendingReplacement on'} {node} "
                          f"({len(ranks)} running ranks)")
        return t0, node, ranks

    def leader(self, timeout_s: float = 30) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            holder = lease_holder(self.api)
            if holder in self.controllers.alive():
                return holder
            time.sleep(0.2)
        raise AssertionError(f"no live controller leads within {timeout_s}s (holder {lease_holder(self.api)!r})")

    def sigkill_leader(self) -> float:
        holder = self.leader()
        slot = self.controllers.slot_of(holder)
        t0 = time.monotonic()
        self.controllers.kill(holder)
        self.figures.faults += 1
        self.figures.note(f"SIGKILL leader {holder}")
        successor = self.controllers.start(slot)
        self.figures.note(f"started {successor} in its place")
        return t0

    def restart_apiserver(self) -> tuple[float, float]:
        t0 = time.monotonic()
        self.cluster.restart("kube-apiserver")
        self.figures.faults += 1
        self.figures.note(f"kube-apiserver restarted (stop + start + ready in {time.monotonic() - t0:.1f}s)")
        return t0, time.monotonic()

    def handover(self) -> tuple[float, float]:
        holder = self.leader()
        t0 = time.monotonic()
        self.controllers.signal(holder, signal.SIGSTOP)
        self.figures.faults += 1
        self.figures.note(f"SIGSTOP leader {holder}")
        deadline = time.monotonic() + 30
        successor = None
        while time.monotonic() < deadline:
            successor = lease_holder(self.api)
            if successor not in (holder, None):
                break
            time.sleep(0.2)
        took_over = time.monotonic()
        time.sleep(1)  # the successor writes while the old leader is frozen mid-pass
        self.controllers.signal(holder, signal.SIGCONT)
        self.figures.note(f"SIGCONT {holder}; lease held by {successor}")
        assert successor not in (holder, None), "nobody took over from the paused leader"
        return t0, took_over

    # ---- figures ----------------------------------------------------------------------
    def wait_admission_after(self, t0: float, what: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            when = self.watch.first_admission_after(t0)
            if when is not None:
                self.figures.recoveries.append(f"{what} -> next admission: {when - t0:.1f}s")
                return
            time.sleep(0.2)
        self.figures.recoveries.append(f"{what} -> next admission: none within {timeout_s:.0f}s"
                                       " (the queues may be empty, or the machine slow)")

    def replacement_times(self, t0: float, node: str, ranks: list[tuple[str, str]], what: str) -> None:
        # A rank the finisher had already ended (label patched just before the failure) may
        # complete on the failed node: it needs no replacement.
        finished_there = [r for r in ranks if (r, node) in self.watch.succeeded_on]
        back = [self.watch.rank_back_after(rank, node, t0) for rank in ranks if rank not in finished_there]
        got = [b - t0 for b in back if b is not None]
        done = f" ({len(finished_there)} completed there first)" if finished_there else ""
        if got:
            self.figures.recoveries.append(f"{what} -> {len(got)}/{len(ranks)} ranks Running elsewhere{done}: "
                                           f"first {min(got):.1f}s, last {max(got):.1f}s")
        else:
            self.figures.recoveries.append(f"{what} -> no rank needed a replacement{done}")

    def all_done(self) -> bool:
        with self.watch.lock:
            return len(self.watch.finished_names) >= JOBS_TOTAL


def describe_unended(api: Api, job: dict[str, Any], wl: dict[str, Any]) -> str:
    """What a Job that did not end looks like now: enough to tell who is stuck."""
    name = job["metadata"]["name"]
    pods = retry(lambda: api.list(PODS, NS, labelSelector=f"job-name={name}"))["items"]
    status = {k: v for k, v in (job.get("status") or {}).items() if k != "uncountedTerminatedPods"}
    admission = ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    topology = [psa.get("topologyAssignment") for psa in admission]
    conditions = [(c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                  for c in (wl.get("status") or {}).get("conditions") or ()]
    events = [f"{e['involvedObject']['name']}: {e.get('reason')}: {e.get('message')}"
              for e in retry(lambda: api.list(EVENTS, NS))["items"]
              if e["involvedObject"].get("name", "").startswith(name + "-")
              and e.get("reason") not in ("Scheduled", "Pulled", "Created", "Started")][-6:]
    return (f"{name}: suspend={job['spec'].get('suspend')} status={status}; events {events}; pods "
            f"{[(p['metadata']['name'], p['spec'].get('nodeName'), p['status'].get('phase'), bool(p['metadata'].get('deletionTimestamp'))) for p in pods]}; "  # noqa: E501
            f"workload {conditions} topology {topology}")


def test_chaos_stream_keeps_quota_ranks_and_reasons(cluster: tuple[LocalCluster, list[dict[str, Any]]]) -> None:
    local, nodes = cluster
    run = Run(local, nodes)
    for slot in ("a", "b"):
        run.controllers.start(slot)
    for informer in run.informers:
        informer.start()
    for informer in run.informers:
        assert informer.synced.wait(30)
    threads = [threading.Thread(target=target, name=name, daemon=True) for name, target in
               (("submit", run.submit_stream), ("finish", run.finish_pods), ("reasons", run.check_reasons))]
    for thread in threads:
        thread.start()
    node_faults: list[tuple[float, str, list[tuple[str, str]], str]] = []
    try:
        # The faults, spread over the stream (about 0.2 s per Job plus the API's time).
        time.sleep(8)
        for _ in range(2):
            t0, node, ranks = run.fail_node(delete=False)
            node_faults.append((t0, node, ranks, f"health label on {node[-6:]}"))
            time.sleep(2)
        time.sleep(4)
        t0, node, ranks = run.fail_node(delete=True)
        node_faults.append((t0, node, ranks, f"node {node[-6:]} deleted"))
        time.sleep(5)
        killed = run.sigkill_leader()
        run.wait_admission_after(killed, "controller SIGKILL")
        time.sleep(3)
        restart_began, restart_ready = run.restart_apiserver()
        run.wait_admission_after(restart_began, "kube-apiserver restart (stop)")
        run.wait_admission_after(restart_ready, "kube-apiserver ready again")
        time.sleep(3)
        paused, took_over = run.handover()
        run.figures.recoveries.append(f"leader SIGSTOP -> other controller leads: {took_over - paused:.1f}s")
        run.wait_admission_after(paused, "leader SIGSTOP")
        t0, node, ranks = run.fail_node(delete=False)
        node_faults.append((t0, node, ranks, f"health label on {node[-6:]} (after handover)"))

        threads[0].join(timeout=max(1.0, TIME_LIMIT_S - (time.monotonic() - run.figures.began)))
        run.figures.note("stream submitted")
        deadline = run.figures.began + TIME_LIMIT_S
        while time.monotonic() < deadline and not run.all_done():
            time.sleep(1)
        run.figures.note(f"{len(run.watch.finished_names)}/{JOBS_TOTAL} Workloads Finished")
    finally:
        run.stop.set()
        run.controllers.resume_all()
        for informer in run.informers:
            informer.stop()
    for t0, node, ranks, what in node_faults:
        run.replacement_times(t0, node, ranks, what)

    jobs = retry(lambda: run.api.list(JOBS, NS))["items"]
    workloads = {(wl["metadata"].get("ownerReferences") or [{}])[0].get("name"): wl
                 for wl in retry(lambda: run.api.list(WORKLOADS, NS))["items"]}
    unended = []
    outcomes: dict[str, int] = {}
    for job in jobs:
        name = job["metadata"]["name"]
        ended = [c for c in (job.get("status") or {}).get("conditions") or ()
                 if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"]
        fin = condition(workloads.get(name) or {}, "Finished")
        if not ended or not ended[0].get("reason") or fin.get("status") != "True" or not fin.get("message"):
            unended.append(describe_unended(run.api, job, workloads.get(name) or {}))
            continue
        outcomes[ended[0]["type"]] = outcomes.get(ended[0]["type"], 0) + 1
    elapsed = time.monotonic() - run.figures.began
    summary = (f"{JOBS_TOTAL} jobs, {run.figures.faults} faults, {run.watch.states_checked} states checked, "
               f"{len(run.watch.admissions)} admissions, outcomes {outcomes} in {elapsed:.0f}s; "
               f"longest pending without a reason {run.watch.longest_unexplained_s:.0f}s, at most "
               f"{run.watch.queued_without_condition_max} queued behind a head without a condition; "
               f"peak {GPU} per ClusterQueue {dict(run.watch.peak_usage)}")
    print("\n[chaos] " + "\n[chaos] ".join([*run.figures.timeline, *run.figures.recoveries, summary,
                                            *(f"not ended: {u}" for u in unended[:10])]))
    assert run.watch.violations == [], "\n".join(run.watch.violations[:20])
    assert len(jobs) == JOBS_TOTAL, f"{len(jobs)}/{JOBS_TOTAL} Jobs exist"
    assert unended == [], f"{len(unended)} Jobs did not end with a reason within {TIME_LIMIT_S:.0f}s " \
        f"({summary}); logs in {local.logs}:\n" + "\n".join(unended[:20])
