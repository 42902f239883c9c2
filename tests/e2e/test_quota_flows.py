"""Quotas, queues, priorities and preemption, end to end on the real control plane: real Jobs
through the webhook, toposched's controller, the Job controller, kube-scheduler + extender and
KWOK. Every test makes its own namespaces, ClusterQueues (own cohort), LocalQueues and
WorkloadPriorityClasses with names unique to the test, so tests do not see each other's quota.

Quota is GPUs (``nvidia.com/gpu`` is the only covered resource and the only request), on the
TAS flavor ``ml.p5.48xlarge`` of examples/kueue/hyperpod-queues.yaml; the cluster (16 nodes x 8
GPUs) is larger than any test's quota, so quota, never node capacity, decides.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from kubernetes import client

from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.stack import restart_component, stop_component
from scheduler.k8s.informer import JOBS, LOCAL_QUEUES, PODS, WORKLOADS, Api
from tests.e2e.conftest import Stack

CLUSTER = {"name": "e2e-quota", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4}
FLAVOR = "ml.p5.48xlarge"
KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.fixture(scope="module")
def stack(stack_factory: Any) -> Stack:
    return stack_factory(CLUSTER)


# ---------------------------------------------------------------------- objects


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def cluster_queue(name: str, gpus: int, *, cohort: str | None = None, strategy: str = "BestEffortFIFO",
                  within: str = "Never", reclaim: str = "Never", borrowing_limit: int | None = None) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}
    if borrowing_limit is not None:
        quota["borrowingLimit"] = str(borrowing_limit)
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": strategy,
        "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim},
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                            "flavors": [{"name": FLAVOR, "resources": [quota]}]}],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(ns: str, name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterQueue": cq}}


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def gpu_job(name: str, ns: str, queue: str, gpus: int, priority: str | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}}},
    }


def submit(stack: Stack, job: dict[str, Any]) -> dict[str, Any]:
    return stack.api.create(JOBS, job, job["metadata"]["namespace"])


# ---------------------------------------------------------------------- observations


def workload_of(stack: Stack, ns: str, job_uid: str) -> dict[str, Any] | None:
    found = [wl for wl in stack.api.list(WORKLOADS, ns)["items"]
             if (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == job_uid]
    assert len(found) <= 1, f"{len(found)} Workloads for job uid {job_uid}"
    return found[0] if found else None


def conds(wl: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((wl or {}).get("status") or {}).get("conditions") or ()}


def is_true(wl: dict[str, Any] | None, type_: str) -> bool:
    return conds(wl).get(type_, {}).get("status") == "True"


def admitted(stack: Stack, job: dict[str, Any]) -> bool:
    wl = workload_of(stack, job["metadata"]["namespace"], job["metadata"]["uid"])
    return is_true(wl, "QuotaReserved") and is_true(wl, "Admitted") and not is_true(wl, "Evicted")


def running(stack: Stack, job: dict[str, Any]) -> list[dict[str, Any]]:
    pods = stack.api.list(PODS, job["metadata"]["namespace"], labelSelector=f"job-name={job['metadata']['name']}")
    return [p for p in pods["items"]
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def finish(stack: Stack, job: dict[str, Any]) -> None:
    for pod in running(stack, job):
        stack.api.merge_patch(PODS, pod["metadata"]["name"],
                              {"metadata": {"labels": {"toposched.dev/fake-phase": "Succeeded"}}},
                              job["metadata"]["namespace"])


def cleanup(stack: Stack, jobs: list[dict[str, Any]]) -> None:
    for job in jobs:
        try:
            stack.api.delete(JOBS, job["metadata"]["name"], job["metadata"]["namespace"],
                             propagationPolicy="Background")
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    for job in jobs:
        stack.wait(lambda j=job: not running(stack, j), 60, f"pods of {job['metadata']['name']} gone")


def stays(predicate: Any, seconds: float, what: str) -> None:
    """``predicate`` holds for ``seconds`` (several reconcile cycles)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate(), what
        time.sleep(0.5)


# ---------------------------------------------------------------------- (a) borrow and reclaim


