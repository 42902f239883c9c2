"""The tree as one self-contained SVG: nested domain boxes, node tiles coloured by health,
per-node GPU segments and the workloads placed there (pure string building, no I/O).

Layout: each domain is a box titled ``Layer k: <value>`` whose children flow left to right
and wrap at the available width; the deepest domains hold a grid of node tiles. In the
collapsed view (large clusters) the domains of layer 3 (or the deepest layer, if shallower)
become summary boxes: node and health counts, a GPU occupancy bar and one small square per
node coloured by health.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

from scheduler.topoview.model import (
    DRAINED,
    HEALTHY,
    UNAVAILABLE,
    UNHEALTHY,
    Domain,
    NodeView,
    TopologyView,
    short_reason,
)

AUTO_COLLAPSE_NODES = 400
TILE_W, TILE_H = 196, 70
GAP, PAD, HEADER = 8, 10, 24
SUMMARY_W = 250
LEGEND_H = 34
MONO = "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace"
SANS = "system-ui, 'DejaVu Sans', 'Segoe UI', Arial, sans-serif"

COLOURS = {
    HEALTHY: ("#e6f4e4", "#2e7d32", "healthy (Schedulable, Ready)"),
    UNHEALTHY: ("#fde2df", "#c62828", "unhealthy (HyperPod fault / health label)"),
    UNAVAILABLE: ("#fff1d6", "#b26a00", "down: NotReady or cordoned"),
    DRAINED: ("#ece6f5", "#6a3fa0", "drained for maintenance"),
}
GPU_USED, GPU_FREE = "#1e5fbf", "#ffffff"
LEVEL_FILL = ("#eef3fa", "#fbfcfe", "#f2f4f7", "#ffffff", "#f4f6f8")


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(1, chars - 1)] + "…"


@dataclass
class _Box:
    w: int
    h: int
    dom: Domain | None = None
    children: list[tuple[int, int, _Box]] = field(default_factory=list)  # (dx, dy, box)
    tiles: list[tuple[int, int, NodeView]] = field(default_factory=list)
    summary: bool = False


def _flow(items: list[_Box], max_w: int) -> tuple[int, int, list[tuple[int, int, _Box]]]:
    """Place boxes left to right, wrapping at max_w; returns (width, height, placements)."""
    x = y = row_h = width = 0
    out: list[tuple[int, int, _Box]] = []
    for box in items:
        if x > 0 and x + box.w > max_w:
            y += row_h + GAP
            x = row_h = 0
        out.append((x, y, box))
        x += box.w + GAP
        row_h = max(row_h, box.h)
        width = max(width, x - GAP)
    return width, y + row_h, out


def _summary_rows(n: int, inner: int) -> int:
    per_row = max(1, (inner + 2) // 11)
    return max(1, math.ceil(n / per_row))


def _measure(dom: Domain, max_w: int, collapse_level: int | None) -> _Box:
    title_w = 8 * (len(dom.value) + 10) + 2 * PAD
    if collapse_level is not None and dom.level >= collapse_level:
        inner = SUMMARY_W - 2 * PAD
        rows = _summary_rows(dom.node_count, inner)
        return _Box(SUMMARY_W, HEADER + 58 + rows * 11 + PAD, dom=dom, summary=True)
    inner_max = max(TILE_W, max_w - 2 * PAD)
    if dom.children:
        kids = [_measure(c, inner_max, collapse_level) for c in dom.children]
        w, h, placed = _flow(kids, inner_max)
        box = _Box(max(w + 2 * PAD, min(title_w, max_w)), HEADER + h + PAD, dom=dom, children=placed)
    else:
        box = _Box(0, 0, dom=dom)
        w = h = 0
    if dom.nodes:
        n = len(dom.nodes)
        fit = max(1, (inner_max + GAP) // (TILE_W + GAP))
        cols = min(n, fit, max(1, math.ceil(math.sqrt(n))))
        rows = math.ceil(n / cols)
        top = HEADER + (h + GAP if dom.children else 0)
        for i, node in enumerate(sorted(dom.nodes, key=lambda v: v.name)):
            r, c = divmod(i, cols)
            box.tiles.append((PAD + c * (TILE_W + GAP), top + r * (TILE_H + GAP), node))
        grid_w = cols * (TILE_W + GAP) - GAP
        box.w = max(box.w, grid_w + 2 * PAD, min(title_w, max_w))
        box.h = top + rows * (TILE_H + GAP) - GAP + PAD
    return box


def _gpu_segments(x: int, y: int, width: int, total: int, used: int) -> list[str]:
    if total <= 0:
        return [f'<text x="{x}" y="{y + 9}" class="muted">no accelerators</text>']
    out = []
    if total <= 16:
        seg = (width - (total - 1) * 2) / total
        for i in range(total):
            fill = GPU_USED if i < used else GPU_FREE
            out.append(f'<rect x="{x + i * (seg + 2):.1f}" y="{y}" width="{seg:.1f}" height="11" rx="2" '
                       f'fill="{fill}" stroke="#7b8794" stroke-width="0.8"/>')
    else:
        frac = min(1.0, used / total)
        out.append(f'<rect x="{x}" y="{y}" width="{width}" height="11" rx="2" fill="{GPU_FREE}" '
                   f'stroke="#7b8794" stroke-width="0.8"/>')
        out.append(f'<rect x="{x}" y="{y}" width="{width * frac:.1f}" height="11" rx="2" fill="{GPU_USED}"/>')
    return out


def _tile(x: int, y: int, node: NodeView) -> list[str]:
    fill, stroke, _ = COLOURS[node.health]
    tip = [node.name, f"health: {node.health}" + (f" — {node.reason}" if node.reason else ""),
           f"accelerators: {node.gpus_used}/{node.gpus} used"]
    tip += [f"{w}: {g}" for w, g in node.workloads.items()]
    out = [f'<g transform="translate({x},{y})" class="node" data-node="{escape(node.name)}">',
           f"<title>{escape(chr(10).join(tip))}</title>",
           f'<rect width="{TILE_W}" height="{TILE_H}" rx="5" fill="{fill}" stroke="{stroke}" '
           'stroke-width="1.4"/>',
           f'<text x="7" y="15" class="mono">{escape(_clip(node.name, 29))}</text>']
    out += _gpu_segments(7, 22, TILE_W - 60, node.gpus, node.gpus_used)
    out.append(f'<text x="{TILE_W - 7}" y="32" class="small" text-anchor="end">'
               f"GPU {node.gpus_used}/{node.gpus}</text>")
    if node.health != HEALTHY:
        cls = "bad" if node.health == UNHEALTHY else "warn"
        out.append(f'<text x="7" y="50" class="{cls}">{escape(_clip(short_reason(node.reason), 31))}</text>')
        line_y = 64
    else:
        line_y = 50
    items = list(node.workloads.items())
    if items:
        first = f"{items[0][0].split('/', 1)[-1]} ({items[0][1]})"
        more = f" +{len(items) - 1}" if len(items) > 1 else ""
        text = _clip(first, 33 - len(more)) + more
        out.append(f'<text x="7" y="{line_y}" class="wl">{escape(text)}</text>')
    elif node.health == HEALTHY:
        out.append(f'<text x="7" y="{line_y}" class="muted">idle</text>')
    out.append("</g>")
    return out


def _summary(dom: Domain, box: _Box, counts: dict[str, int]) -> list[str]:
    text = f"{dom.node_count} nodes: {counts[HEALTHY]} healthy"
    if counts[UNHEALTHY]:
        text += f", {counts[UNHEALTHY]} unhealthy"
    if counts[UNAVAILABLE]:
        text += f", {counts[UNAVAILABLE]} down"
    if counts[DRAINED]:
        text += f", {counts[DRAINED]} drained"
    out = [f'<text x="{PAD}" y="{HEADER + 12}" class="small">{escape(text)}</text>']
    bar = SUMMARY_W - 2 * PAD
    out.append(f'<rect x="{PAD}" y="{HEADER + 20}" width="{bar}" height="11" rx="2" fill="{GPU_FREE}" '
               f'stroke="#7b8794" stroke-width="0.8"/>')
    if dom.gpus:
        frac = min(1.0, dom.gpus_used / dom.gpus)
        out.append(f'<rect x="{PAD}" y="{HEADER + 20}" width="{bar * frac:.1f}" height="11" '
                   f'rx="2" fill="{GPU_USED}"/>')
    out.append(f'<text x="{PAD}" y="{HEADER + 46}" class="small">GPU {dom.gpus_used}/{dom.gpus} used</text>')
    return out


def _leaf_health(dom: Domain) -> list[NodeView]:
    stack, out = [dom], []
    while stack:
        d = stack.pop()
        out.extend(d.nodes)
        stack.extend(d.children)
    return sorted(out, key=lambda n: n.name)


def _draw(box: _Box, x: int, y: int) -> list[str]:
    dom = box.dom
    assert dom is not None
    fill = LEVEL_FILL[(dom.level - 1) % len(LEVEL_FILL)]
    stats = f"{dom.node_count} nodes · {dom.healthy} healthy · GPU {dom.gpus_used}/{dom.gpus}"
    short = f"{dom.node_count} nodes · GPU {dom.gpus_used}/{dom.gpus}"
    out = [f'<g transform="translate({x},{y})" class="domain" data-domain="{escape(dom.value)}">',
           f"<title>{escape(f'Layer {dom.level}: {dom.value}' + chr(10) + stats)}</title>",
           f'<rect width="{box.w}" height="{box.h}" rx="7" fill="{fill}" stroke="#8fa1b3" stroke-width="1"/>',
           f'<text x="{PAD}" y="17" class="title">Layer {dom.level}: {escape(dom.value)}</text>']
    room = box.w - (7.8 * (len(dom.value) + 10) + 2 * PAD)
    fitting = next((s for s in (stats, short) if room >= 6.2 * len(s)), "")
    if fitting:
        out.append(f'<text x="{box.w - PAD}" y="17" class="small" text-anchor="end">{escape(fitting)}</text>')
    if box.summary:
        members = _leaf_health(dom)
        counts = {HEALTHY: 0, UNHEALTHY: 0, UNAVAILABLE: 0, DRAINED: 0}
        for n in members:
            counts[n.health] += 1
        out += _summary(dom, box, counts)
        per_row = max(1, (SUMMARY_W - 2 * PAD + 2) // 11)
        for i, n in enumerate(members):
            r, c = divmod(i, per_row)
            colour = "#66bb6a" if n.health == HEALTHY else COLOURS[n.health][1]
            tip = f"{n.name}: {n.reason or 'healthy'}, GPU {n.gpus_used}/{n.gpus}"
            out.append(f'<rect x="{PAD + c * 11}" y="{HEADER + 54 + r * 11}" width="9" height="9" '
                       f'fill="{colour}"><title>{escape(tip)}</title></rect>')
    for dx, dy, child in box.children:
        out += _draw(child, dx + PAD, dy + HEADER)
    for tx, ty, node in box.tiles:
        out += _tile(tx, ty, node)
    out.append("</g>")
    return out


STYLE = f"""
.title {{ font: 600 12.5px {SANS}; fill: #1f2d3d; }}
.small {{ font: 11px {SANS}; fill: #3c4a5a; }}
.muted {{ font: 11px {SANS}; fill: #8a96a3; }}
.mono {{ font: 600 10.5px {MONO}; fill: #17202a; }}
.wl {{ font: 11px {SANS}; fill: #0d3c85; }}
.bad {{ font: 600 10px {SANS}; fill: #a31515; }}
.warn {{ font: 600 10px {SANS}; fill: #8a5300; }}
.legend {{ font: 12px {SANS}; fill: #1f2d3d; }}
"""


def _legend(width: int, collapsed: bool) -> list[str]:
    out = ['<g class="legend-row" transform="translate(0,6)">']
    x = 0
    for key in (HEALTHY, UNHEALTHY, UNAVAILABLE, DRAINED):
        fill, stroke, text = COLOURS[key]
        out.append(f'<rect x="{x}" y="0" width="18" height="14" rx="3" fill="{fill}" stroke="{stroke}" '
                   'stroke-width="1.4"/>')
        out.append(f'<text x="{x + 24}" y="11.5" class="legend">{escape(text)}</text>')
        x += 34 + 7 * len(text)
    out.append(f'<rect x="{x}" y="1" width="12" height="12" rx="2" fill="{GPU_USED}"/>'
               f'<rect x="{x + 14}" y="1" width="12" height="12" rx="2" fill="{GPU_FREE}" stroke="#7b8794"/>')
    out.append(f'<text x="{x + 32}" y="11.5" class="legend">GPU used / free</text>')
    if collapsed:
        out.append(f'<text x="{width}" y="11.5" class="legend" text-anchor="end">collapsed view: one box per '
                   "domain, one square per node</text>")
    out.append("</g>")
    return out


def collapse_level_for(view: TopologyView, collapse_at: int | None) -> int | None:
    """The layer whose domains become summaries, or None for the full view.

    ``collapse_at``: None = automatic (more than AUTO_COLLAPSE_NODES nodes), 0 = never.
    """
    limit = AUTO_COLLAPSE_NODES if collapse_at is None else collapse_at
    if limit <= 0 or len(view.nodes) <= limit or view.depth == 0:
        return None
    return min(3, view.depth)


def render_svg(view: TopologyView, *, width: int = 1360, collapse_at: int | None = None) -> str:
    level = collapse_level_for(view, collapse_at)
    boxes = [_measure(d, width, level) for d in view.roots]
    placed = []
    y = LEGEND_H
    content_w = 0
    for box in boxes:
        placed.append((0, y, box))
        y += box.h + GAP * 2
        content_w = max(content_w, box.w)
    total_w = max(width, content_w) + 2
    total_h = max(y, LEGEND_H + 20)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{total_h}" '
           f'viewBox="-1 0 {total_w} {total_h}" role="img" aria-label="cluster topology">',
           f"<style>{STYLE}</style>"]
    out += _legend(total_w - 4, level is not None)
    for x, yy, box in placed:
        out += _draw(box, x, yy)
    if not view.roots:
        out.append(f'<text x="0" y="{LEGEND_H + 14}" class="small">no node carries topology labels</text>')
    out.append("</svg>")
    return "\n".join(out)
