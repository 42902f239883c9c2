"""Kueue's own webhooks for its queue objects (Topology, ResourceFlavor, ClusterQueue,
LocalQueue): the texts of Kueue's CEL rules and webhook checks, so a cluster whose CRDs lack a
rule (an older Kueue) gets the same answer. Plain dicts in, a :class:`Verdict` out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission.view import ClusterView
from scheduler.adapter.manifest.fielderrors import OMIT, Verdict, invalid, required, too_many
from scheduler.adapter.manifest.labelkeys import label_key_problems

Obj = Mapping[str, Any]
_OMIT: Any = OMIT
HOSTNAME = "kubernetes.io/hostname"


def topology_levels(topology: Obj) -> list[str]:
    """A Topology's node labels, widest first."""
    return [str(lv.get("nodeLabel", "")) for lv in (topology.get("spec") or {}).get("levels") or ()]


def validate_topology(obj: Obj, old: Obj | None = None) -> Verdict:
    verdict = Verdict()
    levels = topology_levels(obj)
    path = "spec.levels"
    if not levels:
        verdict.errors.append(required(path, "at least one level is required",
                                       "list the node label keys from widest to narrowest"))
        return verdict
    if len(levels) > 16:
        verdict.errors.append(too_many(path, len(levels), 16, "drop levels"))
    for i, level in enumerate(levels):
        for p in label_key_problems(level):
            verdict.errors.append(invalid(f"{path}[{i}].nodeLabel", level, p, "use a node label key"))
    if len(set(levels)) != len(levels):
        dups = sorted({lv for lv in levels if levels.count(lv) > 1})
        verdict.errors.append(invalid(path, _OMIT, "must be unique", f"remove the repeated level(s) {', '.join(dups)}"))
    if HOSTNAME in levels and levels[-1] != HOSTNAME:
        verdict.errors.append(invalid(path, _OMIT, "the kubernetes.io/hostname label can only be used at the lowest "
                                                   "level of topology", f"move {HOSTNAME} to the end of spec.levels"))
    if old is not None:
        old_levels = topology_levels(old)
        both_host = old_levels and old_levels[-1] == HOSTNAME and levels[-1] == HOSTNAME
        if old_levels != levels and not both_host:
            verdict.errors.append(invalid(path, _OMIT, "field is immutable",
                                          "create a new Topology and point the ResourceFlavor at it"))
    return verdict


def validate_resource_flavor(obj: Obj, view: ClusterView | None = None, old: Obj | None = None) -> Verdict:
    verdict = Verdict()
    spec = obj.get("spec") or {}
    topo = spec.get("topologyName")
    if topo and not spec.get("nodeLabels"):
        verdict.errors.append(invalid("spec", _OMIT, "at least one nodeLabel is required when topology is set",
                                      "add spec.nodeLabels selecting the flavor's nodes, e.g. "
                                      "{\"node.kubernetes.io/instance-type\": \"ml.p5.48xlarge\"}"))
    if old is not None:
        old_spec = old.get("spec") or {}
        if old_spec.get("topologyName") and old_spec.get("topologyName") != topo:
            verdict.errors.append(invalid("spec", _OMIT, "topologyName is immutable when topologyName is set",
                                          "create a new ResourceFlavor"))
        elif old_spec.get("topologyName") and old_spec.get("nodeLabels") != spec.get("nodeLabels"):
            verdict.errors.append(invalid("spec", _OMIT, "nodeLabels are immutable when topologyName is set",
                                          "create a new ResourceFlavor"))
    if topo and view is not None and view.topology(str(topo)) is None:
        verdict.warnings.append(f"spec.topologyName: Topology \"{topo}\" does not exist yet; ClusterQueues using this "
                                "flavor stay inactive (TopologyNotFound) until it is created")
    return verdict


def validate_cluster_queue(obj: Obj, view: ClusterView | None = None) -> Verdict:
    verdict = Verdict()
    spec = obj.get("spec") or {}
    cohort = spec.get("cohortName") or spec.get("cohort")
    cohort_field = "spec.cohortName" if "cohortName" in spec or obj.get("apiVersion", "").endswith("v1beta2") \
        else "spec.cohort"
    for g, group in enumerate(spec.get("resourceGroups") or ()):
        covered = [str(r) for r in group.get("coveredResources") or ()]
        gpath = f"spec.resourceGroups[{g}]"
        for f, flavor in enumerate(group.get("flavors") or ()):
            fpath = f"{gpath}.flavors[{f}]"
            names = [str(r.get("name")) for r in flavor.get("resources") or ()]
            if len(names) != len(covered) or sorted(names) != sorted(covered):
                verdict.errors.append(invalid(
                    gpath, _OMIT, "flavors must have the same number of resources as the coveredResources",
                    f"{fpath} (\"{flavor.get('name')}\") lists [{', '.join(names)}]; list exactly the covered "
                    f"resources [{', '.join(covered)}]"))
            for r, res in enumerate(flavor.get("resources") or ()):
                rpath = f"{fpath}.resources[{r}]"
                for limit in ("borrowingLimit", "lendingLimit"):
                    if res.get(limit) is not None and not cohort:
                        verdict.errors.append(invalid(
                            f"{rpath}.{limit}", res.get(limit), f"{limit} must be nil when cohort is empty",
                            f"set {cohort_field} or remove {limit}"))
            if view is not None and flavor.get("name") and view.flavor(str(flavor.get("name"))) is None:
                verdict.warnings.append(f"{fpath}.name: ResourceFlavor \"{flavor.get('name')}\" does not exist "
                                        "yet; the "
                                        "ClusterQueue stays inactive (FlavorNotFound) until it is created")
    return verdict


def validate_local_queue(obj: Obj, view: ClusterView | None = None, old: Obj | None = None) -> Verdict:
    verdict = Verdict()
    cq = (obj.get("spec") or {}).get("clusterQueue")
    if old is not None and (old.get("spec") or {}).get("clusterQueue") != cq:
        verdict.errors.append(invalid("spec.clusterQueue", cq, "field is immutable",
                                      "delete and recreate the LocalQueue"))
    if cq and view is not None and view.cluster_queue(str(cq)) is None:
        verdict.warnings.append(f"spec.clusterQueue: ClusterQueue \"{cq}\" does not exist yet; jobs sent to this "
                                "LocalQueue stay pending until it is created")
    return verdict


KIND_VALIDATORS = ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue")


def validate_kueue_object(kind: str, obj: Obj, old: Obj | None, view: ClusterView | None) -> Verdict:
    if kind == "Topology":
        return validate_topology(obj, old)
    if kind == "ResourceFlavor":
        return validate_resource_flavor(obj, view, old)
    if kind == "ClusterQueue":
        return validate_cluster_queue(obj, view)
    if kind == "LocalQueue":
        return validate_local_queue(obj, view, old)
    return Verdict()
