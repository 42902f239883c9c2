"""What the kubelet decides for a pod's containers, on plain data, for the podman node's pod
worker (podworker.py does the I/O):

- init containers (``spec.initContainers``) run one at a time, in order, each to completion
  before the next starts and before any app container (kuberuntime's
  computeInitContainerActions): a failed one is restarted with back-off unless the restart
  policy is ``Never``, in which case the pod fails and its app containers never start;
- whether an exited container restarts: the container's own ``restartPolicy`` when it has one
  (ContainerRestartRules, beta and on since v1.35), else the pod's;
- the status the kubelet reports: phase (kubelet's getPhase), the Initialized / ContainersReady
  / Ready conditions with their reasons and messages (kubelet/status/generate.go), and
  ``initContainerStatuses`` / ``containerStatuses`` (waiting ``PodInitializing`` until the init
  containers are done, ``CrashLoopBackOff`` during a back-off), from which kubectl prints
  ``Init:0/1``, ``Init:Error`` or ``Init:CrashLoopBackOff``.

Sidecars (an init container with ``restartPolicy: Always``) and ``restartPolicyRules`` are not
run by the podman node: :func:`check_supported` names them, the pod does not start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from scheduler.devcluster.podspec import Obj, PodSpecError, Probe

BACKOFF_START_S, BACKOFF_MAX_S = 10.0, 300.0
POD_INITIALIZING, CONTAINER_CREATING, CRASH_LOOP = "PodInitializing", "ContainerCreating", "CrashLoopBackOff"


@dataclass
class ProbeState:
    spec: Probe
    due: float
    successes: int = 0
    failures: int = 0


@dataclass
class ContainerRun:
    """One container of the pod as the node runs it: what the kubelet's runtime status holds."""

    spec: Obj
    name: str  # the podman container's name
    init: bool = False
    image_id: str = ""
    restarts: int = 0
    running_since: str = ""
    ready: bool = False
    ever_started: bool = False
    terminated: dict[str, Any] | None = None
    last: dict[str, Any] | None = None
    backoff_until: float = 0.0
    backoff_message: str = ""
    readiness: ProbeState | None = None
    liveness: ProbeState | None = None

    @property
    def running(self) -> bool:
        return self.ever_started and self.terminated is None

    @property
    def completed(self) -> bool:
        """An init container that exited 0: done, never run again."""
        return self.terminated is not None and self.terminated["exitCode"] == 0 and not self.backoff_until

    @property
    def failed_for_good(self) -> bool:
        """Exited, and not to be restarted."""
        return self.terminated is not None and self.terminated["exitCode"] != 0 and not self.backoff_until

    def started(self, started_at: str, now: float) -> None:
        """The container runs (again): probes start over after their initial delay."""
        self.ever_started, self.running_since = True, started_at
        self.terminated, self.backoff_until, self.backoff_message = None, 0.0, ""
        self.ready = self.readiness is None
        for probe in (self.readiness, self.liveness):
            if probe is not None:
                probe.due, probe.successes, probe.failures = now + probe.spec.initial_delay_s, 0, 0

    def due_probes(self, now: float) -> list[ProbeState]:
        due = [p for p in (self.readiness, self.liveness) if p is not None and now >= p.due]
        for probe in due:
            probe.due = now + probe.spec.period_s
        return due

    def probed(self, probe: ProbeState, ok: bool) -> bool:
        """One probe's result, with its thresholds; True when a failed liveness probe restarts
        the container."""
        if ok:
            probe.successes, probe.failures = probe.successes + 1, 0
        else:
            probe.successes, probe.failures = 0, probe.failures + 1
        if probe is self.readiness:
            if probe.successes >= probe.spec.success_threshold:
                self.ready = True
            elif probe.failures >= probe.spec.failure_threshold:
                self.ready = False
            return False
        return probe.failures >= probe.spec.failure_threshold

    def restarting(self, last: dict[str, Any] | None) -> None:
        """About to start again: ``last`` is what ended the previous run (lastState)."""
        self.last = last
        self.restarts += 1

    def exited(self, terminated: dict[str, Any], pod_policy: str, now: float, pod_meta: Obj) -> bool:
        """The container exited (``terminated``: the kubelet's ContainerStateTerminated fields);
        True when it will be restarted, after the back-off recorded here."""
        self.ready, self.running_since, self.terminated = False, "", terminated
        if not restarts(self, pod_policy, int(terminated["exitCode"])):
            return False
        delay = backoff_s(self.restarts)
        self.backoff_until = now + delay
        self.backoff_message = backoff_message(delay, self.spec["name"], pod_meta)
        return True


