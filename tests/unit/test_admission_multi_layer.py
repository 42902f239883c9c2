"""The multi-layer constraints annotation at the webhook: Kueue's jobframework refuses it while
``TASMultiLayerTopology`` is off (Kueue v0.17's default; ``tas_validation.go``) and checks its
layers when on (v0.19's default)."""

from __future__ import annotations

import json

from scheduler.adapter.manifest.annotations import validate_topology_annotations
from scheduler.core.config import KUEUE_V017, KUEUE_V019, FeatureGates

SC = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
R = "kueue.x-k8s.io/podset-required-topology"
LAYERS = json.dumps([{"topology": "topology.k8s.aws/network-node-layer-3", "size": 4},
                     {"topology": "kubernetes.io/hostname", "size": 2}])
ANNOTATIONS = {R: "topology.k8s.aws/network-node-layer-2", SC: LAYERS}


def errors(gates: FeatureGates) -> list[str]:
    return [str(e) for e in validate_topology_annotations(ANNOTATIONS, 8, gates=gates)]


def test_refused_as_kueue_v017_refuses_it() -> None:
    (only,) = errors(FeatureGates(release=KUEUE_V017))
    assert only.startswith(f"spec.template.metadata.annotations[{SC}]: Forbidden: the TASMultiLayerTopology "
                           "feature gate must be enabled to use this annotation")
    assert "--kueue-version v0.19" in only  # the fix names the setting
    assert errors(FeatureGates()) == [only]  # nothing set: v0.17


def test_accepted_as_kueue_v019_accepts_it_or_with_the_gate() -> None:
    assert errors(FeatureGates(release=KUEUE_V019)) == []
    assert errors(FeatureGates({"TASMultiLayerTopology": True}, KUEUE_V017)) == []
    assert errors(FeatureGates({"TASMultiLayerTopology": False}, KUEUE_V019))
