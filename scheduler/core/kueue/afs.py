"""Kueue's Admission Fair Sharing (v0.17, gate ``AdmissionFairSharing`` beta, on): inside a
ClusterQueue whose ``spec.admissionScope.admissionMode`` is ``UsageBasedAdmissionFairSharing``
(and the Configuration has ``admissionFairSharing``), pending workloads are ordered by their
LocalQueue's usage first (lower first), then by Kueue's usual order (priority, timestamp).

The usage of a LocalQueue (Kueue ``workload.CalcFSUsageFromResources``) is
``sum(resourceWeight[r] * (consumed[r] + penalty[r])) / lqWeight`` (resource weight default 1,
LocalQueue ``spec.fairSharing.weight`` default 1), quantities as plain numbers (``cpu: 2`` =
2.0). ``consumed`` is the LocalQueue's ``status.fairSharing.admissionFairSharingStatus
.consumedResources``: an exponential moving average of its admitted usage with half-life
``usageHalfLifeTime``, sampled every ``usageSamplingInterval`` (Kueue
``CalculateDecayedConsumed``). ``penalty`` is the entry penalty of workloads admitted since
the last sample (``CalculateEntryPenalty``: total requests times the alpha of one sampling
interval), so a LocalQueue that just got a workload in does not win the next one too.

The shell reads LocalQueue status and hands it in as plain data (``Snapshot.lq_usage``).
Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.core.config import DEFAULT_KUEUE_RELEASE, KUEUE_V019, KueueConfig
from scheduler.core.resources import uses_milli_units
from scheduler.core.workload import WorkloadSpec

USAGE_BASED = "UsageBasedAdmissionFairSharing"
NO_AFS = "NoAdmissionFairSharing"
GATE = "AdmissionFairSharing"


@dataclass(frozen=True)
class LocalQueueUsage:
    """One LocalQueue's AFS state. Quantities are plain numbers in Kueue's units (cpu cores)."""

    consumed: Mapping[str, float] = field(default_factory=dict)
    penalty: Mapping[str, float] = field(default_factory=dict)
    weight: float = 1.0  # spec.fairSharing.weight
    last_update: float | None = None  # admissionFairSharingStatus.lastUpdate (epoch seconds)


def enabled(config: KueueConfig) -> bool:
    """Kueue ``afs.Enabled``: the Configuration has ``admissionFairSharing`` and the gate is on."""
    return config.admission_fair_sharing.enabled and config.feature_gates.enabled(GATE)


def orders_by_usage(config: KueueConfig, admission_mode: str) -> bool:
    """Kueue ``afs.ResourceWeights``: enabled and the ClusterQueue opts in."""
    return enabled(config) and admission_mode == USAGE_BASED


def alpha_rate(sampling_s: float, half_life_s: float) -> float:
    """Weight of the newest sample; 0 when the half-life is 0 (no decay state kept)."""
    if half_life_s == 0:
        return 0.0
    return 1.0 - math.pow(0.5, sampling_s / half_life_s)


def mul_by_float(resources: Mapping[str, float], factor: float) -> dict[str, float]:
    """Kueue ``resource.MulByFloat``: each quantity's milli-value times ``factor``, truncated
    to a whole milli-unit."""
    return {name: math.trunc(round(value * 1000) * factor) / 1000 for name, value in resources.items()}


def entry_penalty(requests: Mapping[str, float], config: KueueConfig) -> dict[str, float]:
    """Kueue ``CalculateEntryPenalty``: total requests times alpha(samplingInterval, halfLife)."""
    afs = config.admission_fair_sharing
    return mul_by_float(requests, alpha_rate(afs.usage_sampling_interval_s, afs.usage_half_life_time_s))


def decayed_consumed(old: Mapping[str, float], new: Mapping[str, float], elapsed_s: float,
                     half_life_s: float) -> dict[str, float]:
    """``old * (1 - alpha) + new * alpha`` with alpha for ``elapsed_s``; keys of both kept."""
    alpha = alpha_rate(elapsed_s, half_life_s)
    return add_resources(mul_by_float(old, 1 - alpha), mul_by_float(new, alpha))


def usage_value(lq: LocalQueueUsage, resource_weights: Mapping[str, float],
                release: str = DEFAULT_KUEUE_RELEASE) -> float:
    """Kueue ``CalcFSUsageFromResources`` (resources summed in sorted order). A weight of 0 or
    less: from v0.19.1 (#13559, ``admissionfairsharing.CalculateUsage``) +Inf, so the LocalQueue
    sorts last; v0.17.0 divides as Go does, and an idle queue's 0/0 = NaN sorts it first."""
    merged = dict(lq.consumed)
    for name, value in lq.penalty.items():
        merged[name] = merged.get(name, 0.0) + value
    total = 0.0
    for name in sorted(merged):
        total += resource_weights.get(name, 1.0) * merged[name]
    if release == KUEUE_V019 and lq.weight <= 0:
        return math.inf
    if lq.weight == 0:  # Go float division: x/0 = +Inf, 0/0 = NaN (sorts first in cmp.Compare)
        return math.inf if total > 0 else (-math.inf if total < 0 else math.nan)
    return total / lq.weight


def local_queue_usage(usages: Mapping[str, LocalQueueUsage], lq_key: str, config: KueueConfig) -> float:
    """The usage of LocalQueue ``ns/name`` (no state yet = 0, weight 1)."""
    return usage_value(usages.get(lq_key, LocalQueueUsage()), config.admission_fair_sharing.resource_weights,
                       config.release)


def sort_usage(usage: float) -> float:
    """Usage as a sort key: NaN first, as Go's ``cmp.Compare`` orders it."""
    return -math.inf if math.isnan(usage) else usage


def order_usage(config: KueueConfig, usages: Mapping[str, LocalQueueUsage], admission_mode: str,
                lq_key: str) -> float:
    """The first part of the queue-order key of a workload of LocalQueue ``lq_key`` in a
    ClusterQueue with ``admission_mode``: its LocalQueue's usage when AFS orders it, else 0."""
    if not orders_by_usage(config, admission_mode):
        return 0.0
    return sort_usage(local_queue_usage(usages, lq_key, config))


_SI_SUFFIXES = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, ""))