def check_supported(spec: Obj) -> None:
    """What this node does not run, named (the pod does not start, its status says why)."""
    for container in spec.get("initContainers") or ():
        if container.get("restartPolicy") == "Always":
            raise PodSpecError(f"init container {container['name']} has restartPolicy Always (a sidecar): "
                               "sidecar containers are not run by the podman node")
    for container in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        if container.get("restartPolicyRules"):
            raise PodSpecError(f"container {container['name']}: restartPolicyRules are not run by the podman node")


def restarts(run: ContainerRun, pod_policy: str, exit_code: int) -> bool:
    """Does an exited container start again (kubelet's ContainerShouldRestart)? An init
    container that succeeded is done; one that failed runs again unless the policy is Never."""
    policy = run.spec.get("restartPolicy") or pod_policy
    if run.init:
        return exit_code != 0 and policy != "Never"
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


def backoff_s(restart_count: int) -> float:
    """The kubelet's crash-loop back-off: 10 s doubling to 5 min."""
    return min(BACKOFF_START_S * 2.0 ** restart_count, BACKOFF_MAX_S)


def backoff_message(delay_s: float, container: str, pod_meta: Obj) -> str:
    """The kubelet's CrashLoopBackOff message (kuberuntime_manager.go; format.Pod names the pod
    ``name_namespace(uid)``; the delay as Go prints a Duration)."""
    minutes, seconds = divmod(int(delay_s), 60)
    delay = f"{minutes}m{seconds}s" if minutes else f"{seconds}s"
    return (f"back-off {delay} restarting failed container={container} "
            f"pod={pod_meta['name']}_{pod_meta['namespace']}({pod_meta['uid']})")


class InitStep(Enum):
    START = "start"  # start (or restart after its back-off) the container returned
    WAIT = "wait"  # an init container runs, or waits out its back-off
    FAILED = "failed"  # an init container failed and is not restarted: the pod fails
    DONE = "done"  # every init container completed: the app containers start


def next_init_step(inits: Sequence[ContainerRun], now: float) -> tuple[InitStep, ContainerRun | None]:
    """The first init container not yet completed decides (they run strictly in order)."""
    for run in inits:
        if run.completed:
            continue
        if not run.ever_started:
            return InitStep.START, run
        if run.running:
            return InitStep.WAIT, run
        if run.failed_for_good:
            return InitStep.FAILED, run
        return (InitStep.START if now >= run.backoff_until else InitStep.WAIT), run
    return InitStep.DONE, None


# ---- status ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class PodStatus:
    phase: str
    conditions: tuple[Condition, ...]
    init_statuses: tuple[dict[str, Any], ...]
    statuses: tuple[dict[str, Any], ...]


def _go_list(names: Sequence[str]) -> str:
    return "[" + " ".join(names) + "]"  # how Go's fmt prints a []string in the kubelet's messages


def container_status(run: ContainerRun, has_inits: bool) -> dict[str, Any]:
    default = POD_INITIALIZING if has_inits else CONTAINER_CREATING
    last = run.last
    if run.backoff_until:
        state: dict[str, Any] = {"waiting": {"reason": CRASH_LOOP, "message": run.backoff_message}}
        last = run.terminated
    elif run.terminated is not None:
        state = {"terminated": run.terminated}
    elif run.ever_started:
        state = {"running": {"startedAt": run.running_since}}
    else:
        state = {"waiting": {"reason": default}}
    # an init container is ready once it exited 0 (the prober manager's rule for non-sidecars)
    ready = run.completed if run.init else run.ready
    status = {"name": run.spec["name"], "image": run.spec["image"], "imageID": run.image_id,
              "ready": ready, "started": "running" in state, "restartCount": run.restarts, "state": state}
    if run.ever_started:
        status["containerID"] = f"podman://{run.name}"
    if last:
        status["lastState"] = {"terminated": last}
    return status


def waiting_statuses(containers: Sequence[Obj], reason: str, message: str) -> tuple[dict[str, Any], ...]:
    """Containers that were never created (the pod could not start): each waiting, with why."""
    return tuple({"name": c["name"], "image": c["image"], "imageID": "", "ready": False, "started": False,
                  "restartCount": 0, "state": {"waiting": {"reason": reason, "message": message}}}
                 for c in containers)


