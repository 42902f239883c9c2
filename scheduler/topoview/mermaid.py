"""Mermaid ``flowchart TD`` text, line for line what AWS's ``visualize_topology.sh`` prints.

Order (as the script): the root, then for each layer k = 1..N its unique values sorted, each
drawn from the parent value of the first node that carries it, then one edge per node (input
order, i.e. ``kubectl get nodes`` order) from the node's deepest layer. Ids are the raw values
with every non-alphanumeric character replaced by ``_``.
"""

from __future__ import annotations

from scheduler.topoview.model import TopologyView, sanitize_id

INDENT = "    "


def render_mermaid(view: TopologyView) -> str:
    lines = ["flowchart TD", f'{INDENT}A["Cluster Topology"]']
    for k in range(1, view.depth + 1):
        parent_of: dict[str, str] = {}
        for node in view.nodes:
            if len(node.path) >= k:
                parent_of.setdefault(node.path[k - 1], node.path[k - 2] if k > 1 else "")
        for value in sorted(parent_of):
            src = "A" if k == 1 else f"L{k - 1}_{sanitize_id(parent_of[value])}"
            lines.append(f'{INDENT}{src} --> L{k}_{sanitize_id(value)}["Layer {k}: {value}"]')
    for node in view.nodes:
        k = len(node.path)
        lines.append(f'{INDENT}L{k}_{sanitize_id(node.path[-1])} --> N_{node.id}["{node.name}"]')
    return "\n".join(lines) + "\n"
