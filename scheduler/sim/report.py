"""The simulation report: one self-contained HTML page with inline SVG plots (no scripts, no
links, no fonts: it opens offline). Styles come from ``scheduler.topoview``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from scheduler.sim.model import SimResult
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


def _fmt_t(s: float) -> str:
    if s >= 7200:
        return f"{s / 3600:.0f}h"
    if s >= 120:
        return f"{s / 60:.0f}m"
    return f"{s:.0f}s"


def _frame(title: str, x_max: float, y_max: float, x_label: str, y_fmt: Any = None) -> list[str]:
    out = [f'<svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" font-family="{escape(SANS)}" '
           f'font-size="11"><title>{escape(title)}</title>',
           f'<rect x="{ML}" y="{MT}" width="{W - ML - MR}" height="{H - MT - MB}" fill="#fbfcfe" stroke="#c9d3dd"/>']
    for i in range(5):
        y = MT + (H - MT - MB) * i / 4
        v = y_max * (4 - i) / 4
        out.append(f'<line x1="{ML}" y1="{y:.1f}" x2="{W - MR}" y2="{y:.1f}" stroke="#e3e8ee"/>')
        out.append(f'<text x="{ML - 4}" y="{y + 4:.1f}" text-anchor="end">{escape(y_fmt(v) if y_fmt else f"{v:g}")}'
                   "</text>")
    for i in range(6):
        x = ML + (W - ML - MR) * i / 5
        out.append(f'<text x="{x:.1f}" y="{H - MB + 14}" text-anchor="middle">{escape(_fmt_t(x_max * i / 5))}</text>')
    out.append(f'<text x="{(ML + W - MR) / 2}" y="{H - 4}" text-anchor="middle" fill="#5a6b7c">'
               f"{escape(x_label)}</text>")
    return out


def utilisation_svg(result: SimResult) -> str:
    x_max = max(result.makespan, 1.0)
    out = _frame("GPU utilisation over time", x_max, 100.0, "simulated time", lambda v: f"{v:.0f}%")

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
        label = escape(f'{e["kind"]} {e.get("node") or e.get("workload", "")} at {_fmt_t(e["t"])}')
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
             unit: str = "s") -> str:
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
            tip = escape(f"{series[i]}: {v:.1f}{unit}")
            out.append(f'<rect x="{label_w}" y="{y}" width="{bw:.1f}" height="{bar_h - 1}" '
                       f'fill="{PALETTE[i % len(PALETTE)]}"><title>{tip}</title></rect>')
            out.append(f'<text x="{label_w + bw + 4:.1f}" y="{y + bar_h - 2}">{escape(f"{v:.1f}{unit}")}</text>')
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


CMP_ROWS = (
    ("makespan", "makespan_s", "{:.0f} s"), ("admitted", "admitted", "{}"), ("finished", "finished", "{}"),
    ("still pending", "pending", "{}"), ("wait mean", ("wait_s", "mean"), "{:.1f} s"),
    ("wait p50", ("wait_s", "p50"), "{:.1f} s"), ("wait p99", ("wait_s", "p99"), "{:.1f} s"),
    ("GPU utilisation", "gpu_utilization", "{:.1%}"), ("domains / multi-pod job", "mean_domains_multi_pod", "{:.2f}"),
    ("multi-pod jobs in one domain", "multi_pod_in_one_domain", "{:.1%}"), ("wait p95", "wait_p95_s", "{:.1f} s"),
    ("GPU-hours lost to evictions", "gpu_hours_lost", "{:.1f}"),
    ("whole-free domains (mean, all levels)", "free_whole_domains_mean", "{:.1f}"),
    ("preemptions", "preemptions", "{}"), ("NodeFailures evictions", "evictions_node_failures", "{}"),
    ("hot swaps", "replacements", "{}"), ("cycles", "cycles", "{}"), ("wall time", "wall_s", "{:.2f} s"),
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
             ("", "wait p50 / p99", f'{summary0["wait_s"]["p50"]:.0f} s / {summary0["wait_s"]["p99"]:.0f} s'),
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
                         + "".join(f"<td>{escape(fmt.format(_get(s, key)))}</td>" for _, _, s in runs) + "</tr>")
        parts.append("</table>")
        teams = sorted({t for _, _, s in runs for t in s["wait_by_team_s"]})
        parts.append("<figure>" + bars_svg("mean wait per team and policy",
                                           [(t, [s["wait_by_team_s"].get(t, {}).get("mean", 0.0) for _, _, s in runs])
                                            for t in teams], [lbl for lbl, _, _ in runs])
                     + "<figcaption>mean queue wait per team, one bar per policy</figcaption></figure>")
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
        parts.append('<table class="cmp"><tr><th>time</th><th>event</th><th>node / workload</th><th>detail</th></tr>')
        for e in ev[:300]:
            parts.append(f'<tr><td>{e["t"]:.0f} s</td><td>{escape(e["kind"])}</td>'
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
    out = _frame(title, x_max, float(y_max), "simulated time", lambda v: f"{v:.3g}")
    for i, (label, result, _s) in enumerate(runs):
        pts, prev = [], None
        for t, counts in result.free_domains:
            if len(counts) <= level:
                continue
            x = ML + (W - ML - MR) * t / x_max
            y = MT + (H - MT - MB) * (1 - counts[level] / y_max)
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
