"""An in-memory API server implementing :class:`~scheduler.k8s.informer.KubeApi`, for tests
of the controller's phases (and fault-injection tests) without a control plane.

It keeps what the controller relies on: a cluster-wide ``resourceVersion`` counter, optimistic
concurrency (a patch or replace carrying a stale resourceVersion gets 409), 404 for missing
objects, 409 on creating an existing name, JSON merge patch (RFC 7386: ``null`` deletes), the
status subresource (a status patch changes only ``status``; a main patch never does),
``generation`` bumped by spec changes, finalizers (delete marks ``deletionTimestamp``; removing
the last finalizer then deletes), label / field selectors of the simple forms the informers
use, and a watch that replays changes after a resourceVersion. Failures are the official
client's ``ApiException``, so the code under test takes the same paths as against a real
server. ``fail_next`` injects one failure (chaos tests).
"""

from __future__ import annotations

import copy
import datetime as dt
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.k8s.clock import timestamp, utcnow
from scheduler.k8s.informer import Obj, Resource

Key = tuple[str, str, str]  # (group/version/plural, namespace, name)


@dataclass(frozen=True)
class _Change:
    resource_version: int
    kind: str  # ADDED | MODIFIED | DELETED
    resource: Resource
    obj: Obj


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch of ``patch`` onto ``target`` (returns a new value)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _lookup(obj: Mapping[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def matches_selectors(obj: Mapping[str, Any], label_selector: str | None, field_selector: str | None) -> bool:
    """``key``, ``!key``, ``key=value``, ``key!=value`` terms joined by commas (the forms the
    informers use)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (label_selector or "").split(",")):
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value:
                return False
        elif term not in labels:
            return False
    for term in filter(None, (field_selector or "").split(",")):
        negate = "!=" in term
        path, value = term.split("!=" if negate else "=", 1)
        if (str(_lookup(obj, path.rstrip("="))) == value) == negate:
            return False
    return True


class FakeApi:
    def __init__(self, clock: Callable[[], dt.datetime] = utcnow) -> None:
        self.clock = clock
        self._objects: dict[Key, Obj] = {}
        self._changes: list[_Change] = []
        self._rv = 0
        self._lock = threading.Condition()
        self._failures: list[tuple[str | None, str | None, int]] = []
        self.calls: list[tuple[str, str, str | None]] = []  # (method, plural, name): what was written
        self.delete_options: list[tuple[str, str, dict[str, Any]]] = []  # (plural, name, query) of each delete

    # ------------------------------------------------------------------ test helpers
    def fail_next(self, status: int, method: str | None = None, plural: str | None = None) -> None:
        """The next matching call raises ``ApiException(status)`` (once)."""
        with self._lock:
            self._failures.append((method, plural, status))

    def objects(self, resource: Resource, namespace: str | None = None) -> list[Obj]:
        with self._lock:
            return [copy.deepcopy(o) for (res, ns, _name), o in self._objects.items()
                    if res == self._res(resource) and (namespace is None or ns == namespace)]

    # ------------------------------------------------------------------ KubeApi
    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        with self._lock:
            self._maybe_fail("get", resource)
            return copy.deepcopy(self._existing(resource, namespace, name))

    def list(self, resource: Resource, namespace: str | None = None, **query: Any) -> Obj:
        with self._lock:
            self._maybe_fail("list", resource)
            items = [o for o in self.objects(resource, namespace)
                     if matches_selectors(o, query.get("labelSelector"), query.get("fieldSelector"))]
            return {"items": items, "metadata": {"resourceVersion": str(self._rv)}}

    def create(self, resource: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        with self._lock:
            self._record("create", resource, None)
            self._maybe_fail("create", resource)
            body = copy.deepcopy(dict(obj))
            meta = body.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
            ns = (namespace or meta.get("namespace") or "") if resource.namespaced else ""
            key = (self._res(resource), ns, meta["name"])
            if key in self._objects:
                raise ApiException(status=409, reason="AlreadyExists")
            if ns:
                meta["namespace"] = ns
            meta.update(uid=str(uuid.uuid4()), generation=1, creationTimestamp=timestamp(self.clock()))
            return self._store(resource, key, body, "ADDED")

    def merge_patch(self, resource: Resource, name: str, patch: Mapping[str, Any], namespace: str | None = None,
                    subresource: str | None = None) -> Obj:
        with self._lock:
            self._record("patch" if subresource is None else f"patch/{subresource}", resource, name)
            self._maybe_fail("patch", resource)
            current = self._existing(resource, namespace, name)
            self._check_version(current, (patch.get("metadata") or {}).get("resourceVersion"))
            if subresource == "status":
                updated = dict(current, status=merge_patch(current.get("status"), patch.get("status") or {}))
            else:
                updated = merge_patch(current, {k: v for k, v in patch.items() if k != "status"})
                updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                if updated.get("spec") != current.get("spec"):
                    updated["metadata"]["generation"] = int(current["metadata"].get("generation") or 0) + 1
            return self._update(resource, namespace, name, updated)

    def replace(self, resource: Resource, obj: Mapping[str, Any], subresource: str | None = None) -> Obj:
        meta = obj["metadata"]
        with self._lock:
            self._record("replace", resource, meta["name"])
            self._maybe_fail("replace", resource)
            current = self._existing(resource, meta.get("namespace"), meta["name"])
            self._check_version(current, meta.get("resourceVersion"))
            updated = copy.deepcopy(dict(obj))
            updated["metadata"] = {**current["metadata"], **updated["metadata"]}
            return self._update(resource, meta.get("namespace"), meta["name"], updated)

    def delete(self, resource: Resource, name: str, namespace: str | None = None, **query: Any) -> Any:
        with self._lock:
            self._record("delete", resource, name)
            self.delete_options.append((resource.plural, name, dict(query)))
            self._maybe_fail("delete", resource)
            current = self._existing(resource, namespace, name)
            if current["metadata"].get("finalizers"):
                marked = copy.deepcopy(current)
                marked["metadata"].setdefault("deletionTimestamp", timestamp(self.clock()))
                return self._update(resource, namespace, name, marked)
            self._remove(resource, self._key(resource, namespace, name))
            return {"kind": "Status", "status": "Success"}

    def watch(self, resource: Resource, resource_version: str, timeout_s: int = 240,
              namespace: str | None = None, **query: Any) -> Iterator[Obj]:
        """Changes after ``resource_version``, waiting up to ``timeout_s`` for more."""
        since = int(resource_version or 0)
        # Real time, not the injected clock: the informer thread blocks on this wait.
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                fresh = [c for c in self._changes if c.resource_version > since
                         and self._res(c.resource) == self._res(resource)
                         and (namespace is None or (c.obj.get("metadata") or {}).get("namespace") == namespace)
                         and matches_selectors(c.obj, query.get("labelSelector"), query.get("fieldSelector"))]
                if not fresh:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._lock.wait(remaining):
                        return
                    continue
            for change in fresh:
                since = change.resource_version
                yield {"type": change.kind, "object": copy.deepcopy(change.obj)}

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _res(resource: Resource) -> str:
        return f"{resource.group}/{resource.version}/{resource.plural}"

    def _key(self, resource: Resource, namespace: str | None, name: str) -> Key:
        return self._res(resource), (namespace or "") if resource.namespaced else "", name

    def _existing(self, resource: Resource, namespace: str | None, name: str) -> Obj:
        current = self._objects.get(self._key(resource, namespace, name))
        if current is None:
            raise ApiException(status=404, reason="NotFound")
        return current

    @staticmethod
    def _check_version(current: Mapping[str, Any], wanted: str | None) -> None:
        if wanted is not None and str(wanted) != current["metadata"].get("resourceVersion"):
            raise ApiException(status=409, reason="Conflict")

    def _update(self, resource: Resource, namespace: str | None, name: str, updated: Obj) -> Obj:
        key = self._key(resource, namespace, name)
        meta = updated["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(resource, key)
            return copy.deepcopy(updated)
        return self._store(resource, key, updated, "MODIFIED")

    def _store(self, resource: Resource, key: Key, obj: Obj, kind: str) -> Obj:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._objects[key] = obj
        self._changes.append(_Change(self._rv, kind, resource, copy.deepcopy(obj)))
        self._lock.notify_all()
        return copy.deepcopy(obj)

    def _remove(self, resource: Resource, key: Key) -> None:
        gone = self._objects.pop(key)
        self._rv += 1
        self._changes.append(_Change(self._rv, "DELETED", resource, copy.deepcopy(gone)))
        self._lock.notify_all()

    def _record(self, method: str, resource: Resource, name: str | None) -> None:
        self.calls.append((method, resource.plural, name))

    def _maybe_fail(self, method: str, resource: Resource) -> None:
        for i, (want_method, want_plural, status) in enumerate(self._failures):
            if want_method in (None, method) and want_plural in (None, resource.plural):
                del self._failures[i]
                raise ApiException(status=status, reason="Injected")
