"""The simulate report as a person reads it: time-axis labels where their ticks are, in one unit
chosen for the span; a header in words (no Python dicts); durations, not raw seconds. The page
is also rendered in headless Chromium (when installed) and checked to be a real page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.sim.report import ML, MR, TIME_UNITS, W, duration, time_ticks
from tests.unit.test_visualize_screenshot import CHROMIUM, decode_png_rows

ROOT = Path(__file__).resolve().parents[2]
UNIT_SECONDS = dict(TIME_UNITS)
TICK_LINE = re.compile(r'<line class="xtick" x1="([0-9.]+)"')
TICK_TEXT = re.compile(r'<text class="xtick" x="([0-9.]+)"[^>]*>([^<]*)</text>')
UNIT_TEXT = re.compile(r'<text class="xunit"[^>]*>simulated time \((\w+)\)</text>')


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, float]]:
    out = tmp_path_factory.mktemp("sim") / "out"
    code = main(["simulate", "--cluster", str(ROOT / "examples/clusters/hyperpod-64.yaml"),
                 "--queues", str(ROOT / "examples/kueue/hyperpod-queues.yaml"),
                 "--trace", str(ROOT / "examples/traces/hyperpod-64-demo.yaml"), "--out", str(out)])
    assert code == 0
    import json

    summary = json.loads((out / "summary.json").read_text())
    return out, (out / "report.html").read_text(), summary["variants"]["greedy"]


def plots_over_time(html: str) -> list[str]:
    return [svg for svg in re.findall(r"<svg.*?</svg>", html, re.S) if "xunit" in svg]


@pytest.mark.parametrize("span_s, unit, labels", [
    (23_400, "hours", ["0", "1", "2", "3", "4", "5", "6"]),  # the demo: 6.5 h (it said 0s 78m 3h 4h 5h 6h)
    (90, "seconds", ["0", "20", "40", "60", "80"]),
    (4_000, "minutes", ["0", "10", "20", "30", "40", "50", "60"]),
    (3 * 86_400, "days", ["0", "0.5", "1", "1.5", "2", "2.5", "3"]),
    (119, "seconds", ["0", "20", "40", "60", "80", "100"]),
])
def test_time_ticks_are_round_values_of_one_unit(span_s: float, unit: str, labels: list[str]) -> None:
    got_unit, ticks = time_ticks(span_s)
    assert got_unit == unit and [label for _, label in ticks] == labels
    for seconds, label in ticks:
        assert seconds == pytest.approx(float(label) * UNIT_SECONDS[unit]) and seconds <= span_s


def test_every_time_label_sits_on_its_tick(report: tuple[Path, str, dict[str, float]]) -> None:
    """In each plot over simulated time: one unit named on the axis, a tick mark under every
    label, and the label's value (in that unit) at the x where the scale puts that time."""
    _, html, summary = report
    plots = plots_over_time(html)
    assert len(plots) >= 2
    span = summary["makespan_s"]
    for svg in plots:
        (unit,) = UNIT_TEXT.findall(svg)
        lines = [float(x) for x in TICK_LINE.findall(svg)]
        texts = [(float(x), label) for x, label in TICK_TEXT.findall(svg)]
        assert len(texts) >= 3 and [x for x, _ in texts] == lines, svg[:400]
        values = [float(label) for _, label in texts]
        steps = {round(b - a, 9) for a, b in zip(values, values[1:], strict=False)}
        assert values[0] == 0 and len(steps) == 1, values  # evenly spaced round values
        for x, label in texts:
            expected = ML + (W - ML - MR) * float(label) * UNIT_SECONDS[unit] / span
            assert x == pytest.approx(expected, abs=0.06), (label, unit, x, expected)


def test_header_and_events_read_as_words(report: tuple[Path, str, dict[str, float]]) -> None:
    _, html, _ = report
    header = re.search(r'<div class="meta">(.*?)</div>', html, re.S)
    assert header is not None
    text = header.group(1)
    assert "{" not in text and "&#x27;" not in text and "_s:" not in text, text
    assert "(64 nodes)" in text and "(7 jobs)" in text and "solver greedy" in text, text
    assert "NodeFailures requeue backoff 1 min, doubling up to 1 h" in text, text
    assert "hold when over 55% of the nodes failed within 2 min (at least 3 nodes)" in text, text
    events = html.split("Preemptions, failures and recoveries", 1)[1]
    times = re.findall(r"<tr><td>([^<]*)</td><td>(?:preemption|failure|eviction|recovery)", events)
    assert times and all(re.fullmatch(r"\d+ (s|min|h)( \d+ (s|min))?", t) for t in times), times
    assert "40 min" in times and not any(t.endswith("00 s") for t in times), times


@pytest.mark.parametrize("seconds, words", [(0, "0 s"), (0.4, "0.4 s"), (45, "45 s"), (60, "1 min"),
                                            (750, "12 min 30 s"), (2400, "40 min"), (4800, "1 h 20 min"),
                                            (23_400, "6 h 30 min"), (183_600, "2 d 3 h")])
def test_durations(seconds: float, words: str) -> None:
    assert duration(seconds) == words


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_report_renders_in_chromium(report: tuple[Path, str, dict[str, float]], tmp_path: Path) -> None:
    out, _, _ = report
    png, profile = tmp_path / "report.png", tmp_path / "profile"
    profile.mkdir()
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1200,1600",
           (out / "report.html").as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "HOME": str(tmp_path)})
    assert png.exists(), f"no screenshot (exit {proc.returncode}): {proc.stderr[-800:]}"
    keep = os.environ.get("TOPOSCHED_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / "simulate-report.png")
    width, height, rows, bpp = decode_png_rows(png.read_bytes(), 1600)
    assert (width, height) == (1200, 1600)
    inked = sum(1 for row in rows if any(row[i] < 160 for i in range(0, len(row), bpp)))
    assert inked > 200, f"only {inked} rows with dark pixels: not a rendered report"
