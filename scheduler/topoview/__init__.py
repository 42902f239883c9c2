"""Topology rendering engine (pure): tree from NodeInfo, Mermaid, SVG and HTML renderers.

Used by ``scripts/visualize_topology`` and ``toposched topology``; file and cluster reading
lives in ``scheduler/commands/topology.py``.
"""

from scheduler.topoview.html import render_html
from scheduler.topoview.mermaid import render_mermaid
from scheduler.topoview.model import (
    Domain,
    NodeView,
    TopologyView,
    build_view,
    discover_layers,
    sanitize_id,
    view_to_dict,
)
from scheduler.topoview.svg import render_svg

__all__ = [
    "Domain", "NodeView", "TopologyView", "build_view", "discover_layers", "render_html",
    "render_mermaid", "render_svg", "sanitize_id", "view_to_dict",
]
