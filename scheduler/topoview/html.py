"""A self-contained HTML page: summary, warnings, the SVG tree, the Mermaid source.

Everything is inline (CSS in <style>, the SVG in the body, no scripts, no fonts, no links):
the page opens with no network.
"""

from __future__ import annotations

from html import escape

from scheduler.topoview.mermaid import render_mermaid
from scheduler.topoview.model import TopologyView, level_counts
from scheduler.topoview.svg import collapse_level_for, render_svg

CSS = """
body { margin: 16px 20px; font: 14px system-ui, 'DejaVu Sans', 'Segoe UI', Arial, sans-serif;
       color: #1f2d3d; background: #ffffff; }
h1 { font-size: 20px; margin: 0 0 6px 0; }
.summary { display: flex; flex-wrap: wrap; gap: 10px; margin: 8px 0 12px 0; }
.card { border: 1px solid #c9d3dd; border-radius: 6px; padding: 6px 12px; background: #f7f9fb; }
.card b { font-size: 17px; display: block; }
.card span { font-size: 13px; }
.card.bad b { color: #c62828; } .card.warn b { color: #b26a00; } .card.ok b { color: #2e7d32; }
.warnings { background: #fff8e1; border: 1px solid #f0c36d; border-radius: 6px; padding: 6px 12px;
            margin: 0 0 12px 0; font-size: 13px; }
.warnings li { margin: 2px 0; }
details { margin-top: 14px; } pre { background: #f4f6f8; padding: 8px; overflow: auto; font-size: 12px; }
.meta { color: #5a6b7c; font-size: 13px; }
"""

MAX_WARNINGS_SHOWN = 20


def render_html(view: TopologyView, *, title: str = "Cluster topology", collapse_at: int | None = None,
                width: int = 1360, source: str = "", include_mermaid: bool = True) -> str:
    totals = view.totals()
    level = collapse_level_for(view, collapse_at)
    counts = level_counts(view)
    layers = ", ".join(f"layer {k}: {counts.get(k, 0)}" for k in range(1, view.depth + 1))
    util = f"{100 * totals['gpus_used'] / totals['gpus']:.0f}%" if totals["gpus"] else "n/a"
    cards = [
        ("", "nodes", totals["nodes"]),
        ("ok", "healthy", totals["healthy"]),
        ("bad", "unhealthy", totals["unhealthy"]),
        ("warn", "NotReady / cordoned", totals["unavailable"]),
        ("warn", "drained (toposched.io/drain)", totals["drained"]),
        ("", "GPUs used / total", f"{totals['gpus_used']} / {totals['gpus']} ({util})"),
        ("", "domains", layers or "none"),
    ]
    if totals["skipped"]:
        cards.append(("warn", "skipped (no labels)", totals["skipped"]))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        '<div class="meta">' + escape(
            (f"source: {source} · " if source else "")
            + f"levels: {', '.join(view.levels) or 'none'}"
            + (f" · collapsed at layer {level} (more than the node limit)" if level else "")) + "</div>",
        '<div class="summary">' + "".join(
            f'<div class="card {cls}"><b>{escape(str(value))}</b><span>{escape(label)}</span></div>'
            for cls, label, value in cards) + "</div>",
    ]
    if view.warnings:
        shown = view.warnings[:MAX_WARNINGS_SHOWN]
        more = len(view.warnings) - len(shown)
        parts.append('<div class="warnings"><b>Warnings</b><ul>'
                     + "".join(f"<li>{escape(w)}</li>" for w in shown)
                     + (f"<li>… and {more} more</li>" if more else "") + "</ul></div>")
    svg = render_svg(view, width=width, collapse_at=collapse_at)
    parts.append(svg.replace(' xmlns="http://www.w3.org/2000/svg"', "", 1))
    if include_mermaid:
        parts.append("<details><summary>Mermaid source (same as visualize_topology.sh)</summary><pre>"
                     + escape(render_mermaid(view)) + "</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
