"""A Pod's container, as a kubelet would run it, translated into ``podman create`` arguments.

Pure functions on the Pod object the API server returned (plain dicts) and what the podman node
knows about the pod (its IP, where its volumes were written): arguments and ``command`` with
Kubernetes' ``$(VAR)`` expansion, environment (values, field references, Secret and ConfigMap
keys, the ``kubernetes`` Service variables), volume mounts, user, read-only root, capabilities,
no-new-privileges, seccomp, memory limit. Anything a kubelet would refuse to start is a
:class:`PodSpecError` (reported as the container's waiting reason); anything this node does not
implement is one too, never silently skipped (docs/install.md, "The podman node").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = Mapping[str, Any]
# (kind, namespace, name, key) -> value, or None when the object or key is missing.
KeyLookup = Callable[[str, str, str, str], "str | None"]

# Pod labels every podman object of this node carries, so a sweep finds them after a crash.
NODE_LABEL = "toposched.dev/podman-node"
POD_UID_LABEL = "toposched.dev/pod-uid"
CONTAINER_LABEL = "toposched.dev/container"


class PodSpecError(Exception):
    """The container cannot start as specified. ``reason`` is the kubelet's waiting reason."""

    def __init__(self, message: str, reason: str = "CreateContainerConfigError") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class HostDir:
    """A volume written to (or shared through) a directory on this machine: every container of
    the pod that mounts it sees the same files (an in-memory emptyDir is a tmpfs mounted there)."""

    path: str


@dataclass(frozen=True)
class PodContext:
    """What the node knows about a pod when it creates the pod's containers."""

    pod_ip: str
    host_ip: str
    node_name: str
    api_host: str  # KUBERNETES_SERVICE_HOST as the pod sees it
    api_port: int
    volumes: Mapping[str, HostDir] = field(default_factory=dict)


def pod_name(pod: Obj) -> str:
    """The podman pod's name: namespace, name and the start of the uid (a re-created pod of the
    same name is another podman pod)."""
    meta = pod["metadata"]
    return f"k8s_{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"


def container_name(pod: Obj, container: Obj) -> str:
    return f"{pod_name(pod)}_{container['name']}"


# ---- environment ---------------------------------------------------------------------------
_VAR = re.compile(r"\$\$|\$\(([-._a-zA-Z0-9]+)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' variable expansion: ``$(NAME)`` becomes NAME's value when it is defined (else
    stays as written), ``$$`` escapes a dollar sign."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))
    return _VAR.sub(one, text)


def service_env(ctx: PodContext) -> dict[str, str]:
    """The ``kubernetes`` Service variables a kubelet gives every container (in-cluster clients
    read KUBERNETES_SERVICE_HOST/PORT)."""
    host, port = ctx.api_host, str(ctx.api_port)
    return {
        "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": f"tcp://{host}:{port}", f"KUBERNETES_PORT_{port}_TCP": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp", f"KUBERNETES_PORT_{port}_TCP_PORT": port,
        f"KUBERNETES_PORT_{port}_TCP_ADDR": host,
    }


def _field_ref(pod: Obj, ctx: PodContext, path: str) -> str:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    fields = {
        "metadata.name": meta["name"], "metadata.namespace": meta["namespace"], "metadata.uid": meta["uid"],
        "spec.nodeName": spec.get("nodeName", ctx.node_name),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": ctx.pod_ip, "status.hostIP": ctx.host_ip,
    }
    if path in fields:
        return str(fields[path])
    for prefix, source in (("metadata.labels['", meta.get("labels") or {}),
                           ("metadata.annotations['", meta.get("annotations") or {})):
        if path.startswith(prefix) and path.endswith("']"):
            return str(source.get(path[len(prefix):-2], ""))
    raise PodSpecError(f"env fieldRef {path!r} is not supported by the podman node")


def container_env(pod: Obj, container: Obj, ctx: PodContext, lookup: KeyLookup) -> dict[str, str]:
    """The container's environment in Kubernetes' order: the Service variables, then ``env``
    entries in order (each may use ``$(...)`` of the ones before)."""
    env = service_env(ctx)
    if container.get("envFrom"):
        raise PodSpecError("envFrom is not supported by the podman node")
    namespace = pod["metadata"]["namespace"]
    for entry in container.get("env") or ():
        name = entry["name"]
        if "valueFrom" not in entry:
            env[name] = expand(str(entry.get("value", "")), env)
            continue
        source = entry["valueFrom"]
        if "fieldRef" in source:
            env[name] = _field_ref(pod, ctx, source["fieldRef"]["fieldPath"])
            continue
        for key, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
            if key in source:
                ref = source[key]
                value = lookup(kind, namespace, ref["name"], ref["key"])
                if value is None:
                    if ref.get("optional"):
                        break
                    raise PodSpecError(f'{kind.lower()} "{ref["name"]}" key "{ref["key"]}" not found (env {name})')
                env[name] = value
                break
        else:
            raise PodSpecError(f"env {name}: valueFrom {sorted(source)} is not supported by the podman node")
    return env


# ---- security ------------------------------------------------------------------------------
def _security(pod: Obj, container: Obj, key: str) -> Any:
    """A container's securityContext field, else the pod's (where the pod level has it)."""
    own = (container.get("securityContext") or {}).get(key)
    if own is not None:
        return own
    return ((pod.get("spec") or {}).get("securityContext") or {}).get(key)


