"""The pending Workloads' queues kept from one pass to the next (issue 18, item 4).

A cycle takes one head per ClusterQueue from the pending workloads grouped by LocalQueue, each
group in Kueue's order (``scheduler.core.kueue.queueing.PendingQueues``). Building them sorts every
pending workload; at 50,000 pending that was most of a warm cycle, although between two passes
only a few workloads come, go or change. :class:`QueueMemo` keeps the last pass's queues and
moves only those: a workload is unchanged when its conversion is the very object of the last
pass (``VersionMemo`` hands out the same object while the resourceVersion stays), so the rest
keep their place. A change of priority classes, or more changes than a sort is worth, builds
them afresh. The result equals a fresh build (tests/unit/adapter/test_pending_queues.py); the
cycle uses it only for the pending sequence it was made for (``PendingQueues.describes``).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence

from scheduler.core.kueue.queueing import (
    LocalOrder,
    PendingQueues,
    PendingWorkload,
    Queued,
    local_order,
    local_queue_of,
    pending_queues,
)


def _order(item: Queued) -> LocalOrder:
    return item[0]


class QueueMemo:
    """The last queues and the workloads they hold by key, replaced as a pair (two callers at
    once each build from a consistent pair; the later one is kept)."""

    def __init__(self) -> None:
        self._last: tuple[PendingQueues, dict[str, PendingWorkload]] | None = None

    def queues(self, pending: Sequence[PendingWorkload], workload_priority_classes: Mapping[str, int],
               priority_classes: Mapping[str, int]) -> PendingQueues:
        current = {pw.key: pw for pw in pending}
        if len(current) != len(pending):  # one key twice (not from an API server): nothing to key on
            return pending_queues(pending, workload_priority_classes, priority_classes)
        built = self._moved(pending, current, workload_priority_classes, priority_classes)
        if built is None:
            built = pending_queues(pending, workload_priority_classes, priority_classes)
        self._last = (built, current)
        return built

    def _moved(self, pending: Sequence[PendingWorkload], current: dict[str, PendingWorkload],
               wpc: Mapping[str, int], pc: Mapping[str, int]) -> PendingQueues | None:
        """The last queues with the changes moved in, or None when a fresh build is due."""
        last = self._last
        if last is None:
            return None
        queues, before = last
        if queues.workload_priority_classes != wpc or queues.priority_classes != pc:
            return None  # every workload's priority may have moved
        gone = [pw for key, pw in before.items() if current.get(key) is not pw]
        came = [pw for key, pw in current.items() if before.get(key) is not pw]
        if len(gone) + len(came) > max(64, len(pending) // 8):
            return None  # a sort of everything is cheaper than so many list moves
        groups = dict(queues.by_local_queue)
        edited: dict[str, list[Queued]] = {}
        for pw in gone:
            items = edited.setdefault(local_queue_of(pw), list(groups.get(local_queue_of(pw), ())))
            at = bisect_left(items, local_order(pw, wpc, pc), key=_order)
            if at == len(items) or items[at][1] is not pw:
                return None  # not where its order puts it: do not trust these queues
            del items[at]
        for pw in came:
            items = edited.setdefault(local_queue_of(pw), list(groups.get(local_queue_of(pw), ())))
            insort(items, (local_order(pw, wpc, pc), pw), key=_order)
        for lq, items in edited.items():
            if items:
                groups[lq] = tuple(items)
            else:
                groups.pop(lq, None)
        return PendingQueues(pending, wpc, pc, groups)
