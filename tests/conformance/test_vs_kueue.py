"""Conformance against the real Kueue v0.17.0: every scenario in scenarios/*.yaml runs once
through Kueue and once through toposched, each engine on its own fresh local control plane
(one per scenario group, cleanup between scenarios), and the outcomes are compared by the
scenario's mode (compare.py).

- ``TOPOSCHED_CONFORMANCE_KUEUE=recorded`` compares against results/kueue.yaml instead of
  running Kueue live (halves the run; refresh it with ``python -m tests.conformance.record
  --engine kueue``).
- ``TOPOSCHED_CONFORMANCE_GROUPS=placement,quota`` limits the groups.
- ``TOPOSCHED_CONFORMANCE_PARALLEL=N`` (default 2): how many engine runs (each a control
  plane of its own) go on at once. Runs are independent (own directory, own ports) and most of
  a run is waiting for the cluster to settle, so two at once take about half the wall time on
  two cores; 1 runs them one after the other.

Runtime on 2 cores: about 3 min per engine for all 31 scenarios, plus start-ups (8 min for
both engines measured under load average 5-7)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
import yaml

from tests.conformance.compare import compare
from tests.conformance.harness import ensure_kueue_prerequisites
from tests.conformance.record import GROUPS, RESULTS, load_group, run_group

pytestmark = pytest.mark.cluster

SELECTED = [g for g in (os.environ.get("TOPOSCHED_CONFORMANCE_GROUPS") or ",".join(GROUPS)).split(",") if g]
CASES = [(g, s["name"]) for g in SELECTED for s in load_group(g)["scenarios"]]
PARALLEL = max(1, int(os.environ.get("TOPOSCHED_CONFORMANCE_PARALLEL") or 2))
RECORDED_KUEUE = os.environ.get("TOPOSCHED_CONFORMANCE_KUEUE") == "recorded"
_runs: dict[tuple[str, str], Future[dict[str, Any]]] = {}
_pool: ThreadPoolExecutor | None = None


def _run(engine: str, group: str) -> dict[str, Any]:
    if engine == "kueue" and RECORDED_KUEUE:
        return dict(yaml.safe_load((RESULTS / "kueue.yaml").read_text())[group])
    return run_group(engine, group, log=lambda *_: None)


def _outcomes(engine: str, group: str) -> dict[str, Any]:
    """The group's outcomes under ``engine``; every (engine, group) run is queued in test order
    when the module starts, ``PARALLEL`` at a time, so the next group runs while this one's
    scenarios are compared."""
    return _runs[(engine, group)].result()


@pytest.fixture(scope="module", autouse=True)
def _schedule() -> Iterator[None]:
    global _pool
    ensure_kueue_prerequisites()  # built once, before the runs race for it
    _pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="conformance")
    for group in SELECTED:
        for engine in ("kueue", "toposched"):
            _runs[(engine, group)] = _pool.submit(_run, engine, group)
    yield
    for run in _runs.values():
        run.cancel()
    _pool.shutdown(wait=True)
    _runs.clear()


@pytest.mark.parametrize(("group", "name"), CASES, ids=[f"{g}/{n}" for g, n in CASES])
def test_scenario_matches_kueue(group: str, name: str) -> None:
    scenario = next(s for s in load_group(group)["scenarios"] if s["name"] == name)
    kueue = _outcomes("kueue", group)
    topo = _outcomes("toposched", group)
    assert "_error" not in kueue.get(name, {}), f"Kueue run failed: {kueue[name]['_error']}"
    assert "_error" not in topo.get(name, {}), f"toposched run failed: {topo[name]['_error']}"
    diffs = compare(scenario, kueue[name], topo[name], kueue["_node_labels"])
    assert not diffs, f"{group}/{name} ({scenario.get('mode', 'same')}):\n" + "\n".join(diffs)