def format_decimal_si(value: float) -> str:
    """A quantity of Kueue's ``NewMilliQuantity(.., DecimalSI)`` in Kubernetes' canonical form
    (``1500m``, ``2``, ``3k``)."""
    milli = round(value * 1000)
    if milli == 0:
        return "0"
    for exponent, suffix in _SI_SUFFIXES:
        if milli % 10 ** (exponent + 3) == 0:
            return f"{milli // 10 ** (exponent + 3)}{suffix}"
    return f"{milli}m"


def kueue_units(canonical: Mapping[str, int]) -> dict[str, float]:
    """toposched's canonical integers (cpu millicores) as Kueue's plain numbers (cpu cores)."""
    return {name: (value / 1000 if uses_milli_units(name) else float(value)) for name, value in canonical.items()}


def total_requests(usage: Mapping[tuple[str, str], int]) -> dict[str, float]:
    """A reservation's usage (flavor, resource) -> amount summed per resource, Kueue's units."""
    out: dict[str, int] = {}
    for (_, resource), amount in usage.items():
        out[resource] = out.get(resource, 0) + amount
    return kueue_units(out)


def add_resources(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0.0) + value
    return out


class _Admitted(Protocol):
    @property
    def spec(self) -> WorkloadSpec: ...
    @property
    def usage(self) -> Mapping[tuple[str, str], int]: ...


def with_entry_penalties(usages: Mapping[str, LocalQueueUsage], admitted: Iterable[_Admitted],
                         config: KueueConfig) -> dict[str, LocalQueueUsage]:
    """The usages after ``admitted`` got their quota in this pass: each adds its entry penalty to
    its LocalQueue (Kueue's scheduler pushes it when it assumes the workload)."""
    out = dict(usages)
    for w in admitted:
        key = f"{w.spec.namespace}/{w.spec.queue_name}"
        lq = out.get(key, LocalQueueUsage())
        penalty = add_resources(lq.penalty, entry_penalty(total_requests(w.usage), config))
        out[key] = LocalQueueUsage(lq.consumed, penalty, lq.weight, lq.last_update)
    return out


@dataclass(frozen=True)
class Sample:
    """A new ``admissionFairSharingStatus``: ``consumedResources`` and ``lastUpdate``."""

    consumed: dict[str, float]
    last_update: float


def sample(state: LocalQueueUsage | None, admitted: Mapping[str, float], newly_admitted: Mapping[str, float],
           now: float, config: KueueConfig) -> Sample | None:
    """The LocalQueue controller's AFS step (Kueue ``localqueue_controller.go`` and the workload
    controller's ``updateAfsConsumedUsage``), None when nothing is due.

    ``state``: the LocalQueue's status (None: no ``admissionFairSharingStatus`` yet — it starts
    from the current admitted usage at ``now``). ``admitted``: the usage of its admitted
    workloads now. ``newly_admitted``: the summed requests of workloads admitted since
    ``lastUpdate`` (their entry penalty is folded into ``consumed`` right away, not after the
    sampling interval). Otherwise a sample is due every ``usageSamplingInterval``; a half-life
    of 0 keeps ``consumed`` empty."""
    afs = config.admission_fair_sharing
    if state is None or state.last_update is None:
        return Sample({} if afs.usage_half_life_time_s == 0 else dict(admitted), now)
    elapsed = max(0.0, now - state.last_update)
    if elapsed < afs.usage_sampling_interval_s and not newly_admitted:
        return None
    if afs.usage_half_life_time_s == 0:
        return Sample({}, now)
    consumed = decayed_consumed(state.consumed, admitted, elapsed, afs.usage_half_life_time_s)
    return Sample(add_resources(consumed, entry_penalty(newly_admitted, config)), now)
