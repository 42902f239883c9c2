"""One pod on the podman node, from bound to deleted: the kubelet's pod worker, reduced to what
a Deployment's pods need (the decisions on plain data are podlifecycle.py's).

- start: volumes written (podvolumes), the images present (pulled per ``imagePullPolicy``), a
  podman pod (own network namespace, hostname = pod name, ``kubernetes.default.svc`` in
  /etc/hosts), each container created from podspec's arguments;
- init containers: run one at a time, in order, each to completion (a failed one restarted
  with back-off, or the pod failed under ``restartPolicy: Never``), then the app containers
  started; they share the pod's volumes (an in-memory emptyDir is one tmpfs for all of them);
- run: container exits restarted per ``restartPolicy`` with the kubelet's back-off (10 s
  doubling to 5 min), httpGet readiness and liveness probes with their thresholds (a failed
  liveness probe restarts the container), tokens refreshed, status written when it changes
  (phase, pod IP, conditions, init and app container statuses);
- stop (``deletionTimestamp``): SIGTERM to every container at once, SIGKILL after the grace
  period, the podman pod removed, then the Pod object deleted with grace 0 (uid precondition).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiException

from scheduler.devcluster import podlifecycle, podspec
from scheduler.devcluster.podlifecycle import Condition, ContainerRun, InitStep, ProbeState
from scheduler.devcluster.podman import Podman, PodmanError
from scheduler.devcluster.podspec import Obj, PodContext, PodSpecError
from scheduler.devcluster.podvolumes import CONFIGMAPS, SECRETS, PodVolumes, VolumeWriter
from scheduler.k8s.informer import PODS, Api

log = logging.getLogger(__name__)

RETRY_START_S = 5.0  # a pod that could not start (missing Secret, image) is tried again
# The pod conditions this node writes; the others (PodScheduled, DisruptionTarget, readiness
# gates) belong to other writers and are kept as they are.
OWN_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


@dataclass(frozen=True)
class NodeContext:
    """What every pod worker of the node shares."""

    api: Api
    podman: Podman
    volumes: VolumeWriter
    node_name: str
    gateway: str
    api_port: int


@dataclass
class PodWorker:
    node: NodeContext
    pod: Obj
    inits: list[ContainerRun] = field(default_factory=list)
    containers: list[ContainerRun] = field(default_factory=list)
    pod_ip: str = ""
    volumes: PodVolumes | None = None
    started: bool = False  # the sandbox and every container created
    initialized: bool = False  # every init container completed, the app containers started
    gone: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    _reported: str = ""
    _transitions: dict[str, tuple[str, str]] = field(default_factory=dict)
    _start_error: tuple[str, str] | None = None

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])

    @property
    def key(self) -> str:
        return f"{self.pod['metadata']['namespace']}/{self.pod['metadata']['name']}"

    def launch(self) -> PodWorker:
        threading.Thread(target=self._run, name=f"pod {self.key}", daemon=True).start()
        return self

    def update(self, pod: Obj) -> None:
        self.pod = pod

    def vanish(self) -> None:
        """The Pod object is gone (force-deleted): stop at once, nothing to report."""
        self.gone.set()

    def _terminating(self) -> bool:
        return self.gone.is_set() or bool(self.pod["metadata"].get("deletionTimestamp"))

    # ---- the loop --------------------------------------------------------------------------
    def _run(self) -> None:
        retry_s = RETRY_START_S
        try:
            self._report()  # Pending at once, as a kubelet says (images and containers take seconds)
            while not self._terminating():
                if not self.started:
                    try:
                        self._start()
                        self._start_error = None
                    except (PodSpecError, PodmanError) as exc:
                        reason = exc.reason if isinstance(exc, PodSpecError) else "CreateContainerError"
                        self._start_error = (reason, str(exc))
                        log.warning("pod %s cannot start: %s", self.key, exc)
                        self._cleanup_sandbox()
                        self._report()
                        self.gone.wait(retry_s)
                        retry_s = min(retry_s * 2, podlifecycle.BACKOFF_MAX_S)
                        continue
                self._tick()
                self._report()
                self.gone.wait(1.0)
            self._stop()
        except Exception:  # a worker that dies leaves its pod running and unreported: say so loudly
            log.exception("pod worker %s failed", self.key)
        finally:
            self.done.set()

    def _start(self) -> None:
        """Sandbox, volumes and every container created; none started yet (``_tick`` runs the
        init containers in order, then the app containers)."""
        spec = self.pod.get("spec") or {}
        if spec.get("ephemeralContainers"):
            raise PodSpecError("ephemeral containers are not run by the podman node")
        if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
            raise PodSpecError("host namespaces are not given to pods by the podman node")
        podlifecycle.check_supported(spec)
        init_specs, app_specs = list(spec.get("initContainers") or ()), list(spec["containers"])
        self.volumes = self.node.volumes.prepare(self.pod)
        users = {c["name"]: self._image(c) for c in [*init_specs, *app_specs]}
        name = podspec.pod_name(self.pod)
        self.node.podman.remove_pod(name)  # a leftover of an earlier attempt
        self.node.podman.create_pod(name, self.pod["metadata"]["name"],
                                    {"kubernetes.default.svc": self.node.gateway},
                                    {podspec.NODE_LABEL: self.node.node_name, podspec.POD_UID_LABEL: self.uid})
        self.pod_ip = self.node.podman.pod_ip(name)
        ctx = PodContext(self.pod_ip, self.node.gateway, self.node.node_name, "kubernetes.default.svc",
                         self.node.api_port, self.volumes.mounts)
        self.inits = [self._create(c, ctx, users[c["name"]], init=True) for c in init_specs]
        self.containers = [self._create(c, ctx, users[c["name"]], init=False) for c in app_specs]
        self.initialized = False
        self.started = True

    def _create(self, container: Obj, ctx: PodContext, image_user: str, init: bool) -> ContainerRun:
        env = podspec.container_env(self.pod, container, ctx, self._lookup)
        argv = podspec.create_argv(self.pod, container, ctx, env, image_user, self.node.node_name)
        run = ContainerRun(container, podspec.container_name(self.pod, container), init=init,
                           image_id=self.node.podman.image_id(container["image"]))
        for kind in ("readinessProbe", "livenessProbe"):
            probe = podspec.probe(container, kind, self.pod_ip)
            if probe is not None:
                setattr(run, kind.removesuffix("Probe"), ProbeState(probe, 0.0))
        self.node.podman.run(*argv)
        return run

    def _image(self, container: Obj) -> str:
        image, policy = container["image"], container.get("imagePullPolicy", "IfNotPresent")
        user = self.node.podman.image_user(image)
        if policy == "Always" or (user is None and policy == "IfNotPresent"):
            try:
                self.node.podman.pull(image)
            except PodmanError as exc:
                raise PodSpecError(f'Failed to pull image "{image}": {exc}', "ErrImagePull") from exc
            user = self.node.podman.image_user(image)
        if user is None:
            raise PodSpecError(f'Container image "{image}" is not present with pull policy of Never',
                               "ErrImageNeverPull")
        return user

    def _lookup(self, kind: str, namespace: str, name: str, key: str) -> str | None:
        try:
            obj = self.node.api.get(CONFIGMAPS if kind == "ConfigMap" else SECRETS, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        if kind == "ConfigMap":
            return (obj.get("data") or {}).get(key)
        value = (obj.get("data") or {}).get(key)
        return None if value is None else base64.b64decode(value).decode()

    def _start_container(self, run: ContainerRun) -> None:
        self.node.podman.run("start", run.name)
        run.started(_rfc3339(self.node.podman.state(run.name).get("StartedAt")), time.monotonic())

    def _restart(self, run: ContainerRun, last: dict[str, Any] | None) -> None:
        run.restarting(last)
        self._start_container(run)

    # ---- while running ---------------------------------------------------------------------
    def _tick(self) -> None:
        now = time.monotonic()
        if self.volumes is not None:
            try:
                self.node.volumes.refresh(self.pod, self.volumes)
            except (PodSpecError, ApiException) as exc:
                log.warning("pod %s: volume refresh failed: %s", self.key, exc)
        policy = (self.pod.get("spec") or {}).get("restartPolicy", "Always")
        if not self.initialized:
            self._initialize(policy, now)
            return
        for run in self.containers:
            if run.terminated is None:
                state = self.node.podman.state(run.name)
                if not state.get("Running", False):
                    self._exited(run, state, policy, now)
                    continue
                self._probe(run, now)
            elif run.backoff_until and now >= run.backoff_until:
                self._restart(run, run.terminated)

    def _initialize(self, policy: str, now: float) -> None:
        """The init containers, one at a time in order, each to completion; then the app
        containers, all at once (kuberuntime's computeInitContainerActions)."""
        while True:
            step, run = podlifecycle.next_init_step(self.inits, now)
            if step is InitStep.DONE:
                for app in self.containers:
                    self._start_container(app)
                self.initialized = True
                return
            assert run is not None
            if step is InitStep.START:
                if run.ever_started:
                    self._restart(run, run.terminated)
                else:
                    log.info("pod %s: init container %s starting", self.key, run.spec["name"])
                    self._start_container(run)
                return
            if step is InitStep.FAILED or not run.running:
                return  # the pod failed (restartPolicy Never), or a back-off runs
            state = self.node.podman.state(run.name)
            if state.get("Running", False):
                return
            self._exited(run, state, policy, now)  # completed: the next one starts at once

    def _exited(self, run: ContainerRun, state: dict[str, Any], policy: str, now: float) -> None:
        code = int(state.get("ExitCode", 0))
        reason = "OOMKilled" if state.get("OOMKilled") else "Completed" if code == 0 else "Error"
        terminated = {"exitCode": code, "reason": reason, "startedAt": _rfc3339(state.get("StartedAt")),
                      "finishedAt": _rfc3339(state.get("FinishedAt"))}
        what = f"{'init container' if run.init else 'container'} {run.spec['name']} exited {code}"
        if run.exited(terminated, policy, now, self.pod["metadata"]):
            log.info("pod %s: %s, restarting in %.0fs", self.key, what, run.backoff_until - now)
        else:
            log.info("pod %s: %s", self.key, what)

    def _probe(self, run: ContainerRun, now: float) -> None:
        for probe in run.due_probes(now):
            if run.probed(probe, _http_ok(probe.spec)):
                log.info("pod %s: container %s failed its liveness probe, restarting", self.key, run.spec["name"])
                self.node.podman.stop(run.name, self._grace())
                self._restart(run, {"exitCode": 137, "reason": "Error", "startedAt": run.running_since,
                                    "finishedAt": _now()})

    def _grace(self) -> int:
        meta, spec = self.pod["metadata"], self.pod.get("spec") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        return int(grace if grace is not None else spec.get("terminationGracePeriodSeconds", 30))

    # ---- status ----------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The Pod status this node reports (the kubelet's fields that matter to controllers:
        phase, IPs, conditions, init and app container statuses)."""
        spec = self.pod.get("spec") or {}
        sandbox = bool(self.pod_ip)
        if self.started:
            others = {str(c.get("type")): str(c.get("status")) for c in self._other_conditions()}
            found = podlifecycle.pod_status(spec, self.inits, self.containers, sandbox, others)
        else:
            initial = podlifecycle.POD_INITIALIZING if spec.get("initContainers") else podlifecycle.CONTAINER_CREATING
            reason, message = self._start_error or (initial, "")
            found = podlifecycle.pending_status(spec, sandbox, reason, message)
        status: dict[str, Any] = {
            "phase": found.phase, "hostIP": self.node.gateway, "hostIPs": [{"ip": self.node.gateway}],
            "conditions": [self._condition(c) for c in found.conditions],
            "containerStatuses": list(found.statuses),
        }
        if found.init_statuses:
            status["initContainerStatuses"] = list(found.init_statuses)
        if self.pod_ip:
            status |= {"podIP": self.pod_ip, "podIPs": [{"ip": self.pod_ip}]}
        if not (self.pod.get("status") or {}).get("startTime"):
            status["startTime"] = _now()
        return status

    def _other_conditions(self) -> list[dict[str, Any]]:
        return [c for c in (self.pod.get("status") or {}).get("conditions") or ()
                if c.get("type") not in OWN_CONDITIONS]

    def _condition(self, condition: Condition) -> dict[str, Any]:
        """A pod condition with the time it last changed (kept across reports)."""
        status = _bool(condition.status)
        if self._transitions.get(condition.type, ("", ""))[0] != status:
            self._transitions[condition.type] = (status, _now())
        found = {"type": condition.type, "status": status,
                 "lastTransitionTime": self._transitions[condition.type][1]}
        if condition.reason:
            found["reason"] = condition.reason
        if condition.message:
            found["message"] = condition.message
        return found

    def _report(self) -> None:
        status = self.status()
        comparable = json.dumps({k: v for k, v in status.items() if k != "startTime"}, sort_keys=True)
        if comparable == self._reported or self._terminating():
            return
        # A merge patch replaces lists whole (podIPs after a new sandbox, containerStatuses); the
        # conditions other writers own (PodScheduled, DisruptionTarget) are kept as they are.
        status["conditions"] += self._other_conditions()
        try:
            self.node.api.merge_patch(PODS, self.pod["metadata"]["name"], {"status": status},
                                      namespace=self.pod["metadata"]["namespace"], subresource="status")
            self._reported = comparable
        except ApiException as exc:
            if exc.status != 404:
                log.warning("pod %s: status update failed (%s %s)", self.key, exc.status, str(exc.body)[:600])

    # ---- stop ------------------------------------------------------------------------------
    def _stop(self) -> None:
        grace = 0 if self.gone.is_set() else self._grace()
        stoppers = [threading.Thread(target=self.node.podman.stop, args=(run.name, grace), daemon=True)
                    for run in [*self.inits, *self.containers] if run.running]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join()
        self._cleanup_sandbox()
        self.node.volumes.remove(self.uid)
        if self.gone.is_set():
            return
        meta = self.pod["metadata"]
        try:
            self.node.api.request("DELETE", PODS.path(meta["namespace"], meta["name"]),
                                  body={"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}})
        except ApiException as exc:
            if exc.status not in (404, 409):
                log.warning("pod %s: final delete failed (%s)", self.key, exc.status)
        log.info("pod %s stopped", self.key)

    def _cleanup_sandbox(self) -> None:
        self.node.podman.remove_pod(podspec.pod_name(self.pod))


_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE  # the kubelet does not verify HTTPS probes either


def _http_ok(probe: podspec.Probe) -> bool:
    try:
        with urllib.request.urlopen(probe.url, timeout=probe.timeout_s, context=_INSECURE) as resp:
            return 200 <= int(resp.status) < 400
    except urllib.error.HTTPError as exc:
        return 200 <= exc.code < 400
    except (OSError, ValueError):
        return False


def _bool(value: bool) -> str:
    return "True" if value else "False"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rfc3339(podman_time: Any) -> str:
    """podman's ``2026-12-07 00:16:17.123 +0000 UTC`` (or ISO) as RFC 3339 seconds."""
    text = str(podman_time or "")
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            parsed = dt.datetime.strptime(text.split(".")[0].split(" +")[0], "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return _now()
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
