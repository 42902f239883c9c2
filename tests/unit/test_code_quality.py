"""House rules, enforced: ruff clean, mypy --strict on the pure core, the models and kube/, and
``scheduler.core`` imports nothing from the imperative shell (kube, extender, api, admission)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL_PACKAGES = ("scheduler.kube", "scheduler.extender", "scheduler.api", "scheduler.devcluster",
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
                           "scheduler/kube"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
