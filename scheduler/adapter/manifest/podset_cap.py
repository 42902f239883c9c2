"""A job whose Workload would have more pod sets than Kueue's Workload holds, refused at the door.

Kueue's Workload caps ``spec.podSets`` (the CRD's MaxItems: 8 at v0.17.0, 18 at v0.19.2;
``workload_checks.max_pod_sets``). Only Ray's webhook counts a job's pod sets itself (the kind's
own validation, Kueue's words); for every other kind Kueue's controller fails to create the
Workload and the job stays suspended with no Workload. toposched refuses such a job when it is
submitted, with the CRD's words on the job's own list of pod sets and the fix."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.manifest.fielderrors import FieldError, too_many
from scheduler.adapter.workload_checks import max_pod_sets
from scheduler.core.config import KUEUE_RELEASES, KUEUE_V017, KUEUE_V019

_INDEX = re.compile(r"\[\d+\]$")


def pod_set_list_path(paths: list[str]) -> str:
    """The field of the job that lists its pod sets, from the pod sets' template paths:
    ``spec.replicatedJobs[0]...`` and ``spec.replicatedJobs[1]...`` -> ``spec.replicatedJobs``;
    ``spec.pytorchReplicaSpecs.Master...`` and ``...Worker...`` -> ``spec.pytorchReplicaSpecs``."""
    split = [p.split(".") for p in paths]
    common: list[str] = []
    for parts in zip(*split, strict=False):
        if len(set(parts)) == 1:
            common.append(parts[0])
            continue
        bare = {_INDEX.sub("", p) for p in parts}
        if len(bare) == 1:
            common.append(bare.pop())
        break
    return ".".join(common) or "spec"


def pod_set_cap_errors(job: Mapping[str, Any], kind: JobKind, release: str) -> list[FieldError]:
    """The refusal of a job with more pod sets than Kueue ``release``'s Workload holds."""
    pod_sets = kind.pod_sets(job)
    most = max_pod_sets(release)
    if len(pod_sets) <= most:
        return []
    fix = (f"its Workload would have {len(pod_sets)} pod sets and a Workload of Kueue {KUEUE_RELEASES[release]} "
           f"holds at most {most} (spec.podSets): merge pod sets or split the job")
    if release == KUEUE_V017:
        fix += f" (Kueue v0.19 holds {max_pod_sets(KUEUE_V019)}: --kueue-version v0.19)"
    return [too_many(pod_set_list_path([ps.annotations_path for ps in pod_sets]), len(pod_sets), most, fix)]
