"""Step one of every eviction (preemption, a cycle's Evict, node failures): remember the
domains the workload held, then set Evicted=True (and Preempted=True). The controller's
eviction phase does step two once the job's pods are gone (``status.release_status``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.cluster import admitted_placements
from scheduler.core.beyond.preferred_domains import ANN_PREVIOUS_DOMAINS
from scheduler.core.nodes import HOSTNAME_LABEL
from scheduler.core.topology_request import request_from_kueue
from scheduler.k8s.informer import Informer
from scheduler.kube import status as st
from scheduler.kube.writer import Obj, Writer


def previous_domains(workload: Mapping[str, Any], nodes: Informer) -> dict[str, dict[str, str]]:
    """Per pod set, the domain at its requested level (required, else preferred) that the
    current assignment sits in — remembered at eviction so re-admission prefers it."""
    requests = {ps["name"]: request_from_kueue(ps.get("topologyRequest"))
                for ps in (workload.get("spec") or {}).get("podSets") or ()}
    out: dict[str, dict[str, str]] = {}
    for placement, _per_pod, _flavor in admitted_placements(workload):
        request = requests.get(placement.name)
        level = request.required or request.preferred if request is not None else None
        if not level or tuple(placement.levels) != (HOSTNAME_LABEL,):
            continue
        values = {((nodes.get(d.values[0]) or {}).get("metadata") or {}).get("labels", {}).get(level)
                  for d in placement.domains}
        if len(values) == 1 and None not in values:
            out[placement.name] = {level: values.pop()}
    return out


def evict(writer: Writer, workload: Obj, reason: str, message: str, now: dt.datetime,
          preempted_reason: str | None = None) -> Obj | None:
    """Evicted=True (and Preempted=True), after remembering the domains the workload held;
    the updated workload, or None when a write was skipped (stale copy, gone, not leading)."""
    domains = previous_domains(workload, writer.cache.nodes)
    if domains:
        annotated = writer.annotate_workload(workload, {ANN_PREVIOUS_DOMAINS: json.dumps(domains, sort_keys=True)})
        if annotated is None:
            return None
        workload = annotated
    return writer.patch_workload_status(workload, st.evict_status(workload, reason, message, now, preempted_reason))
