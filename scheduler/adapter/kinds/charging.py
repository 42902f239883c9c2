"""The pod sets a job's Workload gets, as the Kueue release toposched behaves as charges them.

Kueue v0.19 charges more than v0.17.0 for the same job (docs/kueue-versions.md, "Admission,
quota"): what a kind's operator injects into its pods (a kind's ``injected_charges``: KubeRay's
head sidecars and Redis clean-up, ``ray_charges.py``), and a pod-level limit with no pod-level
request as that request (``workload.UseLimitsAsMissingRequestsInPod`` at v0.19.2, #12334).
Both the Workload toposched writes (``workloads.workload_pod_sets``) and the job's side of
"what runs is what was admitted" (``kube/equivalence.py``) read the pod sets here, so a job is
never compared with a Workload charged under other rules."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from scheduler.adapter.kinds.base import JobKind, Obj, PodSetSource, Related
from scheduler.core.config import DEFAULT_KUEUE_RELEASE, KUEUE_V019
from scheduler.core.nodes import pod_level_limits_as_requests


def _pod_level_defaulted(ps: PodSetSource) -> PodSetSource:
    spec = ps.template.get("spec")
    if not isinstance(spec, Mapping) or not spec.get("resources"):
        return ps
    defaulted = pod_level_limits_as_requests(spec)
    return ps if defaulted == spec else dataclasses.replace(ps, template={**ps.template, "spec": defaulted})


def charged_pod_sets(kind: JobKind, obj: Obj, related: Related | None = None,
                     release: str = DEFAULT_KUEUE_RELEASE) -> list[PodSetSource]:
    """``kind.read_pod_sets`` with what ``release`` charges on top (nothing under v0.17)."""
    sources = kind.read_pod_sets(obj, related)
    if release != KUEUE_V019:
        return sources
    if kind.injected_charges is not None:
        sources = kind.injected_charges(obj, sources)
    return [_pod_level_defaulted(ps) for ps in sources]
