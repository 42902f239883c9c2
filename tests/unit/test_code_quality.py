"""House rules, enforced: ruff clean, mypy --strict on the pure core, the models and kube/, and
``scheduler.core`` imports nothing from the imperative shell (kube, extender, api, admission)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHELL_PACKAGES = ("scheduler.kube", "scheduler.k8s", "scheduler.extender", "scheduler.api", "scheduler.devcluster",
                  "scheduler.commands", "scheduler.models", "admission", "kubernetes", "grpc")


def test_core_imports_nothing_from_the_shell() -> None:
    offenders = []
    for path in sorted((ROOT / "scheduler" / "core").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if any(name == p or name.startswith(p + ".") for p in SHELL_PACKAGES):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert offenders == []


def test_ruff_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_mypy_strict_on_core_and_models() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "--exclude", "scheduler/api/gen", "scheduler/core",
                           "scheduler/models", "scheduler/adapter", "scheduler/api", "admission", "scheduler/extender",
                           "scheduler/kube", "scheduler/k8s", "scheduler/http"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def _import_graph() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result: dict[str, Any] = module.analyse()
    return result


def test_no_import_cycles_and_no_upward_imports() -> None:
    """Layers (scripts/import_graph.py, docs/architecture.md): core < models < adapter < shell <
    cli; a module never imports a layer above its own, and no two modules import each other."""
    graph = _import_graph()
    assert graph["cycles"] == [] and graph["upward"] == []


# The doors: each serves its own clients, and none loads another's code, even through a third
# module (the webhook once loaded the controller's package through the clock it imported from it).
DOORS = {"admission": "webhook", "scheduler.extender": "extender", "scheduler.api": "gRPC API",
         "scheduler.kube": "controller", "scheduler.commands": "CLI"}


def _door(module: str) -> str | None:
    return next((name for prefix, name in DOORS.items() if module == prefix or module.startswith(prefix + ".")), None)


def _reached(edges: dict[str, list[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        for target in edges.get(stack.pop(), ()):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def test_no_door_reaches_another_door_even_through_a_third_module() -> None:
    """The webhook, the extender, the gRPC API and the controller share the plumbing below them
    (scheduler.k8s, scheduler.http, the adapter and the core), never each other's modules: a
    module of one door whose imports, followed all the way down, reach a module of another is
    named with the first one it reaches. (The CLI may reach every door: it starts them.)"""
    edges = _import_graph()["graph"]
    offenders = sorted(f"{module} -> {target}" for module in edges if _door(module) not in (None, "CLI")
                       for target in _reached(edges, module) if _door(target) not in (None, _door(module)))
    assert offenders == []


def test_imports_inside_functions_say_why() -> None:
    """Imports belong at module top; a module that imports inside functions says why once."""
    modules = {line.split(":")[0] for line in _import_graph()["in_function"]}
    silent = [m for m in sorted(modules)
              if "Imports inside functions:" not in (ROOT / (m.replace(".", "/") + ".py")).read_text()]
    assert silent == []


def _project_modules() -> list[Path]:
    return sorted(p for base in ("scheduler", "admission") for p in (ROOT / base).rglob("*.py")
                  if "gen" not in p.relative_to(ROOT).parts)


def test_no_module_imports_a_private_name_of_another() -> None:
    """A leading underscore means "this module's own": another module that needs the name needs
    it public (issue 33: domain-clearing preemption imported two private helpers of preemption)."""
    offenders = []
    for path in _project_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("scheduler", "admission")):
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{a.name}"
                              for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert offenders == []


def test_no_module_keeps_a_memo_of_its_own() -> None:
    """Conversions reused between snapshots belong to whoever builds the snapshots
    (adapter/caches.py ``SnapshotCaches``), not to module state shared by every caller."""
    offenders = []
    for path in _project_modules():
        for node in ast.parse(path.read_text()).body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1].lstrip("_").endswith("Memo"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)[:80]}")
    assert offenders == []


def test_no_class_over_three_hundred_lines() -> None:
    """A room one person can hold (docs/architecture.md): no class of scheduler/ or admission/
    over 300 lines (issue 33: the cycle, the slot book, the simulator, the controller, the
    local cluster and the topology tree had grown past it)."""
    offenders = []
    for path in _project_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > 300:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.name} {lines} lines")
    assert offenders == []