def phase(inits: Sequence[ContainerRun], runs: Sequence[ContainerRun]) -> str:
    """The kubelet's getPhase (with ContainerRestartRules, on since v1.35: each container's own
    policy decides whether it restarts) for regular init containers and app containers."""
    if any(run.failed_for_good for run in inits):
        return "Failed"
    if any(not run.completed for run in inits) or any(not run.ever_started for run in runs):
        return "Pending"
    if any(run.running for run in runs):
        return "Running"
    if any(run.backoff_until for run in runs):
        return "Running"  # a container is on its way to a restart
    return "Succeeded" if all(run.terminated and run.terminated["exitCode"] == 0 for run in runs) else "Failed"


def conditions(spec: Obj, inits: Sequence[ContainerRun], runs: Sequence[ContainerRun], pod_phase: str,
               sandbox: bool, others: Mapping[str, str]) -> tuple[Condition, ...]:
    """PodReadyToStartContainers, Initialized, ContainersReady and Ready as the kubelet writes
    them. ``others``: the status of the pod's other conditions (readiness gates read them)."""
    initialized = Condition("Initialized", True)
    incomplete = [run.spec["name"] for run in inits if not run.completed]
    if pod_phase == "Succeeded":
        initialized = Condition("Initialized", True, "PodCompleted")
    elif incomplete and not any(run.ever_started for run in runs):
        initialized = Condition("Initialized", False, "ContainersNotInitialized",
                                f"containers with incomplete status: {_go_list(incomplete)}")
    if pod_phase in ("Succeeded", "Failed"):
        reason = "PodCompleted" if pod_phase == "Succeeded" else "PodFailed"
        containers_ready = Condition("ContainersReady", False, reason)
    else:
        unready = [run.spec["name"] for run in runs if not run.ready]
        containers_ready = (Condition("ContainersReady", False, "ContainersNotReady",
                                      f"containers with unready status: {_go_list(unready)}")
                            if unready else Condition("ContainersReady", True))
    ready = Condition("Ready", containers_ready.status, containers_ready.reason, containers_ready.message)
    if containers_ready.status:
        gates = [_gate_message(str(gate["conditionType"]), others) for gate in spec.get("readinessGates") or ()]
        unmet = [m for m in gates if m]
        if unmet:
            ready = Condition("Ready", False, "ReadinessGatesNotReady", ", ".join(unmet))
    return (Condition("PodReadyToStartContainers", sandbox), initialized, containers_ready, ready)


def _gate_message(kind: str, others: Mapping[str, str]) -> str:
    if kind not in others:
        return f'corresponding condition of pod readiness gate "{kind}" does not exist.'
    if others[kind] != "True":
        return f'the status of pod readiness gate "{kind}" is not "True", but {others[kind]}'
    return ""


def pod_status(spec: Obj, inits: Sequence[ContainerRun], runs: Sequence[ContainerRun], sandbox: bool,
               others: Mapping[str, str]) -> PodStatus:
    """The status of a pod whose containers were created (``inits``, ``runs``)."""
    pod_phase = phase(inits, runs)
    has_inits = bool(inits)
    return PodStatus(pod_phase, conditions(spec, inits, runs, pod_phase, sandbox, others),
                     tuple(container_status(run, has_inits) for run in inits),
                     tuple(container_status(run, has_inits) for run in runs))


def pending_status(spec: Obj, sandbox: bool, reason: str, message: str) -> PodStatus:
    """The status of a pod that could not start (``reason``: the kubelet's waiting reason, on
    every container), or has not yet."""
    inits, containers = spec.get("initContainers") or (), spec.get("containers") or ()
    conds = [Condition("PodReadyToStartContainers", sandbox)]
    if inits:
        conds.append(Condition("Initialized", False, "ContainersNotInitialized",
                               f"containers with incomplete status: {_go_list([c['name'] for c in inits])}"))
    else:
        conds.append(Condition("Initialized", True))
    unready = f"containers with unready status: {_go_list([c['name'] for c in containers])}"
    conds += [Condition("ContainersReady", False, "ContainersNotReady", unready),
              Condition("Ready", False, "ContainersNotReady", unready)]
    return PodStatus("Pending", tuple(conds), waiting_statuses(inits, reason, message),
                     waiting_statuses(containers, reason, message))
