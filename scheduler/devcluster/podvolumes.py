"""A pod's volumes written to this machine, as a kubelet writes them, for the podman node.

- ``projected`` (the ServiceAccount admission plugin's ``kube-api-access-*``): the token from
  the TokenRequest API bound to the Pod (its ``expirationSeconds`` and ``audience``), rewritten
  at 80% of its life as the kubelet does; ConfigMap and Secret keys (``kube-root-ca.crt``'s
  ``ca.crt``); downward API fields (``namespace``).
- ``configMap`` and ``secret``: every key, or the ``items`` asked for, with their modes;
  re-read on every refresh, so a changed object reaches the files (the kubelet's periodic sync).
- ``emptyDir``: a directory shared by the pod's containers (init containers included); with
  ``medium: Memory`` a tmpfs mounted on that directory, as the kubelet mounts one, sized as the
  kubelet sizes it (the node's memory, else the pod's memory limit, else ``sizeLimit``:
  whichever is smallest), unmounted when the pod goes.

Files are written with their mode and renamed into place, so a reader never sees half a file.
Any other volume kind is a :class:`PodSpecError`: the pod does not start, and says why.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.client import ApiException

from scheduler.devcluster.podspec import HostDir, Obj, PodSpecError, quantity_bytes
from scheduler.k8s.informer import Api, Resource

CONFIGMAPS = Resource("", "v1", "configmaps")
SECRETS = Resource("", "v1", "secrets")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts")
DEFAULT_MODE = 0o644
TOKEN_REFRESH_FRACTION = 0.8  # the kubelet rewrites a projected token at 80% of its life


@dataclass
class _Token:
    volume: str
    path: str
    source: Obj
    mode: int
    refresh_at: float = 0.0


@dataclass
class PodVolumes:
    """The volumes of one pod: where they are, and the tokens to rewrite."""

    root: Path
    mounts: dict[str, HostDir] = field(default_factory=dict)
    tokens: list[_Token] = field(default_factory=list)


class VolumeWriter:
    def __init__(self, api: Api, root: Path, node_memory_bytes: int, clock: Any = time.time) -> None:
        self.api = api
        self.root = root
        self.node_memory_bytes = node_memory_bytes
        self.clock = clock

    def prepare(self, pod: Obj) -> PodVolumes:
        """Write every volume of ``pod``; raises PodSpecError for a missing object or an
        unsupported kind (nothing of the pod starts)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        written = PodVolumes(self.root / meta["uid"])
        for volume in spec.get("volumes") or ():
            name = volume["name"]
            empty = volume.get("emptyDir")
            target = written.root / "volumes" / name
            target.mkdir(parents=True, exist_ok=True)
            written.mounts[name] = HostDir(str(target))
            if empty is not None:
                if empty.get("medium") not in (None, "", "Memory"):
                    raise PodSpecError(f"volume {name}: emptyDir medium {empty['medium']} is not run by the "
                                       "podman node")
                target.chmod(0o777)  # as the kubelet makes an emptyDir: any container user writes
                if empty.get("medium") == "Memory":
                    mount_tmpfs(target, memory_volume_bytes(pod, empty, self.node_memory_bytes))
                continue
            self._write(pod, volume, target, written)
        return written

    def refresh(self, pod: Obj, volumes: PodVolumes) -> None:
        """Rewrite tokens due for renewal and ConfigMap/Secret contents (a changed object)."""
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            target = volumes.root / "volumes" / volume["name"]
            if ("configMap" in volume or "secret" in volume) and target.is_dir():
                self._write(pod, volume, target, None)
        now = self.clock()
        for token in volumes.tokens:
            if now >= token.refresh_at:
                self._write_token(pod, token, volumes.root / "volumes" / token.volume)

    def remove(self, uid: str) -> None:
        unmount_under(self.root / uid)
        shutil.rmtree(self.root / uid, ignore_errors=True)

    # ---- one volume ------------------------------------------------------------------------
    def _write(self, pod: Obj, volume: Obj, target: Path, written: PodVolumes | None) -> None:
        ns = pod["metadata"]["namespace"]
        if "configMap" in volume or "secret" in volume:
            kind = "configMap" if "configMap" in volume else "secret"
            src = volume[kind]
            name = src.get("name") if kind == "configMap" else src.get("secretName")
            files = self._keys(kind, ns, str(name), src.get("items"), bool(src.get("optional")))
            _write_files(target, files, int(src.get("defaultMode", DEFAULT_MODE)))
        elif "projected" in volume:
            mode = int(volume["projected"].get("defaultMode", DEFAULT_MODE))
            for source in volume["projected"].get("sources") or ():
                self._projected(pod, volume["name"], source, target, mode, written)
        elif "downwardAPI" in volume:
            _write_files(target, _downward(pod, volume["downwardAPI"].get("items") or ()),
                         int(volume["downwardAPI"].get("defaultMode", DEFAULT_MODE)))
        else:
            kinds = sorted(k for k in volume if k != "name")
            raise PodSpecError(f"volume {volume['name']}: {', '.join(kinds)} volumes are not run by the podman node")

    def _projected(self, pod: Obj, name: str, source: Obj, target: Path, mode: int,
                   written: PodVolumes | None) -> None:
        ns = pod["metadata"]["namespace"]
        if "serviceAccountToken" in source:
            token = _Token(name, source["serviceAccountToken"]["path"], source["serviceAccountToken"], mode)
            self._write_token(pod, token, target)
            if written is not None:
                written.tokens.append(token)
        elif "configMap" in source or "secret" in source:
            kind = "configMap" if "configMap" in source else "secret"
            src = source[kind]
            _write_files(target, self._keys(kind, ns, src["name"], src.get("items"), bool(src.get("optional"))),
                         mode)
        elif "downwardAPI" in source:
            _write_files(target, _downward(pod, source["downwardAPI"].get("items") or ()), mode)
        else:
            raise PodSpecError(f"volume {name}: projected source {sorted(source)} is not run by the podman node")

    def _keys(self, kind: str, namespace: str, name: str, items: Any, optional: bool) -> dict[str, tuple[bytes, int]]:
        resource = CONFIGMAPS if kind == "configMap" else SECRETS
        try:
            obj = self.api.get(resource, name, namespace)
        except ApiException as exc:
            if exc.status == 404 and optional:
                return {}
            if exc.status == 404:
                raise PodSpecError(f'{kind} "{name}" not found') from exc
            raise
        if kind == "configMap":
            data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
            data |= {k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()}
        else:
            data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        if items is None:
            return {k: (v, -1) for k, v in data.items()}
        files = {}
        for item in items:
            if item["key"] not in data:
                if optional:
                    continue
                raise PodSpecError(f'{kind} "{name}" has no key "{item["key"]}"')
            files[item["path"]] = (data[item["key"]], int(item.get("mode", -1)))
        return files

    def _write_token(self, pod: Obj, token: _Token, target: Path) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        account = spec.get("serviceAccountName") or "default"
        request: dict[str, Any] = {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": [token.source["audience"]] if token.source.get("audience") else [],
                     "expirationSeconds": int(token.source.get("expirationSeconds", 3607)),
                     "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": meta["name"], "uid": meta["uid"]}},
        }
        issued = self.clock()
        try:
            answer = self.api.request("POST", SERVICE_ACCOUNTS.path(meta["namespace"], account, "token"), body=request)
        except ApiException as exc:
            raise PodSpecError(f'serviceaccount "{account}": token request failed ({exc.status} {exc.reason})') \
                from exc
        lifetime = int(token.source.get("expirationSeconds", 3607))
        token.refresh_at = issued + TOKEN_REFRESH_FRACTION * lifetime
        _write_files(target, {token.path: (answer["status"]["token"].encode(), -1)}, token.mode)