def run_as(pod: Obj, container: Obj, image_user: str) -> str:
    """The ``--user`` value, or "" for the image's own user. ``runAsNonRoot`` is checked as the
    kubelet checks it: a numeric non-zero user, from the spec or the image."""
    uid, gid = _security(pod, container, "runAsUser"), _security(pod, container, "runAsGroup")
    if _security(pod, container, "runAsNonRoot"):
        effective = str(uid) if uid is not None else image_user.split(":")[0]
        if not effective.isdigit():
            raise PodSpecError(f"container has runAsNonRoot and image has non-numeric user ({effective or 'none'}), "
                               "cannot verify user is non-root")
        if int(effective) == 0:
            raise PodSpecError("container has runAsNonRoot and image will run as root")
    if uid is None:
        return "" if gid is None else f"{image_user.split(':')[0] or 0}:{gid}"
    return f"{uid}:{gid}" if gid is not None else str(uid)


def security_args(pod: Obj, container: Obj) -> list[str]:
    ctx = container.get("securityContext") or {}
    args: list[str] = []
    if ctx.get("privileged"):
        raise PodSpecError("privileged containers are not run by the podman node")
    if ctx.get("readOnlyRootFilesystem"):
        # podman mounts writable tmpfs on /run, /tmp, /var/tmp under --read-only unless told not to;
        # a kubelet does not, so only the pod's own volumes are writable.
        args += ["--read-only", "--read-only-tmpfs=false"]
    if ctx.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    caps = ctx.get("capabilities") or {}
    args += [f"--cap-drop={c}" for c in caps.get("drop") or ()]
    args += [f"--cap-add={c}" for c in caps.get("add") or ()]
    seccomp = (_security(pod, container, "seccompProfile") or {}).get("type", "RuntimeDefault")
    if seccomp == "Unconfined":
        args += ["--security-opt", "seccomp=unconfined"]
    elif seccomp != "RuntimeDefault":
        raise PodSpecError(f"seccompProfile {seccomp} is not supported by the podman node")
    return args


# ---- mounts and the command line -----------------------------------------------------------
def mount_args(container: Obj, ctx: PodContext) -> list[str]:
    args: list[str] = []
    for mount in container.get("volumeMounts") or ():
        source = ctx.volumes.get(mount["name"])
        if source is None:
            raise PodSpecError(f'volume "{mount["name"]}" of mount {mount["mountPath"]} is not prepared')
        path = source.path + ("/" + mount["subPath"] if mount.get("subPath") else "")
        args += ["--volume", f"{path}:{mount['mountPath']}:{'ro' if mount.get('readOnly') else 'rw'}"]
    return args


def quantity_bytes(quantity: str) -> int:
    """A Kubernetes quantity of bytes (``16Mi``, ``2Gi``, ``512M``, ``1000``) as a number."""
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?", str(quantity))
    if match is None:
        raise PodSpecError(f"quantity {quantity!r} is not understood by the podman node")
    scale = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9,
             "T": 10**12}.get(match.group(2) or "", 1)
    return int(match.group(1)) * scale


def memory_limit(container: Obj) -> list[str]:
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    return [f"--memory={quantity_bytes(limit)}"] if limit else []


def create_argv(pod: Obj, container: Obj, ctx: PodContext, env: Mapping[str, str], image_user: str,
                node: str) -> list[str]:
    """``podman create`` arguments for one container of ``pod`` (joined to the podman pod, whose
    network namespace, hostname and /etc/hosts it shares)."""
    if container.get("stdin") or container.get("tty"):
        raise PodSpecError("stdin/tty containers are not run by the podman node")
    argv = ["create", "--pod", pod_name(pod), "--name", container_name(pod, container),
            "--label", f"{NODE_LABEL}={node}", "--label", f"{POD_UID_LABEL}={pod['metadata']['uid']}",
            "--label", f"{CONTAINER_LABEL}={container['name']}", "--pull=never", "--restart=no"]
    user = run_as(pod, container, image_user)
    if user:
        argv += ["--user", user]
    argv += security_args(pod, container) + mount_args(container, ctx) + memory_limit(container)
    if container.get("workingDir"):
        argv += ["--workdir", container["workingDir"]]
    for name, value in env.items():
        argv += ["--env", f"{name}={value}"]
    command = [expand(c, env) for c in container.get("command") or ()]
    if command:
        argv += ["--entrypoint", json.dumps(command)]
    return [*argv, container["image"], *(expand(a, env) for a in container.get("args") or ())]


# ---- probes --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    url: str
    initial_delay_s: float
    period_s: float
    timeout_s: float
    failure_threshold: int
    success_threshold: int


def _port(container: Obj, port: Any) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports") or ():
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise PodSpecError(f"probe port {port!r} is not a port of container {container['name']}")


def probe(container: Obj, kind: str, pod_ip: str) -> Probe | None:
    """The container's ``readinessProbe`` / ``livenessProbe`` (httpGet; the podman node runs no
    other kind) against the pod's IP, with Kubernetes' defaults."""
    spec = container.get(kind)
    if not spec:
        return None
    get = spec.get("httpGet")
    if get is None:
        raise PodSpecError(f"{kind} of {container['name']}: only httpGet probes are run by the podman node")
    scheme = str(get.get("scheme", "HTTP")).lower()
    url = f"{scheme}://{get.get('host') or pod_ip}:{_port(container, get['port'])}{get.get('path', '/')}"
    return Probe(url, float(spec.get("initialDelaySeconds", 0)), float(spec.get("periodSeconds", 10)),
                 float(spec.get("timeoutSeconds", 1)), int(spec.get("failureThreshold", 3)),
                 int(spec.get("successThreshold", 1)))
