"""The podman node runs init containers as a kubelet does (scheduler/devcluster/podlifecycle.py):
one at a time, in order, each to completion before the next and before any app container; a
failed one restarted with the crash-loop back-off, or the pod failed under restartPolicy Never;
the status the kubelet writes at each step (kubectl prints ``Init:0/1``, ``Init:CrashLoopBackOff``,
``Init:Error`` from it: health.init_status, what ``toposched dev status`` shows); an in-memory
emptyDir is one tmpfs that the init and app containers share (podvolumes.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scheduler.devcluster import health, podlifecycle
from scheduler.devcluster.podlifecycle import ContainerRun, InitStep, next_init_step
from scheduler.devcluster.podspec import PodSpecError, Probe
from scheduler.devcluster.podvolumes import VolumeWriter, memory_volume_bytes, remove_volumes
from scheduler.k8s.fakeapi import FakeApi

META = {"name": "toposched-scheduler-abc", "namespace": "toposched-system", "uid": "u-1234"}


def scheduler_pod(restart_policy: str = "Always", inits: int = 1) -> dict[str, Any]:
    """The chart's scheduler pod (init container extender-certs), optionally a second init."""
    tls = {"name": "extender-tls", "mountPath": "/run/toposched/extender-tls"}
    init_specs = [{"name": "extender-certs", "image": "localhost/toposched:0.1.0",
                   "args": ["extender", "--issue-certs=/run/toposched/extender-tls"], "volumeMounts": [tls]},
                  {"name": "second", "image": "localhost/toposched:0.1.0", "args": ["--help"]}][:inits]
    return {"metadata": dict(META), "spec": {
        "restartPolicy": restart_policy, "initContainers": init_specs,
        "containers": [{"name": "kube-scheduler", "image": "localhost/kube-scheduler:v1.37.2",
                        "resources": {"limits": {"memory": "512Mi"}},
                        "volumeMounts": [{**tls, "readOnly": True}]},
                       {"name": "extender", "image": "localhost/toposched:0.1.0",
                        "resources": {"limits": {"memory": "256Mi"}},
                        "volumeMounts": [{**tls, "readOnly": True}]}],
        "volumes": [{"name": "extender-tls", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]}}


def runs(pod: dict[str, Any]) -> tuple[list[ContainerRun], list[ContainerRun]]:
    spec = pod["spec"]
    return ([ContainerRun(c, f"k8s_{c['name']}", init=True) for c in spec["initContainers"]],
            [ContainerRun(c, f"k8s_{c['name']}") for c in spec["containers"]])


def exit_(run: ContainerRun, code: int, pod: dict[str, Any], now: float) -> bool:
    reason = "Completed" if code == 0 else "Error"
    return run.exited({"exitCode": code, "reason": reason, "startedAt": "t0", "finishedAt": "t1"},
                      pod["spec"]["restartPolicy"], now, pod["metadata"])


def as_written(pod: dict[str, Any], inits: list[ContainerRun], apps: list[ContainerRun]) -> dict[str, Any]:
    """The Pod as the API server holds it after the node's status report."""
    status = podlifecycle.pod_status(pod["spec"], inits, apps, True, {})
    conditions = [{"type": c.type, "status": str(c.status), "reason": c.reason, "message": c.message}
                  for c in status.conditions]
    return {**pod, "status": {"phase": status.phase, "conditions": conditions,
                              "initContainerStatuses": list(status.init_statuses),
                              "containerStatuses": list(status.statuses)}}


def condition(pod: dict[str, Any], kind: str) -> tuple[str, str, str]:
    (found,) = [c for c in pod["status"]["conditions"] if c["type"] == kind]
    return found["status"], found["reason"], found["message"]


def test_init_containers_run_in_order_each_to_completion_before_the_app_containers() -> None:
    pod = scheduler_pod(inits=2)
    inits, apps = runs(pod)
    first, second = inits
    written = as_written(pod, inits, apps)
    assert written["status"]["phase"] == "Pending" and health.init_status(written) == "Init:0/2"
    waiting = {"waiting": {"reason": "PodInitializing"}}
    assert [s["state"] for s in written["status"]["containerStatuses"]] == [waiting] * 2
    assert next_init_step(inits, 0.0) == (InitStep.START, first)
    first.started("t0", 0.0)
    assert next_init_step(inits, 1.0) == (InitStep.WAIT, first), "the second waits for the first to finish"
    assert condition(as_written(pod, inits, apps), "Initialized") == (
        "False", "ContainersNotInitialized", "containers with incomplete status: [extender-certs second]")
    assert not exit_(first, 0, pod, 2.0), "an init container that exited 0 is done, never restarted"
    assert next_init_step(inits, 2.0) == (InitStep.START, second)
    written = as_written(pod, inits, apps)
    assert health.init_status(written) == "Init:1/2"
    assert written["status"]["initContainerStatuses"][0]["ready"] is True
    assert written["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    second.started("t2", 2.0)
    exit_(second, 0, pod, 3.0)
    assert next_init_step(inits, 3.0) == (InitStep.DONE, None)
    for app in apps:
        app.started("t3", 3.0)
    written = as_written(pod, inits, apps)
    assert written["status"]["phase"] == "Running" and health.init_status(written) == ""
    assert condition(written, "Initialized") == ("True", "", "")
    assert condition(written, "Ready") == ("True", "", "")


def test_a_failing_init_container_crash_loops_and_holds_the_app_containers() -> None:
    pod = scheduler_pod()
    inits, apps = runs(pod)
    (certs,) = inits
    certs.started("t0", 0.0)
    assert exit_(certs, 1, pod, 5.0), "restartPolicy Always: a failed init container runs again"
    assert next_init_step(inits, 14.0) == (InitStep.WAIT, certs), "after its back-off, not before"
    written = as_written(pod, inits, apps)
    (status,) = written["status"]["initContainerStatuses"]
    assert status["state"] == {"waiting": {"reason": "CrashLoopBackOff", "message": (
        "back-off 10s restarting failed container=extender-certs "
        "pod=toposched-scheduler-abc_toposched-system(u-1234)")}}
    assert status["lastState"]["terminated"]["exitCode"] == 1 and status["ready"] is False
    assert written["status"]["phase"] == "Pending" and health.init_status(written) == "Init:CrashLoopBackOff"
    assert condition(written, "Ready") == ("False", "ContainersNotReady",
                                           "containers with unready status: [kube-scheduler extender]")
    assert not any(app.ever_started for app in apps)
    assert next_init_step(inits, 15.0) == (InitStep.START, certs)
    certs.restarting(certs.terminated)
    certs.started("t15", 15.0)
    exit_(certs, 1, pod, 16.0)
    assert certs.restarts == 1 and certs.backoff_until == 16.0 + 20.0, "the back-off doubles"
    assert "back-off 20s" in certs.backoff_message
    assert podlifecycle.backoff_s(5) == 300.0
    assert podlifecycle.backoff_message(160, "c", META).startswith("back-off 2m40s ")


def test_a_failed_init_container_under_restart_policy_never_fails_the_pod() -> None:
    pod = scheduler_pod(restart_policy="Never")
    inits, apps = runs(pod)
    (certs,) = inits
    certs.started("t0", 0.0)
    assert not exit_(certs, 2, pod, 1.0)
    assert next_init_step(inits, 100.0) == (InitStep.FAILED, certs)
    written = as_written(pod, inits, apps)
    assert written["status"]["phase"] == "Failed" and health.init_status(written) == "Init:Error"
    assert condition(written, "ContainersReady") == ("False", "PodFailed", "")
    (check,) = _checks(written)
    assert not check.ok and check.detail.startswith("Init:Error, 0/2 ready")


def test_restart_policy_of_the_container_comes_before_the_pods() -> None:
    pod = scheduler_pod(restart_policy="Never")
    pod["spec"]["initContainers"][0]["restartPolicy"] = "OnFailure"
    inits, _ = runs(pod)
    inits[0].started("t0", 0.0)
    assert exit_(inits[0], 1, pod, 1.0), "the init container's own OnFailure restarts it"
    app = ContainerRun({"name": "app", "image": "x", "restartPolicy": "Never"}, "k8s_app")
    app.started("t0", 0.0)
    assert not app.exited({"exitCode": 0, "reason": "Completed"}, "Always", 1.0, META)
    assert podlifecycle.phase([], [app]) == "Succeeded"
    onfailure = ContainerRun({"name": "app", "image": "x"}, "k8s_app")
    onfailure.started("t0", 0.0)
    assert not onfailure.exited({"exitCode": 0, "reason": "Completed"}, "OnFailure", 1.0, META)
    assert onfailure.exited({"exitCode": 3, "reason": "Error"}, "OnFailure", 1.0, META)
    assert podlifecycle.phase([], [onfailure]) == "Running", "on its way to a restart"


@pytest.mark.parametrize(("change", "message"), [
    (lambda s: s["initContainers"][0].update(restartPolicy="Always"), "sidecar containers are not run"),
    (lambda s: s["containers"][0].update(restartPolicyRules=[{"action": "Restart"}]), "restartPolicyRules"),
])
def test_what_the_node_does_not_run_is_named(change: Any, message: str) -> None:
    spec = scheduler_pod()["spec"]
    podlifecycle.check_supported(spec)
    change(spec)
    with pytest.raises(PodSpecError, match=message):
        podlifecycle.check_supported(spec)


def test_a_pod_that_cannot_start_says_why_on_every_container() -> None:
    pod = scheduler_pod()
    status = podlifecycle.pending_status(pod["spec"], False, "ErrImageNeverPull", "image is not present")
    assert [s["state"]["waiting"]["reason"] for s in (*status.init_statuses, *status.statuses)] == [
        "ErrImageNeverPull"] * 3
    written = {**pod, "status": {"phase": status.phase, "initContainerStatuses": list(status.init_statuses),
                                 "containerStatuses": list(status.statuses)}}
    assert health.init_status(written) == "Init:ErrImageNeverPull"


def test_readiness_gates_hold_ready_until_their_condition_is_true() -> None:
    pod = scheduler_pod()
    pod["spec"]["readinessGates"] = [{"conditionType": "example.com/gate"}]
    inits, apps = runs(pod)
    inits[0].started("t0", 0.0)
    exit_(inits[0], 0, pod, 1.0)
    for app in apps:
        app.started("t1", 1.0)
    ready = {c.type: c for c in podlifecycle.pod_status(pod["spec"], inits, apps, True, {}).conditions}["Ready"]
    assert (ready.status, ready.reason) == (False, "ReadinessGatesNotReady")
    assert ready.message == 'corresponding condition of pod readiness gate "example.com/gate" does not exist.'
    gated = podlifecycle.pod_status(pod["spec"], inits, apps, True, {"example.com/gate": "True"})
    assert {c.type: c.status for c in gated.conditions}["Ready"] is True


def test_in_memory_empty_dir_is_sized_as_the_kubelet_sizes_it() -> None:
    pod = scheduler_pod()
    assert memory_volume_bytes(pod, {"medium": "Memory", "sizeLimit": "1Mi"}, 2**34) == 2**20
    assert memory_volume_bytes(pod, {"medium": "Memory"}, 2**34) == 768 * 2**20, "the pod's memory limit"
    assert memory_volume_bytes(pod, {"medium": "Memory", "sizeLimit": "1Gi"}, 2**34) == 768 * 2**20
    del pod["spec"]["containers"][1]["resources"]
    assert memory_volume_bytes(pod, {"medium": "Memory"}, 2**34) == 2**34, "no pod limit: the node's memory"


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_init_and_app_containers_share_one_in_memory_empty_dir(tmp_path: Path) -> None:
    pod = scheduler_pod()
    writer = VolumeWriter(FakeApi(), tmp_path / "pods", 2**34)  # type: ignore[arg-type]
    volumes = writer.prepare(pod)
    shared = Path(volumes.mounts["extender-tls"].path)
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    (line,) = [m for m in mounts if m.split()[1] == str(shared.resolve())]
    assert line.split()[2] == "tmpfs" and "size=1024k" in line.split()[3]
    (shared / "ca.crt").write_text("written by the init container")
    assert writer.prepare(pod).mounts["extender-tls"] == volumes.mounts["extender-tls"], "a retried start"
    assert (shared / "ca.crt").read_text() == "written by the init container", "the same tmpfs, not a new one"
    assert sum(1 for m in Path("/proc/self/mounts").read_text().splitlines() if str(shared) in m) == 1
    writer.remove(META["uid"])
    assert str(shared) not in Path("/proc/self/mounts").read_text() and not shared.exists()
    # a node that died left a mount: the sweep unmounts it before removing the directory
    leftover = tmp_path / "pods" / "u-old" / "volumes" / "x"
    leftover.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(leftover)], check=True)
    remove_volumes(tmp_path / "pods")
    assert str(leftover) not in Path("/proc/self/mounts").read_text() and not (tmp_path / "pods").exists()


