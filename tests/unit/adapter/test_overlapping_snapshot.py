"""The controller's snapshot applies TASHandleOverlappingFlavors (beta on in Kueue v0.18+, so on
under ``--kueue-version v0.19``; the core rule and Kueue's cases: tests/unit/core/
test_overlapping_flavors.py)."""

from __future__ import annotations

import dataclasses

from scheduler.adapter.snapshot import build_snapshot
from scheduler.core.config import KUEUE_V017, KUEUE_V019, kueue_defaults
from tests.unit.adapter.test_snapshot import FLAVOR, NOW, OBJECTS


def test_the_controllers_snapshot_books_a_shared_node_once_under_v019() -> None:
    # a second TAS flavor over the same GPU nodes sees the first flavor's admitted pods on n0
    twin = {"metadata": {"name": "p5-twin"}, "spec": FLAVOR["spec"]}
    objects = dataclasses.replace(OBJECTS, flavors=[*OBJECTS.flavors, twin])
    for release, want in ((KUEUE_V017, 8), (KUEUE_V019, 0)):
        trees = build_snapshot(objects, NOW, solver="greedy", config=kueue_defaults(release)).trees
        leaf = trees["p5-twin"].leaf_of_node("n0")
        assert leaf is not None and trees["p5-twin"].free_of_leaf(leaf)["nvidia.com/gpu"] == want, release
        own = trees["p5"].leaf_of_node("n0")
        assert own is not None and trees["p5"].free_of_leaf(own)["nvidia.com/gpu"] == 0
