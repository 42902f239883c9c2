"""`toposched` is an editable install of whichever checkout ran scripts/setup.sh last: run from
inside another checkout, it says whose code runs instead of silently running it."""

from __future__ import annotations

from pathlib import Path

from scheduler.cli import other_checkout


def checkout(root: Path) -> Path:
    (root / "scheduler").mkdir(parents=True)
    (root / "scheduler" / "cli.py").write_text("")
    (root / "pyproject.toml").write_text("")
    return root


def test_another_checkout_is_named(tmp_path: Path) -> None:
    installed, here = checkout(tmp_path / "main"), checkout(tmp_path / "wt")
    (here / "docs").mkdir()
    assert other_checkout(here / "docs", installed) == here
    assert other_checkout(here, here) is None
    assert other_checkout(installed / "scheduler", installed) is None
    assert other_checkout(tmp_path, installed) is None  # not in a checkout: nothing to say
