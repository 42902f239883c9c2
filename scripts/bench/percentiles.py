"""The percentile the benches print: the value at rank ``round(q * (n - 1))`` of the sorted
samples (no interpolation), NaN for no samples.

Shared by the api, placement, scale-series and webhook benches, which used this convention each
in its own copy. Three others keep their own on purpose, because their published figures were
taken with it: extender.py (rank ``int(q * n)``), admission_e2e.py (``statistics.quantiles``,
inclusive) and the simulator (nearest rank, ``scheduler/sim/scenario.py``); kueue_perf.py prints
the runner's own statistics.
"""

from __future__ import annotations

from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """``q`` in [0, 1]: 0.5 is the median, 0.99 the p99."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
