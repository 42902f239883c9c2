"""Pydantic model of toposched's own ``PreemptionLimit`` (``toposched.io/v1alpha1``, cluster-scoped).

Not Kueue's: no Kueue release has a PreemptionLimit (the idea is KEP-16925's, which exists only
in forks), so toposched serves it in its own API group, where it cannot clash with a Kueue that
one day ships one. Objects an earlier toposched wrote as ``kueue.x-k8s.io/v1alpha1`` are copied
here by the migration (``kube/limit_migration.py``, ``toposched migrate-preemption-limits``).

``status.counts[]`` is ``{key, count}``: the key is a scope key, not an object's name
("Global", a ClusterQueue's name, or a Workload's ``namespace/name``), which is why the field is
``key`` where the fork types wrote ``name``. Like every toposched type it refuses a field it
does not know, naming it.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from scheduler.models.kueue import ObjectMeta
from scheduler.models.preemption import ExactType, LabelSelector

GROUP = "toposched.io"
VERSION = "v1alpha1"
API_VERSION: Final = "toposched.io/v1alpha1"
LEGACY_API_VERSION = "kueue.x-k8s.io/v1alpha1"  # where toposched before issue 41 kept them


class PreemptionLimitSpec(ExactType):
    scope: Literal["Global", "PreemptingClusterQueue", "PreemptedClusterQueue", "PreemptedWorkload"]
    config_selector: LabelSelector | None = None
    cluster_queue_selector: LabelSelector | None = None
    limit: int = Field(ge=0, le=2**31 - 1)
    limit_window_seconds: int = Field(ge=1, le=2**31 - 1)


class PreemptionLimitCount(ExactType):
    key: str
    count: int


class PreemptionLimitStatus(ExactType):
    counts: list[PreemptionLimitCount] = Field(default_factory=list, max_length=1000)


class PreemptionLimit(ExactType):
    api_version: Literal["toposched.io/v1alpha1"] = API_VERSION
    kind: Literal["PreemptionLimit"] = "PreemptionLimit"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PreemptionLimitSpec
    status: PreemptionLimitStatus | None = None