def memory_volume_bytes(pod: Obj, empty_dir: Obj, node_bytes: int) -> int:
    """The size of an in-memory emptyDir's tmpfs, as the kubelet computes it
    (calculateEmptyDirMemorySize): the node's memory, lowered to the pod's memory limit when every
    app container has one (the larger of their sum and any init container's), lowered to the
    volume's ``sizeLimit``."""
    spec = pod.get("spec") or {}

    def limit(container: Obj) -> int | None:
        value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        return None if value is None else quantity_bytes(str(value))

    size = node_bytes
    apps = [limit(c) for c in spec.get("containers") or ()]
    if apps and all(a is not None for a in apps):
        pod_limit = max([sum(a for a in apps if a is not None),
                         *(x for x in (limit(c) for c in spec.get("initContainers") or ()) if x is not None)])
        if 0 < pod_limit <= size:
            size = pod_limit
    if empty_dir.get("sizeLimit") is not None:
        volume_limit = quantity_bytes(str(empty_dir["sizeLimit"]))
        if 0 < volume_limit <= size:
            size = volume_limit
    return size


def mount_tmpfs(target: Path, size_bytes: int) -> None:
    """A tmpfs on ``target`` (left as it is when one is mounted there already: a pod's start is
    retried with its volumes in place)."""
    if str(target.resolve()) in _mount_points():
        return
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(target)],
                         capture_output=True, text=True, timeout=30, check=False)
    if out.returncode != 0:
        raise PodSpecError(f"in-memory emptyDir at {target}: mount failed ({out.stderr.strip()})")


def unmount_under(root: Path) -> None:
    """Unmount every mount point under ``root`` (the pods' tmpfs volumes), deepest first."""
    prefix = str(root.resolve()) + os.sep
    for point in sorted((p for p in _mount_points() if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", point], capture_output=True, timeout=30, check=False)


def remove_volumes(root: Path) -> None:
    """Every pod's volumes under ``root`` gone, tmpfs mounts first (a node that died left them)."""
    unmount_under(root)
    shutil.rmtree(root, ignore_errors=True)


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 1:  # /proc/mounts escapes space, tab, newline and backslash in octal
                points.append(fields[1].encode().decode("unicode_escape"))
    return points


def _downward(pod: Obj, items: Any) -> dict[str, tuple[bytes, int]]:
    meta = pod["metadata"]
    fields = {"metadata.namespace": meta["namespace"], "metadata.name": meta["name"], "metadata.uid": meta["uid"]}
    files = {}
    for item in items:
        path = (item.get("fieldRef") or {}).get("fieldPath")
        if path not in fields:
            raise PodSpecError(f"downwardAPI {item.get('path')}: {path or 'resourceFieldRef'} is not run by the "
                               "podman node")
        files[item["path"]] = (str(fields[path]).encode(), int(item.get("mode", -1)))
    return files


def _write_files(target: Path, files: Mapping[str, tuple[bytes, int]], default_mode: int) -> None:
    for rel, (content, mode) in files.items():
        path = target / rel
        if not path.resolve().is_relative_to(target.resolve()):
            raise PodSpecError(f"volume path {rel!r} leaves the volume")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(content)
        os.chmod(tmp, default_mode if mode < 0 else mode)
        tmp.replace(path)
