"""The webhook's route table: one route per path, each a declared list of named steps
(``admission/steps.py``) run in order until one answers.

Paths: for each kind of the job-kind registry a mutating and a validating path (its
``mutate_path`` / ``validate_path``); Kueue's own webhooks' paths for Topology, ResourceFlavor,
ClusterQueue, LocalQueue and Workload (v1beta2 and v1beta1), and for Kueue's alpha
PreemptionConfig (v1alpha1, which Kueue v0.20 checks by its CRD only); and the default deny's catch-all
``/validate-queued``. Where to add a webhook check: docs/architecture.md, "Add a webhook check".
"""

from __future__ import annotations

from dataclasses import dataclass

from admission import steps
from admission.governance import QUEUED_PATH
from admission.steps import Step
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.registry import KINDS

KUEUE_PLURALS = {"Topology": "topologies", "ResourceFlavor": "resourceflavors",
                 "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}


def validate_kueue_path(kind: str, version: str = "v1beta2") -> str:
    return f"/validate-kueue-x-k8s-io-{version}-{kind.lower()}"


VALIDATE_WORKLOAD = validate_kueue_path("Workload")


@dataclass(frozen=True)
class Route:
    """What one path serves: the kind it reads the object as, and its steps in order."""

    path: str
    kind_name: str
    steps: tuple[Step, ...]
    job_kind: JobKind | None = None


# The steps of each route, in order. Guards first (the object's kind and shape, who governs it,
# who may change what), then the one step that decides.
JOB_MUTATE = (steps.read_as_path_kind, steps.shape_gate, steps.mutate_job_step)
JOB_VALIDATE = (steps.read_as_path_kind, steps.shape_gate, steps.default_deny, steps.unsuspend_guard,
                steps.update_guard, steps.validate_job_step)
POD_MUTATE = (steps.read_as_path_kind, steps.shape_gate, steps.mutate_pod_step)
POD_VALIDATE = (steps.read_as_path_kind, steps.shape_gate, steps.validate_pod_step)
WORKLOAD_VALIDATE = (steps.shape_gate, steps.validate_workload_step)
KUEUE_OBJECT_VALIDATE = (steps.shape_gate, steps.validate_kueue_object_step)
PREEMPTION_CONFIG_VALIDATE = (steps.validate_preemption_config_step,)
VALIDATE_PREEMPTION_CONFIG = validate_kueue_path("PreemptionConfig", "v1alpha1")
QUEUED = (steps.default_deny, steps.allow)


def _routes() -> dict[str, Route]:
    routes: dict[str, Route] = {}
    for kind in KINDS:
        mutate, validate = (POD_MUTATE, POD_VALIDATE) if kind is POD else (JOB_MUTATE, JOB_VALIDATE)
        routes[kind.mutate_path] = Route(kind.mutate_path, kind.kind, mutate, kind)
        routes[kind.validate_path] = Route(kind.validate_path, kind.kind, validate, kind)
    for version in ("v1beta1", "v1beta2"):
        for name in KUEUE_PLURALS:
            path = validate_kueue_path(name, version)
            routes[path] = Route(path, name, KUEUE_OBJECT_VALIDATE)
        path = validate_kueue_path("Workload", version)
        routes[path] = Route(path, "Workload", WORKLOAD_VALIDATE)
    routes[VALIDATE_PREEMPTION_CONFIG] = Route(VALIDATE_PREEMPTION_CONFIG, "PreemptionConfig",
                                               PREEMPTION_CONFIG_VALIDATE)
    routes[QUEUED_PATH] = Route(QUEUED_PATH, "", QUEUED)
    return routes


ROUTES = _routes()
PATHS = tuple(ROUTES)
