"""Conformance against the real Kueue v0.17.0: every scenario in scenarios/*.yaml runs once
through Kueue and once through toposched, each engine on its own fresh local control plane
(one per scenario group, cleanup between scenarios), and the outcomes are compared by the
scenario's mode (compare.py).

- ``TOPOSCHED_CONFORMANCE_KUEUE=recorded`` compares against results/kueue.yaml instead of
  running Kueue live (halves the run; refresh it with ``python -m tests.conformance.record
  --engine kueue``).
- ``TOPOSCHED_CONFORMANCE_GROUPS=placement,quota`` limits the groups.

Runtime on 2 cores: about 3 min per engine for all 31 scenarios, plus start-ups (8 min for
both engines measured under load average 5-7)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.conformance.compare import compare
from tests.conformance.record import GROUPS, RESULTS, load_group, run_group

pytestmark = pytest.mark.cluster

SELECTED = [g for g in (os.environ.get("TOPOSCHED_CONFORMANCE_GROUPS") or ",".join(GROUPS)).split(",") if g]
CASES = [(g, s["name"]) for g in SELECTED for s in load_group(g)["scenarios"]]
_cache: dict[tuple[str, str], dict[str, Any]] = {}


def _outcomes(engine: str, group: str) -> dict[str, Any]:
    key = (engine, group)
    if key not in _cache:
        if engine == "kueue" and os.environ.get("TOPOSCHED_CONFORMANCE_KUEUE") == "recorded":
            _cache[key] = yaml.safe_load((RESULTS / "kueue.yaml").read_text())[group]
        else:
            _cache[key] = run_group(engine, group, log=lambda *_: None)
    return _cache[key]


@pytest.fixture(scope="module", autouse=True)
def _release() -> Iterator[None]:
    yield
    _cache.clear()


@pytest.mark.parametrize(("group", "name"), CASES, ids=[f"{g}/{n}" for g, n in CASES])
def test_scenario_matches_kueue(group: str, name: str) -> None:
    scenario = next(s for s in load_group(group)["scenarios"] if s["name"] == name)
    kueue = _outcomes("kueue", group)
    topo = _outcomes("toposched", group)
    assert "_error" not in kueue.get(name, {}), f"Kueue run failed: {kueue[name]['_error']}"
    assert "_error" not in topo.get(name, {}), f"toposched run failed: {topo[name]['_error']}"
    diffs = compare(scenario, kueue[name], topo[name], kueue["_node_labels"])
    assert not diffs, f"{group}/{name} ({scenario.get('mode', 'same')}):\n" + "\n".join(diffs)
