"""Every validation message of the webhook, as data tables (no cluster)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from admission.kueue_objects import (
    validate_cluster_queue,
    validate_local_queue,
    validate_resource_flavor,
    validate_topology,
)
from admission.validation import validate_job
from admission.view import ClusterView
from scheduler.adapter.manifest.annotations import validate_topology_annotations
from scheduler.core.config import FeatureGates

R = "kueue.x-k8s.io/podset-required-topology"
P = "kueue.x-k8s.io/podset-preferred-topology"
U = "kueue.x-k8s.io/podset-unconstrained-topology"
SR = "kueue.x-k8s.io/podset-slice-required-topology"
SS = "kueue.x-k8s.io/podset-slice-size"
SC = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
MULTI_LAYER = FeatureGates({"TASMultiLayerTopology": True})  # the constraints list needs it (Kueue v0.19's default)
G = "kueue.x-k8s.io/podset-group-name"
L1, L2, L3 = (f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3))
HOST = "kubernetes.io/hostname"
A = "spec.template.metadata.annotations"
THREE = ('["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
         '"kueue.x-k8s.io/podset-unconstrained-topology"]')

# (annotations, pod count, expected message fragments; [] = valid)
ANNOTATION_CASES: list[tuple[str, dict[str, str], int, list[str]]] = [
    ("required only", {R: L3}, 10, []),
    ("preferred only", {P: L3}, 10, []),
    ("unconstrained true", {U: "true"}, 10, []),
    ("unconstrained Go bool", {U: "F"}, 10, []),
    ("two topology annotations", {R: L3, P: L2}, 10,
     [f"{A}: Invalid value: must not contain more than one topology annotation: {THREE}",
      f"keep exactly one of {R}, {P}"]),
    ("three topology annotations", {R: L3, P: L2, U: "true"}, 10,
     ["must not contain more than one topology annotation"]),
    ("unconstrained not bool", {U: "yes"}, 10,
     [f'{A}[{U}]: Invalid value: "yes": must be a boolean value; use "true" or "false"']),
    ("bad level key", {R: "not a label"}, 10, [f'{A}[{R}]: Invalid value: "not a label": name part must consist']),
    ("slice ok", {R: L2, SR: L3, SS: "5"}, 10, []),
    ("slice size not numeric", {R: L2, SR: L3, SS: "five"}, 10,
     [f'{A}[{SS}]: Invalid value: "five": must be a numeric value']),
    ("slice size zero", {R: L2, SR: L3, SS: "0"}, 10,
     [f'{A}[{SS}]: Invalid value: "0": must be greater than or equal to 1']),
    ("slice size above count", {R: L2, SR: L3, SS: "12"}, 10,
     [f'{A}[{SS}]: Invalid value: "12": must not be greater than pod set count 10']),
    ("slice topology without size", {R: L2, SR: L3}, 10,
     [f"{A}[{SS}]: Required value: must be set when '{SR}' is specified"]),
    ("size without slice topology", {R: L2, SS: "2"}, 10,
     [f"{A}[{SS}]: Forbidden: may not be set when '{SR}' is not specified"]),
    ("group name numeric", {R: L3, G: "123"}, 2, [f'{A}[{G}]: Invalid value: "123": must not be a number']),
    ("group name without level", {G: "lws"}, 2,
     [f"{A}[{G}]: Forbidden: may not be set when neither '{P}' nor '{R}' is specified"]),
    ("group name with slice size", {R: L2, SR: L3, SS: "1", G: "lws"}, 2,
     [f"{A}[{G}]: Forbidden: may not be set when '{SS}' is specified",
      f"{A}[{G}]: Forbidden: may not be set when '{SR}' is specified"]),
    ("group of one pod set", {R: L3, G: "lws"}, 2,
     [f'{A}[{G}]: Invalid value: "lws": can only define groups of exactly 2 pod sets, got: 1 pod set(s)']),
    ("constraints ok", {R: L1, SC: f'[{{"topology": "{L2}", "size": 8}}, {{"topology": "{L3}", "size": 4}}]'}, 16, []),
    ("constraints bad JSON", {SC: "[{"}, 16, [f"{A}[{SC}]: Invalid value: \"[{{\": must be a valid JSON array: "]),
    ("constraints empty", {SC: "[]"}, 16, ["topology constraints must contain between 1 and 3 entries"]),
    ("constraints four", {SC: "[" + ",".join(f'{{"topology": "a/l{i}", "size": 1}}' for i in range(4)) + "]"}, 16,
     ["topology constraints must contain between 1 and 3 entries"]),
    ("constraints divisibility", {SC: f'[{{"topology": "{L2}", "size": 8}}, {{"topology": "{L3}", "size": 3}}]'}, 16,
     [f"{A}[{SC}][1].size: Invalid value: 3: must evenly divide the parent layer size 8"]),
    ("constraints duplicate", {SC: f'[{{"topology": "{L2}", "size": 8}}, {{"topology": "{L2}", "size": 4}}]'}, 16,
     [f'{A}[{SC}][1].topology: Duplicate value: "{L2} (also at index 0)"']),
    ("constraints size zero", {SC: f'[{{"topology": "{L2}", "size": 0}}]'}, 16,
     [f"{A}[{SC}][0].size: Invalid value: 0: must be greater than or equal to 1"]),
    ("constraints with slice annotations", {SC: f'[{{"topology": "{L2}", "size": 8}}]', SR: L2, SS: "8"}, 16,
     [f"{A}[{SC}]: Forbidden: may not be set when '{SR}' is specified",
      f"{A}[{SC}]: Forbidden: may not be set when '{SS}' is specified"]),
    ("constraints first size above count", {SC: f'[{{"topology": "{L2}", "size": 32}}]'}, 16,
     ["must not be greater than pod set count 16"]),
    ("unknown podset key (typo)", {"kueue.x-k8s.io/podset-requried-topology": L3}, 4,
     [f"{A}[kueue.x-k8s.io/podset-requried-topology]: unknown Kueue pod set annotation",
      f"did you mean {R}?", f"known keys: {R}, {P}, {U}, {SR}, {SS}, {SC}, {G}"]),
    ("other kueue annotations are fine", {"kueue.x-k8s.io/workload": "w", R: L3}, 4, []),
]


@pytest.mark.parametrize("name,annotations,count,expected", ANNOTATION_CASES, ids=[c[0] for c in ANNOTATION_CASES])
def test_annotation_messages(name: str, annotations: dict[str, str], count: int, expected: list[str]) -> None:
    text = "\n".join(str(e) for e in validate_topology_annotations(annotations, count, gates=MULTI_LAYER))
    if not expected:
        assert text == ""
    for fragment in expected:
        assert fragment in text, f"{fragment!r} not in {text!r}"


# ---- the job against a cluster -----------------------------------------------------------------
def node(name: str, l1: str, l2: str, l3: str, gpus: int = 8, ready: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {L1: l1, L2: l2, L3: l3, HOST: name,
                                                   "node.kubernetes.io/instance-type": "ml.p5.48xlarge"}},
            "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "nvidia.com/gpu": str(gpus), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def cluster(gpu_quota: int = 64, borrowing: int | None = None, cohort: str | None = None,
            other_gpu: int = 0) -> ClusterView:
    """8 nodes x 8 GPUs: layer-3 domains of 4 nodes (32 GPUs) each; quota as given."""
    nodes = {f"n{i}": node(f"n{i}", "b1", "s1", f"r{i // 4}") for i in range(8)}
    nodes["n7"] = node("n7", "b1", "s1", "r1", ready=False)
    res: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": gpu_quota}
    if borrowing is not None:
        res["borrowingLimit"] = borrowing
    cq: dict[str, Any] = {"metadata": {"name": "cq-a"}, "spec": {"namespaceSelector": {}, "resourceGroups": [
        {"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": "p5", "resources": [
            {"name": "cpu", "nominalQuota": 2000}, {"name": "memory", "nominalQuota": "100Ti"}, res]}]}]}}
    cqs = {"cq-a": cq}
    if cohort:
        cq["spec"]["cohortName"] = cohort
        other = copy.deepcopy(cq)
        other["metadata"]["name"] = "cq-b"
        other["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2] = {"name": "nvidia.com/gpu",
                                                                            "nominalQuota": other_gpu}
        cqs["cq-b"] = other
    return ClusterView(
        local_queues={"team-a/lq": {"metadata": {"name": "lq", "namespace": "team-a"},
                                    "spec": {"clusterQueue": "cq-a"}},
                      "team-a/plain": {"metadata": {"name": "plain", "namespace": "team-a"},
                                       "spec": {"clusterQueue": "cq-plain"}}},
        cluster_queues={**cqs, "cq-plain": {"metadata": {"name": "cq-plain"}, "spec": {"resourceGroups": [
            {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "plain", "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}},
        flavors={"p5": {"metadata": {"name": "p5"}, "spec": {"nodeLabels": {
            "node.kubernetes.io/instance-type": "ml.p5.48xlarge"}, "topologyName": "hyperpod-default"}},
                 "plain": {"metadata": {"name": "plain"}, "spec": {}}},
        topologies={"hyperpod-default": {"metadata": {"name": "hyperpod-default"},
                                         "spec": {"levels": [{"nodeLabel": lv} for lv in (L1, L2, L3, HOST)]}}},
        priority_classes={"high": {"metadata": {"name": "high"}, "value": 1000}},
        nodes=nodes,
    )


def job(pods: int = 4, gpus: int = 8, ann: dict[str, str] | None = None, queue: str = "lq",
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team-a",
                         "labels": {"kueue.x-k8s.io/queue-name": queue, **(labels or {})}},
            "spec": {"parallelism": pods, "completions": pods, "template": {
                "metadata": {"annotations": ann or {}},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                    "requests": {"nvidia.com/gpu": str(gpus), "cpu": "1"}}}]}}}}


LEVELS = f"{L1}, {L2}, {L3}, {HOST}"
# (name, job, view kwargs, denied fragments, warning fragments)
JOB_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str], list[str]]] = [
    ("fits", job(4, ann={R: L3}), {}, [], []),
    ("no topology request", job(4), {}, [], []),
    ("level not in topology", job(4, ann={R: "topology.k8s.aws/network-node-layer-9"}), {},
     [f'{A}[{R}]: level "topology.k8s.aws/network-node-layer-9" is not in Topology "hyperpod-default" '
      f"(levels: {LEVELS}); use one of those levels"], []),
    ("preferred level not in topology", job(4, ann={P: "rack"}), {},
     [f'{A}[{P}]: level "rack" is not in Topology "hyperpod-default"'], []),
    ("slice level not in topology", job(4, ann={R: L2, SR: "x/y", SS: "2"}), {},
     [f'{A}[{SR}]: level "x/y" is not in Topology'], []),
    ("slice level above pod set level", job(4, ann={R: L3, SR: L2, SS: "2"}), {},
     [f'{A}[{SR}]: slice level "{L2}" is above the pod set level "{L3}"'], []),
    ("local queue missing", job(4, queue="nope"), {},
     ['metadata.labels[kueue.x-k8s.io/queue-name]: LocalQueue "nope" does not exist in namespace "team-a"; '
      "create it", "or fix the label"], []),
    ("priority class missing", job(4, labels={"kueue.x-k8s.io/priority-class": "urgent"}), {},
     ['metadata.labels[kueue.x-k8s.io/priority-class]: WorkloadPriorityClass "urgent" not found'], []),
    ("priority class exists", job(4, labels={"kueue.x-k8s.io/priority-class": "high"}), {}, [], []),
    ("too big for any layer-3 domain", job(5, ann={R: L3}), {},
     [f"{A}[{R}]: the job (5 pod(s)) can never be admitted by ClusterQueue \"cq-a\"",
      f"5 pod(s) can never fit in one {L3} domain of Topology \"hyperpod-default\": the largest holds 4"], []),
    ("fits only with an unhealthy node", job(4, ann={R: L3}), {"unhealthy_rack0": True}, [],
     [f"4 pod(s) fit in one {L3} domain only if unhealthy nodes recover"]),
    ("fits at layer-2", job(8, ann={R: L2}), {}, [], ["only if unhealthy nodes recover"]),
    ("over quota, no cohort", job(9, ann={P: L2}), {},
     ['nvidia.com/gpu 72 > nominal 64'], []),
    ("only by borrowing", job(8, ann={P: L2}), {"gpu_quota": 32, "cohort": "all", "other_gpu": 64}, [],
     ['nvidia.com/gpu: 64 exceeds the nominal quota 32 of ClusterQueue "cq-a" flavor "p5" and fits only by '
      'borrowing from cohort "all"']),
    ("borrowing limit too low", job(8, ann={P: L2}), {"gpu_quota": 32, "cohort": "all", "other_gpu": 64,
                                                      "borrowing": 16},
     ["nvidia.com/gpu 64 > nominal 32 + borrowable 16"], []),
    ("uncovered resource", job(1) | {}, {"extra_resource": True},
     ["resource(s) example.com/fpga unavailable in ClusterQueue \"cq-a\""], []),
    ("TAS request on a non-TAS queue", job(1, ann={R: L3}, queue="plain"), {},
     [f'{A}[{R}]: ClusterQueue "cq-plain" (LocalQueue "plain") has no topology-aware ResourceFlavor'], []),
    ("slice fits", job(8, ann={R: L2, SR: L3, SS: "4"}), {}, [], ["only if unhealthy nodes recover"]),
    ("slices never fit", job(8, ann={R: L2, SR: L3, SS: "8"}), {},
     [f"1 slice(s) of 8 pod(s), each inside one {L3} domain, can never fit"], []),
    ("slice size does not divide", job(6, ann={R: L2, SR: L3, SS: "4"}), {}, [],
     ["4 does not divide the pod count 6"]),
    ("malformed annotations skip cluster checks", job(4, ann={R: L3, P: L2}, queue="nope"), {},
     ["must not contain more than one topology annotation"], []),
]


def _view(opts: dict[str, Any]) -> ClusterView:
    view = cluster(**{k: v for k, v in opts.items() if k in ("gpu_quota", "borrowing", "cohort", "other_gpu")})
    if opts.get("unhealthy_rack0"):
        view.nodes["n0"] = node("n0", "b1", "s1", "r0", ready=False)  # type: ignore[index]
        view.nodes["n7"] = node("n7", "b1", "s1", "r1", ready=False)  # type: ignore[index]
    return view


@pytest.mark.parametrize("name,obj,opts,denied,warned", JOB_CASES, ids=[c[0] for c in JOB_CASES])
def test_job_against_cluster(name: str, obj: dict[str, Any], opts: dict[str, Any], denied: list[str],
                             warned: list[str]) -> None:
    if opts.get("extra_resource"):
        obj = copy.deepcopy(obj)
        obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["example.com/fpga"] = "1"
    verdict = validate_job(obj, _view(opts))
    message = verdict.message()
    assert verdict.allowed == (not denied), message
    for fragment in denied:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    warnings = "\n".join(verdict.warnings)
    for fragment in warned:
        assert fragment in warnings, f"{fragment!r} not in {warnings!r}"
    if not warned:
        assert not verdict.warnings, warnings


@pytest.mark.parametrize("obj, wider", [
    (job(5, ann={R: L3}), True),  # the layer-3 domain is what stops it: a wider level helps
    (job(9, ann={P: L2}), False),  # over quota: no level helps
    (job(9), False),  # no topology request at all
], ids=["topology-bound", "quota-bound preferred", "quota-bound without topology"])
def test_quota_denial_suggests_a_wider_level_only_when_the_topology_stops_the_job(obj: dict[str, Any],
                                                                                   wider: bool) -> None:
    message = validate_job(obj, cluster()).message()
    assert "can never be admitted by ClusterQueue" in message and "use another queue" in message, message
    assert ("choose a wider topology level" in message) == wider, message


def test_no_nodes_is_a_warning_not_a_denial() -> None:
    view = cluster()
    view.nodes = {}
    verdict = validate_job(job(4, ann={R: L3}), view)
    assert verdict.allowed
    assert "no node carries the labels of ResourceFlavor \"p5\"" in verdict.warnings[0]


def test_update_checks_only_changed_annotations() -> None:
    view = cluster()
    old = job(4, ann={R: L3}, queue="gone")
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    assert validate_job(new, view, old=old).allowed  # the controller unsuspends: never blocked
    new["spec"]["template"]["metadata"]["annotations"] = {R: L3, P: L2}
    assert "must not contain more than one" in validate_job(new, view, old=old).message()


def test_live_lookup_on_cache_miss() -> None:
    seen = []

    def lookup(kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        seen.append((kind, name, namespace))
        return {"metadata": {"name": name}, "spec": {"clusterQueue": "cq-a"}} if kind == "LocalQueue" else None

    view = cluster()
    view.lookup = lookup
    assert validate_job(job(4, ann={R: L3}, queue="fresh"), view).allowed
    assert ("LocalQueue", "fresh", "team-a") in seen


# ---- Kueue objects -------------------------------------------------------------------------------
def topo(*levels: str) -> dict[str, Any]:
    return {"metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": lv} for lv in levels]}}


TOPOLOGY_CASES = [
    ("ok", topo(L1, L2, L3, HOST), None, []),
    ("unique", topo(L1, L1, HOST), None, ["spec.levels: Invalid value: must be unique; remove the repeated level(s) "
                                          f"{L1}"]),
    ("hostname last", topo(HOST, L1), None,
     ["spec.levels: Invalid value: the kubernetes.io/hostname label can only be used at the lowest level of "
      f"topology; move {HOST} to the end of spec.levels"]),
    ("empty", topo(), None, ["spec.levels: Required value: at least one level is required"]),
    ("bad key", topo("a b"), None, ['spec.levels[0].nodeLabel: Invalid value: "a b"']),
    ("immutable", topo(L1, L2), topo(L1, L3), ["spec.levels: Invalid value: field is immutable"]),
    ("hostname lowest may change above", topo(L1, HOST), topo(L2, HOST), []),
]


@pytest.mark.parametrize("name,obj,old,expected", TOPOLOGY_CASES, ids=[c[0] for c in TOPOLOGY_CASES])
def test_topology(name: str, obj: dict[str, Any], old: dict[str, Any] | None, expected: list[str]) -> None:
    verdict = validate_topology(obj, old)
    assert verdict.allowed == (not expected)
    for fragment in expected:
        assert fragment in verdict.message()


def rf(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "f"}, "spec": spec}


FLAVOR_CASES = [
    ("plain", rf({}), None, [], []),
    ("tas ok", rf({"topologyName": "hyperpod-default", "nodeLabels": {"a": "b"}}), None, [], []),
    ("tas without node labels", rf({"topologyName": "hyperpod-default"}), None,
     ["spec: Invalid value: at least one nodeLabel is required when topology is set; add spec.nodeLabels"], []),
    ("topology missing", rf({"topologyName": "nope", "nodeLabels": {"a": "b"}}), None, [],
     ['spec.topologyName: Topology "nope" does not exist yet']),
    ("topologyName immutable", rf({"topologyName": "hyperpod-default", "nodeLabels": {"a": "b"}}),
     rf({"topologyName": "other", "nodeLabels": {"a": "b"}}), ["topologyName is immutable when topologyName is set"],
     []),
]


@pytest.mark.parametrize("name,obj,old,expected,warned", FLAVOR_CASES, ids=[c[0] for c in FLAVOR_CASES])
def test_resource_flavor(name: str, obj: dict[str, Any], old: dict[str, Any] | None, expected: list[str],
                         warned: list[str]) -> None:
    verdict = validate_resource_flavor(obj, cluster(), old)
    assert verdict.allowed == (not expected), verdict.message()
    for fragment in expected:
        assert fragment in verdict.message()
    for fragment in warned:
        assert fragment in "\n".join(verdict.warnings)


def cq(resources: list[dict[str, Any]], covered: list[str], cohort: str | None = None,
       flavor: str = "p5") -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": covered, "flavors": [
        {"name": flavor, "resources": resources}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "metadata": {"name": "q"}, "spec": spec}


CQ_CASES = [
    ("ok", cq([{"name": "nvidia.com/gpu", "nominalQuota": 8}], ["nvidia.com/gpu"]), [], []),
    ("flavor misses a covered resource", cq([{"name": "cpu", "nominalQuota": 8}], ["cpu", "memory"]),
     ["spec.resourceGroups[0]: Invalid value: flavors must have the same number of resources as the "
      "coveredResources; spec.resourceGroups[0].flavors[0] (\"p5\") lists [cpu]; list exactly the covered "
      "resources [cpu, memory]"], []),
    ("flavor lists another resource", cq([{"name": "cpu", "nominalQuota": 8}], ["memory"]),
     ["flavors must have the same number of resources as the coveredResources"], []),
    ("borrowing without cohort", cq([{"name": "cpu", "nominalQuota": 8, "borrowingLimit": 2}], ["cpu"]),
     ["spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Invalid value: 2: borrowingLimit must be "
      "nil when cohort is empty; set spec.cohortName or remove borrowingLimit"], []),
    ("lending without cohort", cq([{"name": "cpu", "nominalQuota": 8, "lendingLimit": 2}], ["cpu"]),
     ["lendingLimit must be nil when cohort is empty"], []),
    ("borrowing with cohort", cq([{"name": "cpu", "nominalQuota": 8, "borrowingLimit": 2}], ["cpu"], "c"), [], []),
    ("missing flavor warns", cq([{"name": "cpu", "nominalQuota": 8}], ["cpu"], flavor="nope"), [],
     ['spec.resourceGroups[0].flavors[0].name: ResourceFlavor "nope" does not exist yet']),
]


@pytest.mark.parametrize("name,obj,expected,warned", CQ_CASES, ids=[c[0] for c in CQ_CASES])
def test_cluster_queue(name: str, obj: dict[str, Any], expected: list[str], warned: list[str]) -> None:
    verdict = validate_cluster_queue(obj, cluster())
    assert verdict.allowed == (not expected), verdict.message()
    for fragment in expected:
        assert fragment in verdict.message()
    for fragment in warned:
        assert fragment in "\n".join(verdict.warnings)


def test_local_queue() -> None:
    lq = {"metadata": {"name": "x", "namespace": "n"}, "spec": {"clusterQueue": "nope"}}
    verdict = validate_local_queue(lq, cluster())
    assert verdict.allowed and 'ClusterQueue "nope" does not exist yet' in verdict.warnings[0]
    moved = copy.deepcopy(lq)
    moved["spec"]["clusterQueue"] = "cq-a"
    assert "spec.clusterQueue: Invalid value: \"cq-a\": field is immutable" in validate_local_queue(
        moved, cluster(), lq).message()


# ---- bounded reading (scheduler.core.topology_request limits) ----------------------------------
def test_oversized_deep_or_non_text_annotations_are_denied_naming_the_annotation() -> None:
    too_long = validate_topology_annotations({R: "x" * 5000}, 4)
    assert [str(e) for e in too_long] == [f"{A}[{R}]: Invalid value: must be at most 4096 characters long, got 5000; "
                                          "shorten it or fix its type"]
    deep = "\n".join(str(e) for e in validate_topology_annotations({SC: "[" * 2000}, 4, gates=MULTI_LAYER))
    assert f"{A}[{SC}]: Invalid value: " in deep and "must not nest JSON more than 8 levels deep" in deep
    not_text = "\n".join(str(e) for e in validate_topology_annotations({SS: ["4"], SR: L3}, 4))  # type: ignore[dict-item]
    assert f"{A}[{SS}]: Invalid value: must be a string, got list" in not_text
