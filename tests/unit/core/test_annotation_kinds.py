"""Every pod-template annotation kind, from a batch/v1 Job through to a placement."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.core.placement.planner import place_workload
from scheduler.core.workload import workload_from_job
from tests.unit.core._helpers import BLOCK, HOST, MULTI_LAYER, RACK, node, per_node, tree_of

# r1: n1=3, n2=3 ; r2: n3=2, n4=1   (cpu cores = pods that fit)
CLUSTER = [
    node("n1", rack="r1", cpu=3),
    node("n2", rack="r1", cpu=3),
    node("n3", rack="r2", cpu=2),
    node("n4", rack="r2", cpu=1),
]


def job(parallelism: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {
            "parallelism": parallelism,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
    }


A = "kueue.x-k8s.io/"
TABLE = [
    ("required-rack", 3, {A + "podset-required-topology": RACK}, {"n3": 2, "n4": 1}),
    (
        "required-rack-too-big",
        7,
        {A + "podset-required-topology": RACK},
        'topology "default" allows to fit only 6 out of 7 pod(s)',
    ),
    ("required-host", 3, {A + "podset-required-topology": HOST}, {"n1": 3}),
    ("preferred-rack-climbs", 7, {A + "podset-preferred-topology": RACK}, {"n1": 3, "n2": 3, "n4": 1}),
    ("preferred-block", 2, {A + "podset-preferred-topology": BLOCK}, {"n3": 2}),
    ("unconstrained-true", 4, {A + "podset-unconstrained-topology": "true"}, {"n4": 1, "n3": 2, "n1": 1}),
    (
        "unconstrained-false",
        1,
        {A + "podset-unconstrained-topology": "false"},
        "topology level not specified",
    ),
    (
        "slice-required",
        4,
        {A + "podset-slice-required-topology": HOST, A + "podset-slice-size": "2"},
        {"n3": 2, "n1": 2},
    ),
    (
        "slice-with-required",
        4,
        {
            A + "podset-required-topology": RACK,
            A + "podset-slice-required-topology": HOST,
            A + "podset-slice-size": "2",
        },
        {"n1": 2, "n2": 2},
    ),
    (
        "slice-constraints-json",
        4,
        {
            A + "podset-required-topology": BLOCK,
            A + "podset-slice-required-topology-constraints": json.dumps(
                [{"topology": RACK, "size": 4}, {"topology": HOST, "size": 2}]
            ),
        },
        {"n1": 2, "n2": 2},
    ),
    (
        "group-name-ignored-for-single-podset",
        2,
        {A + "podset-required-topology": RACK, A + "podset-group-name": "g"},
        {"n3": 2},
    ),
    ("no-annotation-implied", 3, {}, {"n1": 3}),
    (
        "required-wins-over-preferred",
        3,
        {A + "podset-required-topology": HOST, A + "podset-preferred-topology": BLOCK},
        {"n1": 3},
    ),
    (
        "unknown-level",
        1,
        {A + "podset-required-topology": "example.com/zone"},
        "no requested topology level: example.com/zone",
    ),
]


@pytest.mark.parametrize("name, count, annotations, want", TABLE, ids=[t[0] for t in TABLE])
def test_annotation_kind(
    name: str, count: int, annotations: dict[str, str], want: dict[str, int] | str
) -> None:
    workload = workload_from_job(job(count, annotations))
    tree = tree_of(CLUSTER)
    placement = place_workload(tree, workload.pod_sets, solver="greedy", implied_tas=True, gates=MULTI_LAYER)
    if isinstance(want, str):
        assert placement.reason == want
    else:
        assert per_node(placement) == want
