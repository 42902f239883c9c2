"""The ``tasgates`` conformance group's inputs: its Kueue Configuration is one toposched's loader
accepts (with the gates switched as the group says), and ``avoid_hosts`` job rows carry Kueue's
required node affinity. The live comparison is tests/conformance (group ``tasgates``)."""

from __future__ import annotations

import yaml

from scheduler.adapter.kueue_config import load_kueue_config_text
from scheduler.core.placement.types import PlacementGates
from scheduler.core.workload import workload_from_job
from tests.conformance.harness import job_object
from tests.conformance.record import GROUPS, load_group


def test_group_config_switches_the_placement_gates() -> None:
    spec = load_group("tasgates")
    assert "tasgates" in GROUPS
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **spec["kueue_config"]}
    loaded = load_kueue_config_text(yaml.safe_dump(doc))
    gates = PlacementGates.from_gates(loaded.config.feature_gates.enabled)
    assert gates == PlacementGates(profile_mixed=False, balanced=True, affinity_preferred=False)


def test_avoid_hosts_becomes_required_node_affinity() -> None:
    job = job_object({"name": "a", "pods": 2, "required": "layer-3", "avoid_hosts": ["n1", "n2"]})
    (pod_set,) = workload_from_job(job).pod_sets
    assert pod_set.affinity is not None
    host = "kubernetes.io/hostname"
    assert not pod_set.affinity.required_match({host: "n1"}, "n1")
    assert pod_set.affinity.required_match({host: "n3"}, "n3")
    assert "affinity" not in job_object({"name": "b"})["spec"]["template"]["spec"]
