"""The pure parts the peer benchmarks share (scripts/bench/benchlib.py): engine order, ratios,
the confidence interval and stopping rule, /proc parsing, py-spy stack summaries."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from scripts.bench import benchlib


def test_order_alternates_forward_and_reverse() -> None:
    engines = ["kueue", "toposched"]
    assert [benchlib.balanced_order(engines, r) for r in range(4)] == [
        ["kueue", "toposched"], ["toposched", "kueue"], ["kueue", "toposched"], ["toposched", "kueue"]]
    three = ["A", "B", "C"]
    assert benchlib.balanced_order(three, 1) == ["C", "B", "A"]
    # over a pair of rounds every item has the same mean position
    positions = {x: sum(benchlib.balanced_order(three, r).index(x) for r in (0, 1)) for x in three}
    assert set(positions.values()) == {2}
    assert engines == ["kueue", "toposched"]  # not mutated


def test_rounds_are_whole_pairs() -> None:
    assert [benchlib.even_rounds(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 4, 4, 6]
    with pytest.raises(ValueError):
        benchlib.even_rounds(0)


def test_ratio_has_no_infinity() -> None:
    assert benchlib.ratio(3.0, 2.0) == 1.5
    assert math.isnan(benchlib.ratio(1.0, 0.0))
    assert math.isnan(benchlib.ratio(float("nan"), 1.0))


def test_interval_uses_student_t() -> None:
    interval = benchlib.mean_interval([1.0, 2.0, 3.0])
    # mean 2, stdev 1, t(2) = 4.303: half-width 4.303 / sqrt(3)
    assert interval.mean == pytest.approx(2.0)
    assert interval.half_width == pytest.approx(4.303 / math.sqrt(3))
    assert interval.samples == 3
    assert benchlib.mean_interval([5.0]).half_width == math.inf
    assert benchlib.mean_interval([]).samples == 0
    assert benchlib.mean_interval([1.0, float("nan"), 3.0]).samples == 2


def test_a_cost_is_resolved_when_narrow_or_clear_of_every_bound() -> None:
    narrow = benchlib.mean_interval([0.10, 0.11, 0.09, 0.10])
    assert benchlib.resolved(narrow, 0.05)
    wide_but_clear = benchlib.Interval(0.5, 0.2, 4)  # [0.3, 0.7]: above 0 and above the 20 % goal
    assert benchlib.resolved(wide_but_clear, 0.05, bounds=(0.0, 0.2))
    straddling = benchlib.Interval(0.1, 0.2, 4)  # [-0.1, 0.3]: says nothing about 0 or 20 %
    assert not benchlib.resolved(straddling, 0.05, bounds=(0.0, 0.2))
    assert not benchlib.resolved(benchlib.Interval(0.1, 0.0, 1), 0.05)  # one round is never enough


def test_proc_usage_is_read_after_the_command_name() -> None:
    # a command name with a space and a parenthesis must not shift the fields
    fields = ["S"] + ["0"] * 10 + [str(3 * benchlib.TICKS_PER_S), str(benchlib.TICKS_PER_S)] + ["0"] * 30
    stat = "123 (python3 (x) y) " + " ".join(fields)
    status = "Name:\tpython3\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"
    usage = benchlib.parse_proc_usage(stat, status)
    assert (usage.user_ms, usage.sys_ms, usage.cpu_ms) == (3000, 1000, 4000)
    assert (usage.rss_mib, usage.peak_rss_mib) == (100.0, 200.0)
    later = benchlib.ProcessUsage(5000, 1500, 120.0, 220.0)
    assert later.since(usage) == benchlib.ProcessUsage(2000, 500, 120.0, 220.0)
    assert (usage + later).cpu_ms == 10500


def test_process_usage_of_a_missing_pid_is_zero() -> None:
    assert benchlib.process_usage(2**22 + 12345) == benchlib.ProcessUsage()


def test_stack_summary_counts_each_function_once_per_stack() -> None:
    raw = [
        "main (cli.py:3);run (controller.py:10);admit (controller.py:40);run_cycle (cycle.py:5) 6\n",
        "main (cli.py:3);run (controller.py:10);admit (controller.py:41);write (writer.py:9) 3\n",
        "main (cli.py:3);recurse (a.py:1);recurse (a.py:2) 1\n",
        "garbage line\n",
    ]
    total, frames = benchlib.summarize_stacks(raw, top=10)
    assert total == 10
    shares = {f.frame: (f.inclusive, f.own) for f in frames}
    assert shares["main (cli.py)"] == (1.0, 0.0)
    assert shares["admit (controller.py)"] == (0.9, 0.0)
    assert shares["run_cycle (cycle.py)"] == (0.6, 0.6)
    assert shares["recurse (a.py)"] == (0.1, 0.1)  # a recursive frame is not counted twice
    assert frames[0].frame == "main (cli.py)"
    total, frames = benchlib.summarize_stacks(raw, within="admit")
    assert total == 9
    assert {f.frame: f.inclusive for f in frames}["write (writer.py)"] == pytest.approx(3 / 9)


def test_child_shares_split_a_phase_among_its_callees() -> None:
    raw = [
        "main (cli.py:3);reconcile (c.py:1);admit (c.py:2);run_cycle (cycle.py:5) 6\n",
        "main (cli.py:3);reconcile (c.py:1);ensure_workloads (c.py:9);create (w.py:1) 3\n",
        "main (cli.py:3);reconcile (c.py:1) 1\n",
        "main (cli.py:3);idle (x.py:1) 10\n",
    ]
    total, shares = benchlib.child_shares(raw, "reconcile")
    assert total == 10
    assert shares == [("admit (c.py)", 0.6), ("ensure_workloads (c.py)", 0.3), ("(self)", 0.1)]
    assert benchlib.child_shares(raw, "absent") == (0, [])


_PATCH_STATUS = 'group="kueue.x-k8s.io",resource="workloads",subresource="status",verb="PATCH"'
_WATCH_PODS = 'group="",resource="pods",subresource="",verb="WATCH"'
_MJOB = 'name="mjob.toposched.io",operation="CREATE",rejected="false",type="admit"'
APISERVER_METRICS = f"""# HELP apiserver_request_duration_seconds x
apiserver_request_duration_seconds_bucket{{{_PATCH_STATUS},le="0.005"}} 1
apiserver_request_duration_seconds_sum{{{_PATCH_STATUS}}} 3.5
apiserver_request_duration_seconds_count{{{_PATCH_STATUS}}} 70
apiserver_request_duration_seconds_sum{{{_WATCH_PODS}}} 900
apiserver_request_duration_seconds_count{{{_WATCH_PODS}}} 3
apiserver_admission_webhook_admission_duration_seconds_sum{{{_MJOB}}} 2
apiserver_admission_webhook_admission_duration_seconds_count{{{_MJOB}}} 100
"""


def test_served_requests_reads_the_api_servers_histograms_and_diffs_them() -> None:
    after = benchlib.served_requests(APISERVER_METRICS)
    assert after[("request", "PATCH", "workloads", "status")] == benchlib.ServedRequests(70, 3.5)
    assert after[("webhook", "mjob.toposched.io", "CREATE")].mean_ms == pytest.approx(20.0)
    assert not any(k[1] == "WATCH" for k in after)  # long-running watches are not latencies
    before = {("request", "PATCH", "workloads", "status"): benchlib.ServedRequests(20, 1.0)}
    since = benchlib.served_since(after, before)
    assert since[("request", "PATCH", "workloads", "status")] == benchlib.ServedRequests(50, 2.5)
    lines = benchlib.served_lines(since)
    assert lines[0].startswith("PATCH workloads status") and "50 x    50.0 ms" in lines[0]
    assert lines[-1].startswith("webhook mjob.toposched.io CREATE")


def test_an_engine_may_name_the_tree_its_code_comes_from(tmp_path: Path) -> None:
    assert benchlib.split_engine("toposched-writes32") == ("toposched-writes32", None)
    (tmp_path / "scheduler").mkdir()
    (tmp_path / "scheduler" / "cli.py").write_text("")
    assert benchlib.split_engine(f"toposched@{tmp_path}") == ("toposched", tmp_path.resolve())
    with pytest.raises(ValueError, match="no toposched tree"):
        benchlib.split_engine(f"toposched@{tmp_path / 'missing'}")
    before = os.environ.get("PYTHONPATH")
    with benchlib.code_from(tmp_path):
        assert os.environ["PYTHONPATH"] == str(tmp_path) and os.environ["PYTHONSAFEPATH"] == "1"
    assert os.environ.get("PYTHONPATH") == before and "PYTHONSAFEPATH" not in os.environ
