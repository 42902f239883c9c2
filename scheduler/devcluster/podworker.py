"""One pod on the podman node, from bound to deleted: the kubelet's pod worker, reduced to what
a Deployment's pods need.

- start: volumes written (podvolumes), the image present (pulled per ``imagePullPolicy``), a
  podman pod (own network namespace, hostname = pod name, ``kubernetes.default.svc`` in
  /etc/hosts), each container created from podspec's arguments and started;
- run: container exits restarted per ``restartPolicy`` with the kubelet's back-off (10 s
  doubling to 5 min), httpGet readiness and liveness probes with their thresholds (a failed
  liveness probe restarts the container), tokens refreshed, status written when it changes
  (phase, pod IP, conditions, containerStatuses);
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

from scheduler.devcluster import podspec
from scheduler.devcluster.podman import Podman, PodmanError
from scheduler.devcluster.podspec import Obj, PodContext, PodSpecError
from scheduler.devcluster.podvolumes import CONFIGMAPS, SECRETS, PodVolumes, VolumeWriter
from scheduler.k8s.informer import PODS, Api

log = logging.getLogger(__name__)

BACKOFF_START_S, BACKOFF_MAX_S = 10.0, 300.0
RETRY_START_S = 5.0  # a pod that could not start (missing Secret, image) is tried again


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
class _Probe:
    spec: podspec.Probe
    due: float
    successes: int = 0
    failures: int = 0


@dataclass
class _Container:
    spec: Obj
    name: str
    image_id: str = ""
    restarts: int = 0
    running_since: str = ""
    ready: bool = False
    waiting: tuple[str, str] | None = ("ContainerCreating", "")
    terminated: dict[str, Any] | None = None
    last: dict[str, Any] | None = None
    backoff_until: float = 0.0
    readiness: _Probe | None = None
    liveness: _Probe | None = None
    probes_enabled: bool = False


@dataclass
class PodWorker:
    node: NodeContext
    pod: Obj
    containers: list[_Container] = field(default_factory=list)
    pod_ip: str = ""
    volumes: PodVolumes | None = None
    started: bool = False
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
                        retry_s = min(retry_s * 2, BACKOFF_MAX_S)
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
        spec = self.pod.get("spec") or {}
        if spec.get("initContainers") or spec.get("ephemeralContainers"):
            raise PodSpecError("init and ephemeral containers are not run by the podman node")
        if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
            raise PodSpecError("host namespaces are not given to pods by the podman node")
        self.volumes = self.node.volumes.prepare(self.pod)
        users = {c["name"]: self._image(c) for c in spec["containers"]}
        name = podspec.pod_name(self.pod)
        self.node.podman.remove_pod(name)  # a leftover of an earlier attempt
        self.node.podman.create_pod(name, self.pod["metadata"]["name"],
                                    {"kubernetes.default.svc": self.node.gateway},
                                    {podspec.NODE_LABEL: self.node.node_name, podspec.POD_UID_LABEL: self.uid})
        self.pod_ip = self.node.podman.pod_ip(name)
        ctx = PodContext(self.pod_ip, self.node.gateway, self.node.node_name, "kubernetes.default.svc",
                         self.node.api_port, self.volumes.mounts)
        now = time.monotonic()
        self.containers = []
        for container in spec["containers"]:
            env = podspec.container_env(self.pod, container, ctx, self._lookup)
            argv = podspec.create_argv(self.pod, container, ctx, env, users[container["name"]], self.node.node_name)
            run = _Container(container, podspec.container_name(self.pod, container),
                             image_id=self.node.podman.image_id(container["image"]))
            for kind in ("readinessProbe", "livenessProbe"):
                probe = podspec.probe(container, kind, self.pod_ip)
                if probe is not None:
                    setattr(run, kind.removesuffix("Probe"), _Probe(probe, now + probe.initial_delay_s))
            self.node.podman.run(*argv)
            self.containers.append(run)
        for run in self.containers:
            self._start_container(run)
        self.started = True

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

    def _start_container(self, run: _Container) -> None:
        self.node.podman.run("start", run.name)
        state = self.node.podman.state(run.name)
        run.running_since = _rfc3339(state.get("StartedAt"))
        run.waiting, run.terminated, run.ready = None, None, run.readiness is None
        now = time.monotonic()
        for probe in (run.readiness, run.liveness):
            if probe is not None:
                probe.due, probe.successes, probe.failures = now + probe.spec.initial_delay_s, 0, 0

    # ---- while running ---------------------------------------------------------------------
    def _tick(self) -> None:
        now = time.monotonic()
        if self.volumes is not None:
            try:
                self.node.volumes.refresh(self.pod, self.volumes)
            except (PodSpecError, ApiException) as exc:
                log.warning("pod %s: volume refresh failed: %s", self.key, exc)
        policy = (self.pod.get("spec") or {}).get("restartPolicy", "Always")
        for run in self.containers:
            if run.terminated is None:
                state = self.node.podman.state(run.name)
                if not state.get("Running", False):
                    self._exited(run, state, policy, now)
                    continue
                self._probe(run, now)
            elif run.backoff_until and now >= run.backoff_until:
                run.last, run.backoff_until = run.terminated, 0.0
                run.restarts += 1
                self._start_container(run)

    def _exited(self, run: _Container, state: dict[str, Any], policy: str, now: float) -> None:
        code = int(state.get("ExitCode", 0))
        run.ready, run.running_since = False, ""
        run.terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                          "startedAt": _rfc3339(state.get("StartedAt")),
                          "finishedAt": _rfc3339(state.get("FinishedAt"))}
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            delay = min(BACKOFF_START_S * 2 ** run.restarts, BACKOFF_MAX_S)
            run.backoff_until = now + delay
            run.waiting = ("CrashLoopBackOff", f"back-off {delay:.0f}s restarting failed container={run.spec['name']} "
                           f"pod={self.pod['metadata']['name']}")
            log.info("pod %s: container %s exited %d, restarting in %.0fs", self.key, run.spec["name"], code, delay)

    def _probe(self, run: _Container, now: float) -> None:
        for kind, probe in (("readiness", run.readiness), ("liveness", run.liveness)):
            if probe is None or now < probe.due:
                continue
            probe.due = now + probe.spec.period_s
            if _http_ok(probe.spec):
                probe.successes, probe.failures = probe.successes + 1, 0
            else:
                probe.successes, probe.failures = 0, probe.failures + 1
            if kind == "readiness":
                if probe.successes >= probe.spec.success_threshold:
                    run.ready = True
                elif probe.failures >= probe.spec.failure_threshold:
                    run.ready = False
            elif probe.failures >= probe.spec.failure_threshold:
                log.info("pod %s: container %s failed its liveness probe, restarting", self.key, run.spec["name"])
                self.node.podman.stop(run.name, self._grace())
                run.last = {"exitCode": 137, "reason": "Error", "startedAt": run.running_since, "finishedAt": _now()}
                run.restarts += 1
                self._start_container(run)

    def _grace(self) -> int:
        meta, spec = self.pod["metadata"], self.pod.get("spec") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        return int(grace if grace is not None else spec.get("terminationGracePeriodSeconds", 30))

    # ---- status ----------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The Pod status this node reports (the kubelet's fields that matter to controllers:
        phase, IPs, conditions, container statuses)."""
        now = _now()
        containers = [self._container_status(run) for run in self.containers]
        if not self.started:
            waiting = self._start_error or ("ContainerCreating", "")
            containers = [{"name": c["name"], "image": c["image"], "imageID": "", "ready": False, "started": False,
                           "restartCount": 0, "state": {"waiting": {"reason": waiting[0], "message": waiting[1]}}}
                          for c in self.pod["spec"]["containers"]]
        ready = self.started and all(c["ready"] for c in containers)
        phase = "Running" if self.started else "Pending"
        if self.started and all(run.terminated is not None and not run.backoff_until for run in self.containers):
            phase = "Succeeded" if all(run.terminated and run.terminated["exitCode"] == 0
                                       for run in self.containers) else "Failed"
        status: dict[str, Any] = {
            "phase": phase, "hostIP": self.node.gateway, "hostIPs": [{"ip": self.node.gateway}],
            "conditions": [self._condition(kind, value) for kind, value in (
                ("PodReadyToStartContainers", bool(self.pod_ip)), ("Initialized", True),
                ("ContainersReady", ready), ("Ready", ready))],
            "containerStatuses": containers,
        }
        if self.pod_ip:
            status |= {"podIP": self.pod_ip, "podIPs": [{"ip": self.pod_ip}]}
        if not (self.pod.get("status") or {}).get("startTime"):
            status["startTime"] = now
        return status

    def _condition(self, kind: str, value: bool) -> dict[str, Any]:
        """A pod condition with the time it last changed (kept across reports)."""
        status = _bool(value)
        if self._transitions.get(kind, ("", ""))[0] != status:
            self._transitions[kind] = (status, _now())
        return {"type": kind, "status": status, "lastTransitionTime": self._transitions[kind][1]}

    def _container_status(self, run: _Container) -> dict[str, Any]:
        if run.waiting is not None and run.terminated is not None and run.backoff_until:
            state: dict[str, Any] = {"waiting": {"reason": run.waiting[0], "message": run.waiting[1]}}
            last: dict[str, Any] | None = run.terminated
        elif run.terminated is not None:
            state, last = {"terminated": run.terminated}, run.last
        else:
            state, last = {"running": {"startedAt": run.running_since}}, run.last
        status = {"name": run.spec["name"], "image": run.spec["image"], "imageID": run.image_id,
                  "containerID": f"podman://{run.name}", "ready": run.ready, "started": "running" in state,
                  "restartCount": run.restarts, "state": state}
        if last:
            status["lastState"] = {"terminated": last}
        return status

    def _report(self) -> None:
        status = self.status()
        comparable = json.dumps({k: v for k, v in status.items() if k != "startTime"}, sort_keys=True)
        if comparable == self._reported or self._terminating():
            return
        # A merge patch replaces lists whole (podIPs after a new sandbox, containerStatuses); the
        # conditions other writers own (PodScheduled, DisruptionTarget) are kept as they are.
        ours = {c["type"] for c in status["conditions"]}
        status["conditions"] += [c for c in (self.pod.get("status") or {}).get("conditions") or ()
                                 if c.get("type") not in ours]
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
                    for run in self.containers if run.terminated is None]
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
