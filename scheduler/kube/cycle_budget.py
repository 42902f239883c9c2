"""How many Kueue scheduling cycles one admission pass runs (``core.cycle.run_cycles``).

Each pass pays for its snapshot, its phases and a wait for every one of its writes, so the more
heads a pass admits, the fewer passes a backlog needs (issue 34: a burst of 1,100 jobs was
admitted 32 a pass, 8 cycles of 4 ClusterQueues, with a round of write waits between). The pass
runs at least ``minimum`` cycles (``--cycles-per-pass``) and, with a ``budget_s``
(``--cycle-budget-ms``), as many more as the time one cycle took in the last pass that admitted
says fit in the budget, up to :data:`MAX_CYCLES_PER_PASS`. ``run_cycles`` stops by itself once
a cycle admits nothing, so an idle or quota-bound pass costs what it did. The count is chosen
before the cycles run and they decide as always: the budget changes how many heads one pass
takes, never which.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.core.kueue.decisions import Admit, Decision
from scheduler.kube.defaults import DEFAULT_CYCLES_PER_PASS

# A pass writes what its cycles admitted only once they are all decided: this bounds the writes
# one pass holds back (4 ClusterQueues x 256 = 1,024 admissions) whatever the estimate says.
MAX_CYCLES_PER_PASS = 256


@dataclass
class CycleBudget:
    minimum: int = DEFAULT_CYCLES_PER_PASS
    budget_s: float = 0.0  # 0: exactly ``minimum`` cycles a pass
    seconds_per_cycle: float | None = None  # from the last pass that admitted

    def cycles(self) -> int:
        """The most cycles the next pass may run."""
        floor = max(1, self.minimum)
        if self.budget_s <= 0 or self.seconds_per_cycle is None:
            return floor
        fits = int(self.budget_s / max(self.seconds_per_cycle, 1e-6))
        return max(floor, min(MAX_CYCLES_PER_PASS, fits))

    def observe(self, seconds: float, decisions: Sequence[Decision]) -> None:
        """The cycles of a pass took ``seconds`` and decided ``decisions``. A cycle admits at
        most one head per ClusterQueue, so the ClusterQueue with the most admissions is a lower
        bound on the cycles run: the time per cycle is over-estimated, never under. A pass that
        admitted nothing ran one or two cycles and says nothing about a backlog's."""
        per_queue = Counter(d.cluster_queue for d in decisions if isinstance(d, Admit))
        if per_queue:
            self.seconds_per_cycle = seconds / max(per_queue.values())