def test_borrowed_quota_is_reclaimed_by_the_lending_team(stack: Stack) -> None:
    ns_a, ns_b, cohort = "qa-borrow-a", "qa-borrow-b", "qa-borrow-cohort"
    apply_objects(stack.kube, [
        namespace(ns_a), namespace(ns_b),
        cluster_queue("qa-borrow-a-cq", 4, cohort=cohort, reclaim="Any", within="LowerPriority"),
        cluster_queue("qa-borrow-b-cq", 4, cohort=cohort, reclaim="Any", within="LowerPriority"),
        local_queue(ns_a, "lq", "qa-borrow-a-cq"), local_queue(ns_b, "lq", "qa-borrow-b-cq")])
    # Team A: 8 GPUs on a nominal quota of 4 -> admitted by borrowing B's idle 4.
    job_a = submit(stack, gpu_job("a-big", ns_a, "lq", 8))
    stack.wait(lambda: running(stack, job_a), 90, "team A's borrowing job Running")
    wl_a = workload_of(stack, ns_a, job_a["metadata"]["uid"])
    assert wl_a is not None and wl_a["status"]["admission"]["clusterQueue"] == "qa-borrow-a-cq"
    assert wl_a["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"] == "8"

    # Team B claims its nominal quota back: A's borrowed job is preempted (reclaimWithinCohort).
    job_b = submit(stack, gpu_job("b-job", ns_b, "lq", 4))
    stack.wait(lambda: running(stack, job_b), 90, "team B's job Running")
    stack.wait(lambda: is_true(workload_of(stack, ns_a, job_a["metadata"]["uid"]), "Requeued"), 60,
               "A's workload requeued")
    victim = workload_of(stack, ns_a, job_a["metadata"]["uid"])
    c = conds(victim)
    assert c["Evicted"]["status"] == "True" and c["Evicted"]["reason"] == "Preempted", c["Evicted"]
    assert c["Preempted"]["status"] == "True" and c["Preempted"]["reason"] == "InCohortReclamation", c["Preempted"]
    assert "due to reclamation within the cohort" in c["Preempted"]["message"], c["Preempted"]["message"]
    assert c["Requeued"]["status"] == "True" and c["Requeued"]["reason"] == "Preempted", c["Requeued"]
    assert (victim or {})["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}]
    assert c["QuotaReserved"]["status"] == "False", c["QuotaReserved"]
    assert not (victim or {}).get("status", {}).get("admission")
    # The victim's Job is suspended again, its pod gone, and it stays pending (8 > 8 - 4 in use by B).
    assert stack.api.get(JOBS, "a-big", ns_a)["spec"]["suspend"] is True
    stack.wait(lambda: not running(stack, job_a), 30, "A's pod gone")
    stays(lambda: not admitted(stack, job_a) and running(stack, job_b), 4, "A stays pending while B runs")
    qr = conds(workload_of(stack, ns_a, job_a["metadata"]["uid"]))["QuotaReserved"]
    assert qr["status"] == "False" and "insufficient unused quota for nvidia.com/gpu in flavor ml.p5.48xlarge" \
        in qr["message"], qr
    print(f"\n[reclaim] victim pending: {qr['reason']}: {qr['message']}")

    # B finishes: the cohort's quota is idle again and A is re-admitted.
    finish(stack, job_b)
    stack.wait(lambda: running(stack, job_a), 90, "team A re-admitted after B finished")
    cleanup(stack, [job_a, job_b])


# ---------------------------------------------------------------------- (b) withinClusterQueue


def test_high_priority_preempts_the_right_low_priority_job(stack: Stack) -> None:
    ns, cq = "qa-prio", "qa-prio-cq"
    apply_objects(stack.kube, [
        namespace(ns), priority_class("qa-prio-low", 10), priority_class("qa-prio-mid", 20),
        priority_class("qa-prio-high", 1000),
        cluster_queue(cq, 8, within="LowerPriority"), local_queue(ns, "lq", cq)])
    # Fill the 8 GPUs: low-1 (oldest), low-2, then mid (newest). Candidates a wrong ordering
    # would pick: mid (most recent overall), low-1 (lowest priority, but older), or two jobs.
    order = [("low-1", 2, "qa-prio-low"), ("low-2", 2, "qa-prio-low"), ("mid", 4, "qa-prio-mid")]
    jobs = {}
    for name, gpus, prio in order:
        jobs[name] = submit(stack, gpu_job(name, ns, "lq", gpus, prio))
        stack.wait(lambda j=jobs[name]: running(stack, j), 90, f"{name} Running")
        time.sleep(1.1)  # QuotaReserved times have 1 s resolution: make "most recently admitted" strict
    high = submit(stack, gpu_job("high", ns, "lq", 2, "qa-prio-high"))
    stack.wait(lambda: running(stack, high), 90, "high-priority job Running")

    wls = {name: workload_of(stack, ns, j["metadata"]["uid"]) for name, j in jobs.items()}
    preempted = sorted(name for name, wl in wls.items() if conds(wl).get("Preempted", {}).get("status") == "True")
    assert preempted == ["low-2"], preempted  # lowest priority, most recently admitted, and only one
    c = conds(wls["low-2"])
    assert c["Evicted"]["reason"] == "Preempted" and c["Preempted"]["reason"] == "InClusterQueue"
    assert "due to prioritization in the ClusterQueue" in c["Preempted"]["message"]
    high_wl = workload_of(stack, ns, high["metadata"]["uid"])
    assert (high_wl or {})["metadata"]["uid"] in c["Preempted"]["message"]
    for name in ("low-1", "mid"):
        assert admitted(stack, jobs[name]) and running(stack, jobs[name]), f"{name} was disturbed"
        assert "Evicted" not in conds(wls[name]) or conds(wls[name])["Evicted"]["status"] == "False"
    stays(lambda: not admitted(stack, jobs["low-2"]), 3, "low-2 stays pending (no quota left)")
    assert stack.api.get(JOBS, "low-2", ns)["spec"]["suspend"] is True
    # The preemptor finishes: the requeued victim is admitted again.
    finish(stack, high)
    stack.wait(lambda: running(stack, jobs["low-2"]), 90, "low-2 re-admitted after high finished")
    cleanup(stack, [*jobs.values(), high])


# ---------------------------------------------------------------------- (c) StrictFIFO vs BestEffortFIFO


def test_strict_fifo_blocks_behind_the_head_best_effort_lets_small_jobs_pass(stack: Stack) -> None:
    jobs: dict[str, dict[str, dict[str, Any]]] = {}
    for strategy in ("StrictFIFO", "BestEffortFIFO"):
        ns = cq = f"qa-fifo-{strategy.lower()}"
        apply_objects(stack.kube, [namespace(ns), cluster_queue(cq, 4, strategy=strategy), local_queue(ns, "lq", cq)])
        jobs[strategy] = {"filler": submit(stack, gpu_job("filler", ns, "lq", 2))}
    for strategy in jobs:
        stack.wait(lambda s=strategy: running(stack, jobs[s]["filler"]), 90, f"{strategy} filler Running")
    # Head: 4 GPUs (fits the quota, not now: 2 are in use). Behind it: 2 GPUs, which fit now.
    for strategy, js in jobs.items():
        js["big"] = submit(stack, gpu_job("big", f"qa-fifo-{strategy.lower()}", "lq", 4))
    time.sleep(1.1)  # a strictly later creation time for the small job
    for strategy, js in jobs.items():
        js["small"] = submit(stack, gpu_job("small", f"qa-fifo-{strategy.lower()}", "lq", 2))

    best, strict = jobs["BestEffortFIFO"], jobs["StrictFIFO"]
    stack.wait(lambda: running(stack, best["small"]), 90, "BestEffortFIFO: small job goes ahead of the head")
    assert not admitted(stack, best["big"])
    stays(lambda: not admitted(stack, strict["small"]) and not admitted(stack, strict["big"]), 6,
          "StrictFIFO: small job stays blocked behind the head")
    big_wl = workload_of(stack, "qa-fifo-strictfifo", strict["big"]["metadata"]["uid"])
    qr = conds(big_wl)["QuotaReserved"]
    assert qr["status"] == "False" and "insufficient unused quota for nvidia.com/gpu" in qr["message"], qr

    # The filler finishes: the StrictFIFO head goes first, the small job still waits (4/4 used).
    finish(stack, strict["filler"])
    stack.wait(lambda: running(stack, strict["big"]), 90, "StrictFIFO head admitted after the filler finished")
    stays(lambda: not admitted(stack, strict["small"]), 3, "StrictFIFO small waits for quota")
    finish(stack, strict["big"])
    stack.wait(lambda: running(stack, strict["small"]), 90, "StrictFIFO small admitted last")
    cleanup(stack, [*best.values(), *strict.values()])


# ---------------------------------------------------------------------- (d) missing LocalQueue


def test_job_whose_local_queue_does_not_exist_stays_pending_with_a_clear_message(stack: Stack) -> None:
    ns, cq = "qa-nolq", "qa-nolq-cq"
    apply_objects(stack.kube, [namespace(ns)])
    # 1. At creation the webhook denies a Job naming a LocalQueue that does not exist.
    with pytest.raises(client.ApiException) as err:
        submit(stack, gpu_job("early", ns, "missing-lq", 1))
    assert err.value.status in (400, 403, 422)
    denial = json.loads(err.value.body)["message"]
    assert 'LocalQueue "missing-lq" does not exist in namespace "qa-nolq"' in denial, denial
    assert "create it (kind: LocalQueue" in denial, denial
    print(f"\n[missing LocalQueue] webhook: {denial}")

    # 2. A Job created while its LocalQueue existed (pointing at a ClusterQueue not created yet,
    #    which the webhook allows with a warning) whose LocalQueue is then deleted: its Workload
    #    stays pending with Kueue's message, first for the ClusterQueue, then for the LocalQueue.
    apply_objects(stack.kube, [local_queue(ns, "lq", cq)])
    stack.wait(lambda: stack.api.get(LOCAL_QUEUES, "lq", ns), 10, "LocalQueue visible")
    job = submit(stack, gpu_job("orphan", ns, "lq", 1))

    def pending_with(message: str) -> dict[str, Any] | None:
        qr = conds(workload_of(stack, ns, job["metadata"]["uid"])).get("QuotaReserved")
        return qr if qr and qr["status"] == "False" and qr["message"] == message else None

    qr = stack.wait(lambda: pending_with(f"ClusterQueue {cq} doesn't exist"), 60, "pending: ClusterQueue missing")
    assert qr["reason"] == "Inadmissible", qr  # Kueue v0.17's (Misconfigured with UnadmittedWorkloadsObservability)
    stack.api.delete(LOCAL_QUEUES, "lq", ns)
    qr = stack.wait(lambda: pending_with("LocalQueue lq doesn't exist"), 60, "pending: LocalQueue missing")
    stays(lambda: pending_with("LocalQueue lq doesn't exist") and stack.api.get(JOBS, "orphan", ns)["spec"]["suspend"],
          3, "the job stays suspended and pending")
    print(f"\n[missing LocalQueue] QuotaReserved={qr['status']} reason={qr['reason']} message={qr['message']!r}")

    # 3. Fixing the configuration admits it.
    apply_objects(stack.kube, [cluster_queue(cq, 2), local_queue(ns, "lq", cq)])
    stack.wait(lambda: running(stack, job), 90, "job admitted once its LocalQueue and ClusterQueue exist")
    cleanup(stack, [job])


# ---------------------------------------------------------------------- (e) controller crash


class Recorder:
    """Watches Workloads and Jobs of one namespace from the start and counts transitions:
    QuotaReserved False/absent -> True per Workload, spec.suspend True -> False per Job."""

    def __init__(self, api: Api, ns: str) -> None:
        self.api, self.ns = api, ns
        self.reservations: Counter[str] = Counter()
        self.unsuspends: Counter[str] = Counter()
        self.workloads_per_job: dict[str, set[str]] = defaultdict(set)
        self._reserved: dict[str, bool] = {}
        self._holding: dict[str, bool] = {}
        self.max_reserved = 0  # most Workloads holding quota at once, as the watch saw them
        self.trigger, self.trigger_at = threading.Event(), 10**9  # set once trigger_at admissions were seen
        self._suspended: dict[str, bool] = {}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, args=(r,), daemon=True) for r in (WORKLOADS, JOBS)]
        for t in self._threads:
            t.start()

    def _watch(self, resource: Any) -> None:
        rv = self.api.list(resource, self.ns)["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            for event in self._events(resource, rv):
                obj = event["object"]
                rv = obj["metadata"].get("resourceVersion", rv)
                if event["type"] == "BOOKMARK" or event["type"] == "ERROR":
                    continue
                if resource is WORKLOADS:
                    self._workload(obj)
                else:
                    self._job(obj)
                if self._stop.is_set():
                    return

    def _events(self, resource: Any, rv: str) -> Any:
        # Api.watch lists cluster-wide; filter to our namespace.
        for event in self.api.watch(resource, rv, timeout_s=5):
            if (event.get("object") or {}).get("metadata", {}).get("namespace") in (self.ns, None):
                yield event

    def _workload(self, wl: dict[str, Any]) -> None:
        uid = wl["metadata"]["uid"]
        owner = (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid", "")
        self.workloads_per_job[owner].add(uid)
        now = is_true(wl, "QuotaReserved")
        if now and not self._reserved.get(uid, False):
            self.reservations[uid] += 1
        self._reserved[uid] = now
        self._holding[uid] = now and not is_true(wl, "Finished")
        self.max_reserved = max(self.max_reserved, sum(self._holding.values()))
        if sum(self.reservations.values()) >= self.trigger_at:
            self.trigger.set()

    def _job(self, job: dict[str, Any]) -> None:
        uid = job["metadata"]["uid"]
        suspended = bool(job["spec"].get("suspend"))
        if self._suspended.get(uid, True) and not suspended:
            self.unsuspends[uid] += 1
        self._suspended[uid] = suspended

    def stop(self) -> None:
        self._stop.set()


def test_controller_killed_mid_run_admits_every_job_exactly_once(stack: Stack) -> None:
    ns, cq, total, quota = "qa-crash", "qa-crash-cq", 12, 8
    apply_objects(stack.kube, [namespace(ns), cluster_queue(cq, quota), local_queue(ns, "lq", cq)])
    rec = Recorder(stack.api, ns)
    rec.trigger_at = 2
    time.sleep(0.5)
    jobs = [submit(stack, gpu_job(f"j{i:02d}", ns, "lq", 1)) for i in range(total)]
    # Kill the controller (SIGKILL, no clean-up) while the admissions are under way, twice:
    # the watch fires the trigger the moment it sees the 2nd admission.
    assert rec.trigger.wait(60), "first admissions"
    stop_component(stack.cluster, "toposched-controller", kill=True)
    at_kill = sum(admitted(stack, j) for j in jobs)
    print(f"\n[controller crash] killed with {at_kill}/{quota} admissible jobs admitted")
    t0 = time.monotonic()
    restart_component(stack.cluster, "toposched-controller")
    stack.wait(lambda: sum(admitted(stack, j) for j in jobs) == quota, 120, "all admissible jobs admitted")
    print(f"[controller crash] restart -> {quota} admitted in {time.monotonic() - t0:.1f}s (lease takeover included)")
    stack.wait(lambda: sum(bool(running(stack, j)) for j in jobs) == quota, 60, f"{quota} jobs Running")
    stays(lambda: sum(admitted(stack, j) for j in jobs) == quota, 3, "never more than the quota admitted")
    # Finish the running ones: the other 4 are admitted too.
    first = [j for j in jobs if admitted(stack, j)]
    for job in first:
        finish(stack, job)
    rest = [j for j in jobs if j not in first]
    # Second crash, as soon as the next admission is written (its Job may still be suspended).
    rec.trigger.clear()
    rec.trigger_at = quota + 1
    assert rec.trigger.wait(90), "first admission of the second wave"
    stop_component(stack.cluster, "toposched-controller", kill=True)
    suspended = [j["metadata"]["name"] for j in rest
                 if admitted(stack, j) and stack.api.get(JOBS, j["metadata"]["name"], ns)["spec"].get("suspend")]
    print(f"[controller crash] killed again; admitted but still suspended: {suspended or 'none'}")
    restart_component(stack.cluster, "toposched-controller")
    stack.wait(lambda: all(running(stack, j) for j in rest), 120, "the remaining jobs admitted and Running")
    time.sleep(2)
    rec.stop()

    for job in jobs:
        uid = job["metadata"]["uid"]
        wls = rec.workloads_per_job[uid]
        assert len(wls) == 1, f"{job['metadata']['name']}: {len(wls)} Workloads"
        (wl_uid,) = wls
        assert rec.reservations[wl_uid] == 1, f"{job['metadata']['name']}: admitted {rec.reservations[wl_uid]} times"
        assert rec.unsuspends[uid] == 1, f"{job['metadata']['name']}: unsuspended {rec.unsuspends[uid]} times"
        pods = stack.api.list(PODS, ns, labelSelector=f"job-name={job['metadata']['name']}")["items"]
        assert len(pods) == 1, f"{job['metadata']['name']}: {len(pods)} pods"
    assert len(stack.api.list(WORKLOADS, ns)["items"]) == total
    assert rec.max_reserved <= quota, f"{rec.max_reserved} Workloads held quota at once (quota {quota})"
    cleanup(stack, jobs)


# ---------------------------------------------------------------------- queue objects as Kueue shows them


def table_row(stack: Stack, path: str) -> dict[str, str]:
    """The row ``kubectl get`` prints for one object (server-side Table with the CRD's columns)."""
    resp = stack.kube.call_api(path, "GET", header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
                               auth_settings=["BearerToken"], _preload_content=False)[0]
    table = json.loads(resp.data)
    return dict(zip((c["name"] for c in table["columnDefinitions"]), map(str, table["rows"][0]["cells"]),
                    strict=True))


def test_queue_status_and_deleting_a_queue_under_a_running_job_follow_kueue(stack: Stack) -> None:
    from scheduler.k8s.informer import CLUSTER_QUEUES, RESOURCE_FLAVORS, TOPOLOGIES

    ns, cq = "qa-qstatus", "qa-qstatus-cq"
    apply_objects(stack.kube, [namespace(ns), cluster_queue(cq, 8, cohort="qa-qstatus-cohort"),
                               local_queue(ns, "lq", cq)])
    running_job = submit(stack, gpu_job("runs", ns, "lq", 4))
    stack.wait(lambda: running(stack, running_job), 90, "first job Running")
    waiting_job = submit(stack, gpu_job("waits", ns, "lq", 8))  # 8 > 8 - 4: pending on quota

    def cq_status_is(pending: int, admitted: int) -> dict[str, Any] | None:
        obj = stack.api.get(CLUSTER_QUEUES, cq)
        s = obj.get("status") or {}
        ok = (s.get("pendingWorkloads"), s.get("admittedWorkloads"), s.get("reservingWorkloads")) == (
            pending, admitted, admitted)
        return obj if ok else None

    obj = stack.wait(lambda: cq_status_is(1, 1), 30, "ClusterQueue status: 1 pending, 1 admitted")
    status = obj["status"]
    assert status["flavorsUsage"] == [{"name": FLAVOR, "resources": [
        {"name": "nvidia.com/gpu", "total": "4", "borrowed": "0"}]}], status
    assert status["flavorsReservation"] == status["flavorsUsage"]
    active = {c["type"]: c for c in status["conditions"]}["Active"]
    assert (active["status"], active["reason"], active["message"]) == ("True", "Ready", "Can admit new workloads")
    assert "kueue.x-k8s.io/resource-in-use" in obj["metadata"]["finalizers"]
    for resource, name in ((RESOURCE_FLAVORS, FLAVOR), (TOPOLOGIES, "hyperpod-default")):
        assert "kueue.x-k8s.io/resource-in-use" in stack.api.get(resource, name)["metadata"].get("finalizers", [])
    lq = stack.api.get(LOCAL_QUEUES, "lq", ns)["status"]
    assert (lq["pendingWorkloads"], lq["admittedWorkloads"], lq["reservingWorkloads"]) == (1, 1, 1), lq
    assert lq["flavorsUsage"] == [{"name": FLAVOR, "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}], lq
    row = table_row(stack, CLUSTER_QUEUES.path(name=cq))
    assert (row["Pending Workloads"], row["Admitted Workloads"]) == ("1", "1"), row
    print(f"\n[queue status] kubectl get clusterqueue: {row}")

    # Deleting the ClusterQueue under a running job: the finalizer keeps it (Terminating), the
    # running job keeps its quota accounting, nothing new is admitted into it.
    stack.api.delete(CLUSTER_QUEUES, cq)

    def terminating() -> dict[str, Any] | None:
        obj = stack.api.get(CLUSTER_QUEUES, cq)
        cond = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}.get("Active", {})
        return obj if cond.get("reason") == "Terminating" else None

    obj = stack.wait(terminating, 30, "ClusterQueue Terminating")
    active = {c["type"]: c for c in obj["status"]["conditions"]}["Active"]
    assert (active["status"], active["message"]) == ("False", "Can't admit new workloads; clusterQueue is terminating")
    assert obj["metadata"].get("deletionTimestamp") and running(stack, running_job)

    def waiting_message() -> str:
        qr = conds(workload_of(stack, ns, waiting_job["metadata"]["uid"])).get("QuotaReserved", {})
        return str(qr.get("message", ""))

    stack.wait(lambda: waiting_message() == f"ClusterQueue {cq} is inactive", 30, "pending: ClusterQueue inactive")
    lq_active = {c["type"]: c for c in stack.api.get(LOCAL_QUEUES, "lq", ns)["status"]["conditions"]}["Active"]
    assert (lq_active["reason"], lq_active["message"]) == (
        "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"), lq_active

    # The running job finishes: nothing uses the ClusterQueue any more, so it goes.
    finish(stack, running_job)

    def gone() -> bool:
        try:
            stack.api.get(CLUSTER_QUEUES, cq)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    stack.wait(gone, 60, "ClusterQueue deleted once its last workload finished")
    stack.wait(lambda: waiting_message() == f"ClusterQueue {cq} doesn't exist", 30, "pending: ClusterQueue gone")
    assert not admitted(stack, waiting_job)
    cleanup(stack, [running_job, waiting_job])
