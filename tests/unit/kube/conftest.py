"""The phase-test harness (``test_phases.Harness``: a seeded in-memory API server and a
controller on a fake clock) as a fixture for every test module here."""

from __future__ import annotations

import pytest

from tests.unit.kube.test_phases import Harness


@pytest.fixture(name="harness")
def harness_fixture() -> Harness:
    return Harness()
