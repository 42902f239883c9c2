"""The controller's migration of PreemptionLimits from ``kueue.x-k8s.io/v1alpha1`` to
``toposched.io/v1alpha1`` (``adapter/limit_migration.py`` says what it does).

It runs in every pass, before the admission cycle reads the limits, so that an upgrade never
leaves a limit that was in force unread for a moment (a limit lost is preemption widened
silently): each old object without a namesake in ``toposched.io`` is created there, through the
writer (leader only), and the step is logged once and told as an Event on the new object
(``PreemptionLimitMigrated``). The old objects are only read: neither they nor their CRD are
deleted or changed; ``toposched migrate-preemption-limits`` prints the same report for an admin.
"""

from __future__ import annotations

import logging

from scheduler.adapter.limit_migration import COPY, DONE, migration_plan
from scheduler.k8s.informer import PREEMPTION_LIMITS
from scheduler.kube.cache import ClusterCache
from scheduler.kube.writer import Writer

log = logging.getLogger(__name__)

MIGRATED_EVENT = "PreemptionLimitMigrated"


class LimitMigration:
    def __init__(self, cache: ClusterCache, writer: Writer) -> None:
        self.cache = cache
        self.writer = writer
        self._told: set[str] = set()  # lines logged already

    def run(self) -> None:
        legacy, current = self.cache.legacy_preemption_limits, self.cache.preemption_limits
        if legacy is None or current is None or not legacy.items():
            return
        if current.absent:
            self._tell(f"{len(legacy.items())} PreemptionLimit(s) in kueue.x-k8s.io/v1alpha1 are not read: the "
                       "toposched.io PreemptionLimit CRD is not installed (the chart installs it; "
                       "deploy/crds/toposched-preemption-limits.yaml)")
            return
        for step in migration_plan(legacy.items(), current.items()):
            if step.action == DONE:
                continue  # copied before (by this controller, an earlier one or the command): told then
            if step.action != COPY:
                self._tell(step.line())
                continue
            created = self.writer.create(PREEMPTION_LIMITS, step.body, None, current)
            if created is not None:
                self._tell(step.line())
                self.writer.event(created, "Normal", MIGRATED_EVENT, step.line())

    def _tell(self, line: str) -> None:
        if line not in self._told:
            self._told.add(line)
            log.warning("%s", line)


__all__ = ["LimitMigration", "MIGRATED_EVENT"]
