"""Server-side apply of plain object dicts (YAML documents) against the local cluster."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

FIELD_MANAGER = "toposched-dev"


def load_documents(path: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        if doc.get("kind") == "List" or str(doc.get("kind", "")).endswith("List"):
            docs.extend(doc.get("items") or [])
        else:
            docs.append(doc)
    return docs


def apply_objects(api: client.ApiClient, objects: Iterable[Mapping[str, Any]], retries: int = 20) -> None:
    """Apply each object in order. Retries briefly while a just-created CRD's API appears."""
    dyn = DynamicClient(api)
    for obj in objects:
        for attempt in range(retries):
            try:
                resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
                namespace = (obj.get("metadata") or {}).get("namespace")
                resource.server_side_apply(
                    body=dict(obj), name=obj["metadata"]["name"], namespace=namespace,
                    field_manager=FIELD_MANAGER, force_conflicts=True,
                )
                break
            except (ResourceNotFoundError, NotFoundError):
                if attempt == retries - 1:
                    raise
                dyn.resources.invalidate_cache()
                time.sleep(0.5)


def create_nodes(api: client.ApiClient, nodes: Iterable[Mapping[str, Any]], fake_label: str) -> int:
    """Create Node objects (status included: there is no kubelet to report it) under KWOK's care."""
    core = client.CoreV1Api(api)
    count = 0
    for node in nodes:
        body = dict(node)
        meta = dict(body.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), fake_label: "true"}
        body["metadata"] = meta
        try:
            core.create_node(body)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
        count += 1
    return count


# Taints the node-lifecycle controller puts on a node whose Ready condition is not True. A fresh
# fake node carries not-ready until KWOK reports Ready *and* the controller's next monitor pass
# (node-monitor-period, 5 s) lifts it, so "Ready" alone does not mean "placeable" yet.
LIFECYCLE_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


def node_is_settled(node: Mapping[str, Any]) -> bool:
    """Ready=True and none of the node-lifecycle taints left: what every health check will see."""
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or ())
    return ready and not any(t.get("key") in LIFECYCLE_TAINTS for t in (node.get("spec") or {}).get("taints") or ())


def wait_nodes_settled(api: client.ApiClient, names: Iterable[str], timeout_s: float = 60) -> None:
    """Block until each named node is settled (see node_is_settled); raise naming the stragglers.
    One raw LIST per poll (thousands of nodes deserialised as plain JSON, not client models)."""
    core = client.CoreV1Api(api)
    pending = set(names)
    deadline = time.monotonic() + timeout_s
    while pending:
        raw = core.list_node(_preload_content=False)
        settled = {n["metadata"]["name"] for n in json.loads(raw.data).get("items") or () if node_is_settled(n)}
        pending -= settled
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} node(s) not Ready (or still tainted not-ready) after {timeout_s:.0f}s: "
                               f"{', '.join(sorted(pending)[:5])}{' ...' if len(pending) > 5 else ''}")
        time.sleep(0.5)
