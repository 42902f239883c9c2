"""Each door loads only what it uses (issue 42, item 3): the webhook and the extender place
greedily, so neither may load the CP-SAT solver (OR-Tools, and the pandas it imports), which
cost the webhook process about 250 ms at start and 50 MiB of resident memory."""

from __future__ import annotations

import subprocess
import sys

import pytest

SOLVER_MODULES = ("ortools", "pandas")


@pytest.mark.parametrize("door", ["admission.server", "scheduler.extender.server"])
def test_a_door_that_places_greedily_never_loads_the_solver(door: str) -> None:
    probe = (f"import sys, {door}\n"
             f"print(','.join(sorted(m for m in {SOLVER_MODULES!r} if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"{door} loads {done.stdout.strip()}"


def test_the_controller_still_finds_the_solver_when_it_places() -> None:
    """The lazy import is not a lost one: placing a preferred pod set runs CP-SAT."""
    probe = ("import sys\n"
             "from scheduler.core.placement import planner\n"
             "assert 'ortools' not in sys.modules\n"
             "from scheduler.core.placement import cpsat\n"
             "print('ortools' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
