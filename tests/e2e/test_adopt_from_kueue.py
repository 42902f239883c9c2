"""Adopting toposched where Kueue runs (issue 14 item 8; docs/install.md "Adopting toposched
where Kueue runs"), against the REAL Kueue v0.17.0 on the local control plane.

The path built is the replace-Kueue migration: Kueue admits first (its webhook suspends the
Jobs, its scheduler reserves quota, its TopologyUngater pins the pods); then Kueue's controller
is stopped and its webhook configurations removed (what scaling its Deployment to 0 and
deleting its webhooks does on a real cluster), `toposched adopt` checks the cluster, and
toposched's stack starts on the same API server. The test shows:

- no Workload is admitted by both engines: a recorder polls every Workload for the whole test
  and each one's ``status.admission`` takes at most one value, written by one field manager;
- existing admissions survive: the Workloads Kueue admitted keep ``status.admission`` byte for
  byte, stay Admitted, their pods keep running on the same nodes, and their quota is counted
  (the job Kueue left pending stays pending while the queue is full);
- a Kueue that comes back is not admitted next to: while Kueue's leader Lease is renewed
  (``--kueue-lease``) toposched holds admission, and resumes once the renewals stop;
- new jobs flow: the job Kueue left pending is admitted by toposched when quota frees (one
  Workload, Kueue's, reused), and a Job created after the switch goes through toposched's
  webhook, controller and scheduler.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from scheduler.cli import main
from scheduler.devcluster.apply import apply_objects
from scheduler.devcluster.stack import StackPorts, start_toposched
from scheduler.k8s.informer import JOBS, LEASES, WORKLOADS
from tests.conformance.harness import Run, _cond, start_run, team_namespace

CLUSTER = {"name": "adopt", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 2}
QUEUES = {"teams": {"team-a": {"gpu": 48}}}  # 6 of the 8 nodes: quota, not capacity, binds
NS = team_namespace("team-a")
PEER_WEBHOOK_PREFIX = "toposched-peer-"  # how devcluster.kueue registers Kueue's webhooks
KUEUE_NS, KUEUE_LEASE = "kueue-system", "c1f6bfd2.kueue.x-k8s.io"


def row(name: str) -> dict[str, Any]:
    return {"name": name, "pods": 2, "gpus": 8, "required": "layer-3"}  # 16 GPUs, one layer-3 domain


class AdmissionRecorder:
    """Every distinct ``status.admission`` (and the field managers of ``status``) each Workload
    ever shows, polled for the whole test."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.seen: dict[str, list[str]] = {}      # workload uid -> distinct admissions, in order
        self.managers: dict[str, set[str]] = {}   # workload uid -> managers that wrote its admission
        self.names: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="admission-recorder", daemon=True)

    def __enter__(self) -> AdmissionRecorder:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except client.ApiException:
                pass
            self._stop.wait(0.2)

    def poll(self) -> None:
        for wl in self.run.api.list(WORKLOADS, NS).get("items", []):
            uid = wl["metadata"]["uid"]
            self.names[uid] = wl["metadata"]["name"]
            admission = (wl.get("status") or {}).get("admission")
            if not admission:
                continue
            text = json.dumps(admission, sort_keys=True)
            seen = self.seen.setdefault(uid, [])
            if text not in seen:
                seen.append(text)
            for entry in wl["metadata"].get("managedFields") or ():
                fields = json.dumps(entry.get("fieldsV1") or {})
                if entry.get("subresource") == "status" and '"f:admission"' in fields:
                    self.managers.setdefault(uid, set()).add(str(entry.get("manager")))


def workload_of(run: Run, job: str) -> dict[str, Any]:
    return run.workload_of(run.api.list(WORKLOADS, NS).get("items", []))[job]


def admitted(wl: dict[str, Any]) -> bool:
    return (_cond(wl, "Admitted") or {}).get("status") == "True"


def remove_kueue(run: Run) -> None:
    """Kueue's Deployment scaled to 0 and its webhook configurations deleted."""
    run.extra.stop()
    adm = client.AdmissionregistrationV1Api(run.kube)
    for item in adm.list_mutating_webhook_configuration().items:
        if item.metadata.name.startswith(PEER_WEBHOOK_PREFIX):
            adm.delete_mutating_webhook_configuration(item.metadata.name)
    for item in adm.list_validating_webhook_configuration().items:
        if item.metadata.name.startswith(PEER_WEBHOOK_PREFIX):
            adm.delete_validating_webhook_configuration(item.metadata.name)


class ReturningKueue:
    """Kueue's leader Lease renewed every 2 s, as a Kueue controller brought back (by an add-on
    update) does before it starts admitting. (The harness's Kueue runs without leader election.)"""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="returning-kueue", daemon=True)

    def __enter__(self) -> ReturningKueue:
        self.run.api.create(LEASES, {"metadata": {"name": KUEUE_LEASE, "namespace": KUEUE_NS}, "spec": {
            "holderIdentity": "kueue-controller-manager-returned", "leaseDurationSeconds": 15,
            "renewTime": now_micro()}}, KUEUE_NS)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:  # Kueue scaled to 0 again: renewals stop
        self._stop.set()
        self._thread.join(5)

    def _renew(self) -> None:
        while not self._stop.wait(2):
            self.run.api.merge_patch(LEASES, KUEUE_LEASE, {"spec": {"renewTime": now_micro()}}, KUEUE_NS)


