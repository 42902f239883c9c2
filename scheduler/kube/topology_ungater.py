"""The topology ungater: a pod of an admitted pod set lands in its assigned domain, whoever
created it (Kueue v0.17.0 ``pkg/controller/tas/topology_ungater.go``; issue 31 item 2).

Pods reach it carrying the scheduling gate ``kueue.x-k8s.io/topology`` (the pod webhook,
``admission/pods.py``, gates every queued pod; a job's pods get it from the template at start),
the annotation ``kueue.x-k8s.io/workload`` and the label ``kueue.x-k8s.io/podset``. For each
Workload that holds a reservation with a topology assignment and is Admitted, this phase lists
the live pods of each assigned pod set, asks the pure core which gated pod goes to which domain
(:func:`scheduler.core.kueue.ungating.plan_ungating`: ranks when the pod set names a rank label and
the ranks are sound, else greedily) and patches each chosen pod through the writer: the gate
removed and the domain's level labels added to its ``nodeSelector`` (Kubernetes allows adding
node-selector terms to a gated pod). A pod the plan does not choose stays gated; the plan's
notes (why ranks were not used, a malformed offset) are logged once per Workload and change.

Built, not wired: the controller calls :meth:`TopologyUngater.ungate` as a phase after
``start_admitted`` once the registry lands (docs/design/new-kinds.md, "Wiring").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.adapter.kinds import workload_slicing as slicing
from scheduler.core.assignment import AssignmentFormatError, decode_topology_assignment
from scheduler.core.kueue.ungating import AdmittedPodSet, GatedPodView, UngatePlan, plan_ungating
from scheduler.core.kueue_names import GATE_TOPOLOGY
from scheduler.core.workload import ANN_WORKLOAD, LABEL_PODSET
from scheduler.k8s.informer import PODS
from scheduler.kube import status as st
from scheduler.kube.cache import ClusterCache
from scheduler.kube.isolation import Isolation
from scheduler.kube.workload_index import holding
from scheduler.kube.writer import Writer

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def _gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE_TOPOLOGY for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def _admitted(workload: Mapping[str, Any]) -> bool:
    return any(c.get("type") == st.ADMITTED and c.get("status") == "True" for c in st.conditions_of(workload))


def admitted_pod_sets(workload: Mapping[str, Any]) -> list[AdmittedPodSet]:
    """The Workload's pod sets as the ungater needs them: admitted count, decoded assignment
    (None without one), rank labels and group from the pod set's topology request. Raises
    :class:`AssignmentFormatError` for an assignment in neither of Kueue's shapes."""
    requests = {ps.get("name"): ps.get("topologyRequest") or {} for ps in (workload.get("spec") or {}).get("podSets")
                or ()}
    out = []
    for psa in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
        name = str(psa.get("name"))
        request = requests.get(name) or {}
        assignment = psa.get("topologyAssignment")
        levels, domains = decode_topology_assignment(assignment) if assignment else ((), None)
        out.append(AdmittedPodSet(
            name=name, count=int(psa.get("count") or sum(d.count for d in domains or ())),
            levels=levels, domains=tuple(domains) if domains is not None else None,
            pod_index_label=request.get("podIndexLabel"), sub_group_index_label=request.get("subGroupIndexLabel"),
            sub_group_count=request.get("subGroupCount"), group_name=request.get("podSetGroupName")))
    return out


def pod_view(pod: Mapping[str, Any]) -> GatedPodView:
    meta = pod.get("metadata") or {}
    return GatedPodView(name=str(meta.get("name")), gated=_gated(pod),
                        node_selector=dict((pod.get("spec") or {}).get("nodeSelector") or {}),
                        labels=dict(meta.get("labels") or {}), annotations=dict(meta.get("annotations") or {}))


def release_patch(pod: Mapping[str, Any], node_labels: Mapping[str, str]) -> dict[str, Any]:
    """Merge patch of one release: the topology gate out (the list is sent whole), the domain's
    labels into the node selector."""
    spec = pod.get("spec") or {}
    gates = [g for g in spec.get("schedulingGates") or () if g.get("name") != GATE_TOPOLOGY]
    return {"spec": {"schedulingGates": gates or None,
                     "nodeSelector": {**(spec.get("nodeSelector") or {}), **node_labels}}}


class TopologyUngater:
    def __init__(self, cache: ClusterCache, writer: Writer, isolation: Isolation) -> None:
        self.cache = cache
        self.writer = writer
        self.isolation = isolation
        self._noted: dict[str, tuple[str, ...]] = {}

    def _pods_by_workload(self) -> dict[tuple[str, str], list[Obj]]:
        out: dict[tuple[str, str], list[Obj]] = {}
        for pod in self.cache.pods.items():
            meta = pod["metadata"]
            workload = (meta.get("annotations") or {}).get(ANN_WORKLOAD)
            phase = (pod.get("status") or {}).get("phase")
            if workload and phase not in ("Succeeded", "Failed") and not meta.get("deletionTimestamp"):
                out.setdefault((str(meta.get("namespace")), str(workload)), []).append(pod)
        return out

    def ungate(self) -> None:
        """One pass over the admitted TAS Workloads that have gated pods."""
        pods = self._pods_by_workload()

        def mine(wl: Mapping[str, Any]) -> list[Obj]:
            # An elastic job's pods may name the first slice of its chain (workload_slicing.slice_name).
            namespace, name = str(wl["metadata"].get("namespace")), str(wl["metadata"]["name"])
            chain = slicing.slice_name(wl) if slicing.replacement_for(wl) else name
            return [*pods.get((namespace, name), []), *(pods.get((namespace, chain), []) if chain != name else [])]

        candidates = [wl for wl in holding(self.cache.workloads) if _admitted(wl)]
        self.isolation.for_each("topology_ungate", candidates, lambda wl: self._ungate(wl, mine(wl)),
                                wanted=lambda wl: any(_gated(p) for p in mine(wl)))

    def plan(self, workload: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> UngatePlan:
        by_pod_set: dict[str, list[GatedPodView]] = {}
        for pod in pods:
            name = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_PODSET)
            if name:
                by_pod_set.setdefault(str(name), []).append(pod_view(pod))
        return plan_ungating(admitted_pod_sets(workload), by_pod_set)

    def _ungate(self, workload: Mapping[str, Any], pods: Sequence[Obj]) -> None:
        try:
            plan = self.plan(workload, pods)
        except AssignmentFormatError as exc:
            raise ValueError(f"cannot ungate pods of Workload {workload['metadata']['name']}: {exc}") from exc
        key = f"{workload['metadata'].get('namespace')}/{workload['metadata']['name']}"
        if plan.notes and self._noted.get(key) != plan.notes:
            self._noted[key] = plan.notes
            for note in plan.notes:
                log.info("topology ungater: Workload %s: %s", key, note)
        by_name = {p["metadata"]["name"]: p for p in pods}
        for release in plan.releases:
            pod = by_name[release.pod]
            self.writer.patch(PODS, pod, release_patch(pod, release.node_labels), self.cache.pods)
