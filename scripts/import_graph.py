#!/usr/bin/env python3
"""The module import graph of toposched (scheduler/, admission/): cycles, imports that point
the wrong way between layers, and imports made inside functions.

    python scripts/import_graph.py            # summary
    python scripts/import_graph.py --edges    # every edge, module -> module

Layers, lowest first: a module may import its own layer and the ones below, never above.
The test tests/unit/test_code_quality.py holds the tree to these rules.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scheduler", "admission")

# Lowest first. A module's layer is the first prefix that matches.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("scheduler.core", "scheduler.errors")),
    ("models", ("scheduler.models",)),
    ("adapter", ("scheduler.adapter", "scheduler.topoview", "scheduler.sim", "scheduler.explain")),
    ("shell", ("scheduler.kube", "scheduler.k8s", "scheduler.extender", "admission", "scheduler.api",
               "scheduler.devcluster", "scheduler.http")),
    ("cli", ("scheduler.commands", "scheduler.cli", "scheduler")),
)


def layer_of(module: str) -> int:
    for index, (_name, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return len(LAYERS)


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "/gen/" in str(path):
                continue
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(module: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int, bool, bool]]:
    """(target module, line, inside a function, under TYPE_CHECKING) for each project import."""
    tree = ast.parse(path.read_text())
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def context(node: ast.AST) -> tuple[bool, bool]:
        in_function = type_checking = False
        while node in parents:
            node = parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                in_function = True
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                type_checking = True
        return in_function, type_checking

    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] if base else []
        else:
            continue
        for name in names:
            target = _resolve(name, known)
            if target and target != module:
                yield (target, node.lineno, *context(node))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def analyse() -> dict[str, object]:
    known = modules()
    edges: dict[str, set[str]] = {m: set() for m in known}
    upward: list[str] = []
    in_function: list[str] = []
    for module, path in known.items():
        for target, line, inside, type_only in imports(module, path, known):
            if type_only:
                continue
            edges[module].add(target)
            if layer_of(target) > layer_of(module):
                upward.append(f"{module}:{line} -> {target}")
            if inside:
                in_function.append(f"{module}:{line} -> {target}")
    return {"modules": len(known), "edges": sum(len(v) for v in edges.values()), "cycles": cycles(edges),
            "upward": upward, "in_function": in_function, "graph": edges}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="print every edge")
    args = parser.parse_args()
    result = analyse()
    if args.edges:
        for module, targets in sorted(result["graph"].items()):  # type: ignore[union-attr]
            for target in sorted(targets):
                print(f"{module} -> {target}")
        return 0
    print(f"modules: {result['modules']}, edges: {result['edges']}")
    print(f"import cycles: {len(result['cycles'])}")  # type: ignore[arg-type]
    for comp in result["cycles"]:  # type: ignore[union-attr]
        print("  " + " <-> ".join(comp))
    print(f"upward imports (a lower layer importing a higher one): {len(result['upward'])}")  # type: ignore[arg-type]
    for line in result["upward"]:  # type: ignore[union-attr]
        print("  " + line)
    print(f"project imports inside functions: {len(result['in_function'])}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
