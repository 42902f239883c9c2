"""The simulation report: one self-contained HTML page with inline SVG plots (no scripts, no
links, no fonts: it opens offline). Styles come from ``scheduler.topoview``."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from scheduler.sim.model import SimResult
from scheduler.sim.runtime import RunTimeModel
from scheduler.topoview.html import CSS
from scheduler.topoview.svg import GPU_USED, SANS

PALETTE = ("#1e5fbf", "#e07b00", "#2e7d32", "#8e24aa", "#c62828", "#00838f")
W, H, ML, MR, MT, MB = 720, 220, 56, 16, 14, 34
EXTRA_CSS = """
table.cmp { border-collapse: collapse; margin: 6px 0 14px 0; font-size: 13px; }
table.cmp th, table.cmp td { border: 1px solid #c9d3dd; padding: 3px 8px; text-align: right; }
table.cmp th:first-child, table.cmp td:first-child { text-align: left; }
h2 { font-size: 16px; margin: 18px 0 4px 0; } .plots { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; } figcaption { font-size: 12px; color: #5a6b7c; }
"""


# Units of the time axis: the largest one the span holds at least twice, so a 6.5 h run is
# labelled 0, 1, 2, ... 6 in hours and a 90 s one 0, 20, 40, 60, 80 in seconds.
TIME_UNITS = (("days", 86_400.0), ("hours", 3_600.0), ("minutes", 60.0), ("seconds", 1.0))


def nice_step(span: float, most: int = 8) -> float:
    """The smallest of 1, 2, 5 x 10^k that cuts ``span`` into at most ``most`` steps."""
    if span <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(span / most))
    for factor in (1.0, 2.0, 5.0, 10.0):
        if span / (factor * magnitude) <= most:
            return factor * magnitude
    return 10.0 * magnitude


def time_ticks(span_s: float) -> tuple[str, list[tuple[float, str]]]:
    """(unit name, [(seconds, label)]) for a time axis from 0 to ``span_s``: ticks at round
    multiples of one unit chosen for the span, each label the tick's own value in that unit."""
    name, size = next(((n, u) for n, u in TIME_UNITS if span_s >= 2 * u), TIME_UNITS[-1])
    step = nice_step(span_s / size)
    count = int(math.floor(span_s / size / step + 1e-9))
    return name, [(k * step * size, f"{k * step:g}") for k in range(count + 1)]


def value_ticks(y_max: float, integer: bool = False) -> list[float]:
    """Round values from 0 to at least ``y_max`` (whole numbers when ``integer``: counts)."""
    step = max(nice_step(y_max, 4), 1.0) if integer else nice_step(y_max, 4)
    count = max(int(math.ceil(y_max / step - 1e-9)), 1)
    return [k * step for k in range(count + 1)]


def duration(seconds: float) -> str:
    """A duration as a person reads it: ``45 s``, ``12 min 30 s``, ``1 h 20 min``, ``2 d 3 h``."""
    s = int(round(seconds))
    if s < 60:
        return f"{seconds:.0f} s" if seconds >= 1 or seconds == 0 else f"{seconds:.1f} s"
    for big, big_name, small, small_name in ((86_400, "d", 3_600, "h"), (3_600, "h", 60, "min"),
                                             (60, "min", 1, "s")):
        if s >= big:
            whole, rest = divmod(s, big)
            part = rest // small
            return f"{whole} {big_name} {part} {small_name}" if part else f"{whole} {big_name}"
    return f"{s} s"  # unreachable: s >= 60 is handled above


def _frame(title: str, x_max: float, y_max: float, y_fmt: Any = None, integer: bool = False) -> tuple[list[str], float]:
    """The axes of a plot over simulated time; returns (SVG parts, the y value at the top)."""
    unit, x_ticks = time_ticks(x_max)
    y_values = value_ticks(y_max, integer)
    top = y_values[-1]
    out = [f'<svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" font-family="{escape(SANS)}" '
           f'font-size="11"><title>{escape(title)}</title>',
           f'<rect x="{ML}" y="{MT}" width="{W - ML - MR}" height="{H - MT - MB}" fill="#fbfcfe" stroke="#c9d3dd"/>']
    for v in y_values:
        y = MT + (H - MT - MB) * (1 - v / top)
        out.append(f'<line x1="{ML}" y1="{y:.1f}" x2="{W - MR}" y2="{y:.1f}" stroke="#e3e8ee"/>')
        out.append(f'<text x="{ML - 4}" y="{y + 4:.1f}" text-anchor="end">{escape(y_fmt(v) if y_fmt else f"{v:g}")}'
                   "</text>")
    for t, label in x_ticks:
        x = ML + (W - ML - MR) * t / x_max
        out.append(f'<line class="xtick" x1="{x:.1f}" y1="{H - MB}" x2="{x:.1f}" y2="{H - MB + 4}" stroke="#8796a8"/>')
        out.append(f'<text class="xtick" x="{x:.1f}" y="{H - MB + 15}" text-anchor="middle">{escape(label)}</text>')
    out.append(f'<text class="xunit" x="{(ML + W - MR) / 2}" y="{H - 3}" text-anchor="middle" fill="#5a6b7c">'
               f"simulated time ({unit})</text>")
    return out, top


def utilisation_svg(result: SimResult) -> str:
    x_max = max(result.makespan, 1.0)
    out, _ = _frame("GPU utilisation over time", x_max, 100.0, lambda v: f"{v:.0f}%")

    def sx(t: float) -> float:
        return ML + (W - ML - MR) * t / x_max

    def sy(frac: float) -> float:
        return MT + (H - MT - MB) * (1 - frac)

    pts = []
    prev = None
    for t, used, healthy, _p in result.samples:
        frac = used / healthy if healthy else 0.0
        if prev is not None:
            pts.append(f"{sx(t):.1f},{sy(prev):.1f}")
        pts.append(f"{sx(t):.1f},{sy(frac):.1f}")
        prev = frac
    if pts:
        out.append(f'<polyline fill="none" stroke="{GPU_USED}" stroke-width="1.5" points="{" ".join(pts)}"/>')
    # preemptions/evictions first, node failures/recoveries on top (they often share an instant)
    order = {"preemption": 0, "eviction": 1, "recovery": 2, "failure": 3}
    colours = {"failure": "#c62828", "recovery": "#2e7d32", "preemption": "#e07b00", "eviction": "#8e24aa"}
    for e in sorted((e for e in result.events if e["kind"] in order), key=lambda e: (order[e["kind"]], e["t"])):
        colour = colours[e["kind"]]
        x = sx(e["t"])
        label = escape(f'{e["kind"]} {e.get("node") or e.get("workload", "")} at {duration(e["t"])}')
        node_event = e["kind"] in ("failure", "recovery")
        out.append(f'<line x1="{x:.1f}" y1="{MT}" x2="{x:.1f}" y2="{H - MB}" stroke="{colour}" '
                   f'stroke-width="{2 if node_event else 1}" stroke-dasharray="{"6,3" if node_event else "2,3"}">'
                   f"<title>{label}</title></line>")
        if node_event:
            out.append(f'<path d="M{x - 5:.1f},{MT} L{x + 5:.1f},{MT} L{x:.1f},{MT + 8}" fill="{colour}">'
                       f"<title>{label}</title></path>")
    out.append("</svg>")
    return "".join(out)


def bars_svg(title: str, rows: Sequence[tuple[str, Sequence[float]]], series: Sequence[str],
             fmt: Callable[[float], str] = duration) -> str:
    """Horizontal grouped bars: one row per label, one bar per series."""
    bar_h, gap, label_w = 12, 8, 230
    height = MT + len(rows) * (bar_h * len(series) + gap) + 30
    vmax = max([v for _, vals in rows for v in vals] + [1e-9])
    width = W
    out = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'font-family="{escape(SANS)}" font-size="11"><title>{escape(title)}</title>']
    y = MT
    for label, vals in rows:
        out.append(f'<text x="{label_w - 6}" y="{y + bar_h * len(series) / 2 + 4}" text-anchor="end">'
                   f"{escape(label)}</text>")
        for i, v in enumerate(vals):
            bw = (width - label_w - 90) * v / vmax
            tip = escape(f"{series[i]}: {fmt(v)}")
            out.append(f'<rect x="{label_w}" y="{y}" width="{bw:.1f}" height="{bar_h - 1}" '
                       f'fill="{PALETTE[i % len(PALETTE)]}"><title>{tip}</title></rect>')
            out.append(f'<text x="{label_w + bw + 4:.1f}" y="{y + bar_h - 2}">{escape(fmt(v))}</text>')
            y += bar_h
        y += gap
    lx = label_w
    for i, s in enumerate(series):
        out.append(f'<rect x="{lx}" y="{height - 18}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
                   f'<text x="{lx + 14}" y="{height - 9}">{escape(s)}</text>')
        lx += 14 + 8 * len(s) + 16
    out.append("</svg>")
    return "".join(out)


def histogram_svg(title: str, counts: Mapping[int, int], x_label: str) -> str:
    keys = sorted(counts) or [1]
    vmax = max(list(counts.values()) + [1])
    bw = (W - ML - MR) / max(len(keys), 1)
    out = [f'<svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" font-family="{escape(SANS)}" '
           f'font-size="11"><title>{escape(title)}</title>',
           f'<rect x="{ML}" y="{MT}" width="{W - ML - MR}" height="{H - MT - MB}" fill="#fbfcfe" stroke="#c9d3dd"/>']
    for i, k in enumerate(keys):
        v = counts.get(k, 0)
        h = (H - MT - MB) * v / vmax
        x = ML + i * bw
        out.append(f'<rect x="{x + 4:.1f}" y="{H - MB - h:.1f}" width="{max(bw - 8, 1):.1f}" height="{h:.1f}" '
                   f'fill="{GPU_USED}"><title>{v} job(s) spanning {k}</title></rect>')
        out.append(f'<text x="{x + bw / 2:.1f}" y="{H - MB - h - 3:.1f}" text-anchor="middle">{v}</text>')
        out.append(f'<text x="{x + bw / 2:.1f}" y="{H - MB + 14}" text-anchor="middle">{k}</text>')
    out.append(f'<text x="{(ML + W - MR) / 2}" y="{H - 4}" text-anchor="middle" fill="#5a6b7c">'
               f"{escape(x_label)}</text>")
    out.append("</svg>")
    return "".join(out)


def describe_run(meta: Mapping[str, Any]) -> str:
    """The report's header line from the run's settings (summary.json keeps them as data):
    ``cluster c.yaml (64 nodes) · trace t.yaml (7 jobs) · solver greedy · ...``."""
    parts = [f"cluster {meta.get('cluster')} ({meta.get('nodes')} nodes)", f"queues {meta.get('queues')}",
             f"trace {meta.get('trace')} ({meta.get('jobs')} jobs)", f"solver {meta.get('solver')}"]
    if meta.get("compare"):
        parts.append(f"compared by {meta['compare']}")
    model = meta.get("run_time_model")
    if isinstance(model, Mapping):
        parts.append(RunTimeModel(**model).describe())
    if meta.get("eviction_delay_s") is not None:
        parts.append(f"a preempted job frees its place after {duration(meta['eviction_delay_s'])}")
    backoff = meta.get("requeue_backoff_s")
    if isinstance(backoff, Mapping):
        parts.append(f"NodeFailures requeue backoff {duration(backoff.get('base', 0))}, doubling up to "
                     f"{duration(backoff.get('max', 0))}")
    guard = meta.get("eviction_storm_guard")
    if isinstance(guard, Mapping):
        parts.append(f"eviction-storm guard: hold when over {guard.get('threshold', 0):.0%} of the nodes failed "
                     f"within {duration(guard.get('window_s', 0))} (at least {guard.get('min_nodes')} nodes)")
    elif "eviction_storm_guard" in meta:
        parts.append("no eviction-storm guard")
    return " · ".join(parts)


def _fmt(pattern: str) -> Callable[[Any], str]:
    return pattern.format


CMP_ROWS: tuple[tuple[str, Any, Callable[[Any], str]], ...] = (
    ("makespan", "makespan_s", duration), ("admitted", "admitted", str), ("finished", "finished", str),
    ("still pending", "pending", str), ("wait mean", ("wait_s", "mean"), duration),
    ("wait p50", ("wait_s", "p50"), duration), ("wait p99", ("wait_s", "p99"), duration),
    ("GPU utilisation", "gpu_utilization", _fmt("{:.1%}")),
    ("domains / multi-pod job", "mean_domains_multi_pod", _fmt("{:.2f}")),
    ("multi-pod jobs in one domain", "multi_pod_in_one_domain", _fmt("{:.1%}")),
    ("wait p95", "wait_p95_s", duration), ("GPU-hours lost to evictions", "gpu_hours_lost", _fmt("{:.1f}")),
    ("whole-free domains (mean, all levels)", "free_whole_domains_mean", _fmt("{:.1f}")),
    ("preemptions", "preemptions", str), ("NodeFailures evictions", "evictions_node_failures", str),
    ("hot swaps", "replacements", str), ("cycles", "cycles", str), ("wall time (this machine)", "wall_s",
                                                                    _fmt("{:.2f} s")),
)


def _get(summary: Mapping[str, Any], key: Any) -> Any:
    if isinstance(key, tuple):
        return summary[key[0]][key[1]]
    return summary[key]


def render_report(runs: Sequence[tuple[str, SimResult, Mapping[str, Any]]], *, title: str = "toposched simulate",
                  meta: str = "") -> str:
    """``runs``: (variant label, result, summary) — the first is plotted in full, all are compared."""
    label0, result0, summary0 = runs[0]
    cards = [("", "jobs", summary0["submitted"]), ("ok", "admitted", summary0["admitted"]),
             ("", "GPU utilisation", f'{summary0["gpu_utilization"]:.1%}'),
             ("", "wait p50 / p99", f'{duration(summary0["wait_s"]["p50"])} / {duration(summary0["wait_s"]["p99"])}'),
             ("warn", "preemptions", summary0["preemptions"]),
             ("bad", "node failures / evictions", f'{summary0["failures"]} / {summary0["evictions_node_failures"]}')]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{escape(title)}</title>",
             f"<style>{CSS}{EXTRA_CSS}</style></head><body>", f"<h1>{escape(title)}</h1>",
             f'<div class="meta">{escape(meta)}</div>',
             '<div class="summary">' + "".join(
                 f'<div class="card {c}"><b>{escape(str(v))}</b><span>{escape(lbl)}</span></div>'
                 for c, lbl, v in cards) + "</div>"]
    if len(runs) > 1:
        parts.append("<h2>Policies side by side (same trace)</h2><table class=\"cmp\"><tr><th>metric</th>"
                     + "".join(f"<th>{escape(lbl)}</th>" for lbl, _, _ in runs) + "</tr>")
        for name, key, fmt in CMP_ROWS:
            parts.append(f"<tr><td>{escape(name)}</td>"
                         + "".join(f"<td>{escape(fmt(_get(s, key)))}</td>" for _, _, s in runs) + "</tr>")
        parts.append("</table>")
        teams = sorted({t for _, _, s in runs for t in s["wait_by_team_s"]})
        parts.append("<figure>" + bars_svg("mean wait per team and policy",
                                           [(t, [s["wait_by_team_s"].get(t, {}).get("mean", 0.0) for _, _, s in runs])
                                            for t in teams], [lbl for lbl, _, _ in runs])
                     + "<figcaption>mean queue wait per team, one bar per policy</figcaption></figure>")
    parts += completion_parts(runs)
    parts += free_domain_parts(runs)
    parts.append(f"<h2>GPU utilisation over time ({escape(label0)})</h2><figure>{utilisation_svg(result0)}"
                 "<figcaption>GPUs in use / GPUs on healthy nodes; dashed lines: red failure, green recovery, "
                 "orange preemption, purple eviction</figcaption></figure>")
    waits = [(f"team {k}", [v["mean"], v["p99"]]) for k, v in summary0["wait_by_team_s"].items()]
    waits += [(f"priority {k}", [v["mean"], v["p99"]]) for k, v in summary0["wait_by_priority_s"].items()]
    parts.append("<h2>Queue wait per team and priority</h2><figure>"
                 + bars_svg("queue wait", waits, ["mean", "p99"]) + "</figure>")
    level = summary0["domains_level"] or "lowest level"
    counts: dict[int, int] = {}
    for j in result0.jobs:
        if j.domains and sum(ps.count for ps in j.spec.pod_sets) > 1:
            k = j.domains.get(summary0["domains_level"], 0)
            counts[k] = counts.get(k, 0) + 1
    parts.append(f"<h2>Domains spanned per multi-pod job ({escape(level)})</h2><figure>"
                 + histogram_svg("domains spanned", counts, f"{level} domains spanned (fewer is more compact)")
                 + "</figure>")
    ev = [e for e in result0.events if e["kind"] in ("failure", "recovery", "preemption", "eviction", "replacement")]
    parts.append(f"<h2>Preemptions, failures and recoveries ({len(ev)})</h2>")
    if ev:
        parts.append('<table class="cmp"><tr><th>after</th><th>event</th><th>node / workload</th><th>detail</th></tr>')
        for e in ev[:300]:
            parts.append(f'<tr><td>{escape(duration(e["t"]))}</td><td>{escape(e["kind"])}</td>'
                         f'<td>{escape(e.get("node") or e.get("workload", ""))}</td>'
                         f'<td>{escape(e.get("detail", e.get("node", "") if e.get("workload") else ""))}</td></tr>')
        parts.append("</table>" + (f"<div class=\"meta\">… {len(ev) - 300} more in summary.json</div>"
                                   if len(ev) > 300 else ""))
    else:
        parts.append('<div class="meta">none</div>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def free_domains_svg(title: str, runs: Sequence[tuple[str, SimResult, Mapping[str, Any]]], level: int) -> str:
    """Whole-free domains of one level over time, one line per run (fragmentation, issue 17)."""
    x_max = max([r.makespan for _, r, _ in runs] + [1.0])
    y_max = max([c[level] for _, r, _ in runs for _t, c in r.free_domains if len(c) > level] + [1])
    out, top = _frame(title, x_max, float(y_max), lambda v: f"{v:g}", integer=True)
    for i, (label, result, _s) in enumerate(runs):
        pts, prev = [], None
        for t, counts in result.free_domains:
            if len(counts) <= level:
                continue
            x = ML + (W - ML - MR) * t / x_max
            y = MT + (H - MT - MB) * (1 - counts[level] / top)
            if prev is not None:
                pts.append(f"{x:.1f},{prev:.1f}")
            pts.append(f"{x:.1f},{y:.1f}")
            prev = y
        if pts:
            out.append(f'<polyline fill="none" stroke="{PALETTE[i % len(PALETTE)]}" stroke-width="1.3" '
                       f'points="{" ".join(pts)}"><title>{escape(label)}</title></polyline>')
    lx = ML
    for i, (label, _r, _s) in enumerate(runs):
        out.append(f'<rect x="{lx}" y="{MT + 4}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
                   f'<text x="{lx + 14}" y="{MT + 13}">{escape(label)}</text>')
        lx += 14 + 7 * len(label) + 14
    out.append("</svg>")
    return "".join(out)


def free_domain_parts(runs: Sequence[tuple[str, SimResult, Mapping[str, Any]]]) -> list[str]:
    """One plot per level above the leaves: domains with nothing in use, over time."""
    result0 = runs[0][1]
    if not result0.free_domains or not result0.levels:
        return []
    parts = []
    for level, name in enumerate(result0.levels[:-1]):
        parts.append(f"<h2>Whole-free {escape(name)} domains over time</h2><figure>"
                     + free_domains_svg(f"whole-free {name} domains", runs, level)
                     + "<figcaption>domains of this level with no GPU in use (more is better for large jobs); "
                       "one line per policy</figcaption></figure>")
    return parts


def completion_parts(runs: Sequence[tuple[str, SimResult, Mapping[str, Any]]]) -> list[str]:
    """Job completion time p50 / p95, completed GPU-hours per day and mean slowdown, per job
    class and run (sim/outcomes.py; the run-time model is in the header)."""
    label0, result0, summary0 = runs[0]
    if "jct_s" not in summary0:
        return []
    classes = list(summary0["jct_s"])
    out = [f"<h2>Job completion time per class ({escape(result0.run_time.describe())})</h2>",
           '<table class="cmp"><tr><th>class</th>'
           + "".join(f"<th>{escape(lbl)}: p50 / p95</th><th>GPU-h/day</th><th>slowdown</th>" for lbl, _, _ in runs)
           + "</tr>"]
    for cls in classes:
        cells = []
        for _lbl, _r, s in runs:
            j = s["jct_s"].get(cls, {"p50": 0.0, "p95": 0.0})
            cells.append(f"<td>{escape(duration(j['p50']))} / {escape(duration(j['p95']))}</td>"
                         f"<td>{s['completed_gpu_hours_per_day'].get(cls, 0.0):,.0f}</td>"
                         f"<td>{s['mean_slowdown'].get(cls, 1.0):.3f}x</td>")
        out.append(f"<tr><td>{escape(cls)}</td>{''.join(cells)}</tr>")
    out.append(f'</table><div class="meta">completion time: submission to the end of the run that finished; '
               f"GPU-h/day: work (trace durations) of the jobs finished within the first "
               f"{escape(duration(summary0['window_s']))}, per day; slowdown: mean run-time factor of the finished "
               "runs</div>")
    return out