def _checks(pod: dict[str, Any]) -> list[health.Check]:
    api = FakeApi()
    pod = {**pod, "spec": {**pod["spec"], "nodeName": "podman-0"}}
    api.create(health.PODS, pod, pod["metadata"]["namespace"])
    return health.node_pod_checks(api)


def test_probes_count_against_their_thresholds() -> None:
    spec = Probe("https://10.88.0.7:10259/readyz", 0.0, 5.0, 1.0, failure_threshold=2,
                              success_threshold=1)
    run = ContainerRun({"name": "kube-scheduler", "image": "x"}, "k8s_x",
                       readiness=podlifecycle.ProbeState(spec, 0.0), liveness=podlifecycle.ProbeState(spec, 0.0))
    run.started("t0", 0.0)
    assert run.ready is False, "a container with a readiness probe starts unready"
    readiness, liveness = run.due_probes(0.0)
    assert run.due_probes(4.0) == [] and readiness.due == 5.0, "next due after periodSeconds"
    assert not run.probed(readiness, True) and run.ready
    assert not run.probed(readiness, False) and run.ready, "one failure is under the threshold"
    assert not run.probed(readiness, False) and not run.ready
    assert not run.probed(liveness, False)
    assert run.probed(liveness, False), "the second liveness failure restarts the container"
