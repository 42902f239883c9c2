"""Numeric flags checked the same way everywhere: finite, inside a range, one line otherwise.

argparse's ``type=float`` takes ``nan``, ``inf`` and ``-5`` as readily as ``5``; a simulation
then loops forever (``--failures-per-day inf``) or quietly does nothing (``nan``). Each command
checks its numbers with :func:`bounded` before using them.
"""

from __future__ import annotations

import math

from scheduler.errors import UserError

DAY_S = 86_400.0


def bounded(value: float, flag: str, low: float, high: float, unit: str = "") -> float:
    """``value`` when it is a finite number in [low, high]; else UserError naming the flag,
    the range and the value given."""
    if not (math.isfinite(value) and low <= value <= high):
        raise UserError(f"{flag}: must be a number from {low:g} to {high:g}{' ' + unit if unit else ''}, "
                        f"got {value}")
    return value
