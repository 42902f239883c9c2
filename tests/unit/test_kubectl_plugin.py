"""``kubectl toposched ...``: the ``kubectl-toposched`` console script is declared, resolves to the
toposched CLI, and the real kubectl finds it on PATH and hands it the arguments (kubectl runs
any ``kubectl-<name>`` executable on PATH for ``kubectl <name>``), as ``kubectl kueue`` does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from scheduler.cli import main

ROOT = Path(__file__).resolve().parents[2]
PLACE = ROOT / "tests" / "data" / "place"


def declared_scripts() -> dict[str, str]:
    scripts: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return scripts


def test_entry_point_is_the_toposched_cli() -> None:
    scripts = declared_scripts()
    assert scripts["kubectl-toposched"] == scripts["toposched"]
    assert EntryPoint("kubectl-toposched", scripts["kubectl-toposched"], "console_scripts").load() is main


def test_entry_point_dispatches_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    target = EntryPoint("kubectl-toposched", declared_scripts()["kubectl-toposched"], "console_scripts").load()
    code = target(["place", "--nodes", str(PLACE / "nodes.yaml"), "--workload", str(PLACE / "job-required-l3.yaml"),
                   "--topology", str(PLACE / "topology.yaml"), "--output", "json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["fits"] is True
    for command in ("explain", "topology", "place"):
        with pytest.raises(SystemExit) as exit_info:
            target([command, "--help"])
        assert exit_info.value.code == 0
        assert f"toposched {command}" in capsys.readouterr().out


def _console_script(directory: Path, name: str, target: str) -> Path:
    """What pip writes for a [project.scripts] entry: import the target and exit with its result."""
    module, func = target.split(":")
    path = directory / name
    path.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
    path.chmod(0o755)
    return path


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_runs_the_plugin(tmp_path: Path) -> None:
    _console_script(tmp_path, "kubectl-toposched", declared_scripts()["kubectl-toposched"])
    env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    listed = subprocess.run([kubectl, "plugin", "list"], capture_output=True, text=True, env=env, timeout=60)
    assert str(tmp_path / "kubectl-toposched") in listed.stdout
    placed = subprocess.run([kubectl, "toposched", "place", "--nodes", str(PLACE / "nodes.yaml"),
                             "--workload", str(PLACE / "job-required-l3.yaml"), "--topology",
                             str(PLACE / "topology.yaml"), "--output", "json"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert placed.returncode == 0, placed.stderr
    assert json.loads(placed.stdout)["fits"] is True