def now_micro() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


def wait(predicate: Any, what: str, run: Run, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout_s}s; logs in {run.cluster.logs}")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    started = start_run("kueue", Path(tmp_path_factory.mktemp("adopt")), CLUSTER, QUEUES)
    try:
        yield started
    finally:
        started.stop()


def test_replace_kueue_keeps_admissions_and_new_jobs_flow(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    with AdmissionRecorder(run) as recorder:
        # ---- Kueue admits three jobs (48 GPUs: the queue is full) and leaves a fourth pending.
        for name in ("k1", "k2", "k3", "k4"):
            run.create_job(row(name))
            run.settle()
        for name in ("k1", "k2", "k3"):
            run.wait_pods_running(name, "team-a", 2)
        before = {name: workload_of(run, name) for name in ("k1", "k2", "k3", "k4")}
        assert [admitted(before[n]) for n in ("k1", "k2", "k3", "k4")] == [True, True, True, False]
        placed = {name: run.pod_nodes(name, "team-a") for name in ("k1", "k2", "k3")}

        # ---- the switch: the check refuses while Kueue runs, passes once it is gone.
        kubeconfig = str(run.cluster.kubeconfig)
        assert main(["adopt", "--kubeconfig", kubeconfig, "--kueue-namespace", "kueue-system"]) == 1
        assert "Kueue's webhook" in capsys.readouterr().out
        remove_kueue(run)
        assert main(["adopt", "--kubeconfig", kubeconfig, "--kueue-namespace", "kueue-system"]) == 0
        report = capsys.readouterr().out
        assert "3 admitted Workloads keep their admission" in report and "1 pending" in report, report
        apply_objects(run.kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "toposched-system"}}])
        start_toposched(run.cluster, StackPorts.dynamic(),
                        controller_args=("--kueue-lease", f"{KUEUE_NS}/{KUEUE_LEASE}"))

        # ---- existing admissions survive; their quota is counted (k4 stays pending).
        time.sleep(8)  # a few controller passes (resync 5 s)
        for name in ("k1", "k2", "k3"):
            after = workload_of(run, name)
            assert after["metadata"]["uid"] == before[name]["metadata"]["uid"]
            assert after["status"]["admission"] == before[name]["status"]["admission"], name
            assert admitted(after) and _cond(after, "Evicted") is None, name
            assert run.pod_nodes(name, "team-a") == placed[name], name
        assert not admitted(workload_of(run, "k4")), "k4 admitted over a full queue: Kueue's admissions not counted"

        # ---- new jobs flow: k4 (queued under Kueue) when k1 finishes, n1 (after the switch) when k2 does.
        run.create_job(row("n1"))
        with ReturningKueue(run):
            run.finish_job("k1")
            time.sleep(8)
            assert not admitted(workload_of(run, "k4")), "toposched admitted while Kueue's Lease was renewed"
        wait(lambda: admitted(workload_of(run, "k4")), "k4 admitted by toposched once Kueue's Lease went stale",
             run, timeout_s=60)
        run.wait_pods_running("k4", "team-a", 2)
        assert not admitted(workload_of(run, "n1"))
        run.finish_job("k2")
        wait(lambda: admitted(workload_of(run, "n1")), "n1 admitted by toposched", run)
        run.wait_pods_running("n1", "team-a", 2)
        n1_job = run.api.get(JOBS, "n1", NS)
        assert n1_job["spec"]["template"]["spec"].get("schedulerName") == "toposched", "toposched's webhook mutated n1"
        recorder.poll()

    # ---- no Workload admitted by both: one admission each, one writer each, one Workload per Job.
    workloads = run.api.list(WORKLOADS, NS).get("items", [])
    owners = [ref["uid"] for wl in workloads for ref in wl["metadata"].get("ownerReferences") or ()]
    assert len(owners) == len(set(owners)) == 5, "one Workload per Job (Kueue's reused by toposched)"
    for uid, admissions in recorder.seen.items():
        assert len(admissions) == 1, (recorder.names[uid], admissions)
    by_name = {recorder.names[uid]: managers for uid, managers in recorder.managers.items()}
    kueue_admitted = {before[n]["metadata"]["name"] for n in ("k1", "k2", "k3")}
    toposched_admitted = {workload_of(run, n)["metadata"]["name"] for n in ("k4", "n1")}
    kueue_managers = set().union(*(by_name[n] for n in kueue_admitted))
    toposched_managers = set().union(*(by_name[n] for n in toposched_admitted))
    assert kueue_managers and toposched_managers and not kueue_managers & toposched_managers, by_name
    for name in kueue_admitted | toposched_admitted:
        assert len(by_name[name]) == 1, (name, by_name[name])
