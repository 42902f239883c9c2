"""docs/metrics.md and docs/kueue-versions.md say which Kueue metrics toposched emits under each
``--kueue-version``: checked against what the controller registers (issue 41, item 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from scheduler.core.config import KUEUE_V017, KUEUE_V019, kueue_defaults
from scheduler.http.probes import exposition
from scheduler.kube.metrics import ControllerMetrics

ROOT = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"`(kueue_[a-z_]+)`")


def registered(release: str) -> set[str]:
    registry = CollectorRegistry()
    ControllerMetrics(registry, config=kueue_defaults(release))
    return {f.name + ("_total" if f.type == "counter" else "")
            for f in text_string_to_metric_families(exposition(registry)().decode()) if f.name.startswith("kueue_")}


def section_rows(doc: str, heading: str) -> list[str]:
    """The table rows (first column) under ``heading``, up to the next heading."""
    text = doc.split(heading, 1)[1]
    text = text.split("\n## ", 1)[0]
    return [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]


def names(rows: list[str]) -> set[str]:
    return {name for row in rows for name in _NAME.findall(row)}


METRICS = (ROOT / "docs/metrics.md").read_text()
EMITTED = names(section_rows(METRICS, "## Kueue's metrics that toposched emits"))
V019_ONLY = names(section_rows(METRICS, "## Under `--kueue-version v0.19`"))
NOT_EMITTED = names(section_rows(METRICS, "## Kueue's metrics that toposched does not emit"))


@pytest.mark.parametrize("release", [KUEUE_V017, KUEUE_V019])
def test_metrics_md_lists_exactly_what_each_release_registers(release: str) -> None:
    said = EMITTED | (V019_ONLY if release == KUEUE_V019 else set())
    assert registered(release) == said


def test_metrics_md_names_nothing_as_missing_that_is_registered() -> None:
    assert NOT_EMITTED and V019_ONLY and EMITTED
    assert not NOT_EMITTED & (registered(KUEUE_V017) | registered(KUEUE_V019))


def test_the_versions_page_metric_row_matches_the_code() -> None:
    rows = [line for line in (ROOT / "docs/kueue-versions.md").read_text().splitlines()
            if line.startswith("| Metrics:")]
    assert len(rows) == 1
    row = rows[0]
    assert "not emitted" not in row.split("|")[4]  # the toposched column
    said = set(_NAME.findall(row.split("|")[1]))
    assert said and said <= registered(KUEUE_V019)
    assert said & registered(KUEUE_V017) == {"kueue_evicted_workloads_once_total"}  # the label differs there
