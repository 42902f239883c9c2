"""Kueue's configurable preemption (KEP-13396 ``PreemptionConfig``, alpha in Kueue v0.20) and
toposched's preemption limits (``PreemptionLimit``, ``toposched.io/v1alpha1``: KEP-16925's idea,
in no Kueue release) as plain data, and the two questions the cycle
and the defragmentation executor ask of them:

* :func:`select_candidates`: which admitted workloads the rules of the preemptor's
  PreemptionConfig make preemption candidates, for the triggers that hold now (``Always``;
  ``InsufficientQuota`` while the quota does not fit; ``QuotaFeasibleAndInsufficientTopology``
  once it does and only the topology keeps the preemptor out). A rule applies when its
  ``preemptorSelector`` matches the preemptor's labels and its ``preemptorPriorityClassSelector``
  the preemptor's priority class; a candidate is selected by any of its
  ``candidateSelectors``: inside the ``scope`` (same LocalQueue, same ClusterQueue, same parent
  Cohort, same Cohort tree, any ClusterQueue), its ClusterQueue and Workload labels matched,
  every ``numericLabels`` constraint satisfied and the ``priority`` constraint (comparison,
  class names) true. Candidates
  a rule selects are preempted regardless of ``spec.preemption`` and carry Kueue's reason
  ``ConfigurablePreemption`` (``targets.CONFIGURABLE_PREEMPTION``).
* :func:`blocking_limit`: the first PreemptionLimit that a set of evictions would exceed within
  its sliding window (``Global``, ``PreemptingClusterQueue``, ``PreemptedClusterQueue``,
  ``PreemptedWorkload``; ``limit: 0`` blocks every preemption in scope).

Both live beside the strategies they configure (``clear_domain.py``, ``strategies.py``:
``Ask.clear``). Restated from Kueue main's ``apis/kueue/v1alpha1/preemptionconfig_types.go`` and
``pkg/scheduler/preemption/config`` (v0.20), and toposched's ``PreemptionLimitSpec``; toposched
applies them to its own preemptions (domain clearing and defragmentation), not to Kueue's
classical preemption, as Kueue applies limits to configurable preemptions only
(docs/quota-and-preemption.md, "Configurable preemption").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.kueue.admitted import AdmittedWorkload
from scheduler.core.kueue.queueing import ANN_PRIORITY_BOOST
from scheduler.core.kueue.quota import ClusterQueueSpec, CohortSpec
from scheduler.core.preemption.cost import cost_of
from scheduler.core.preemption.plan import Attempt
from scheduler.core.preemption.targets import Target
from scheduler.core.selectors import EVERYTHING, LabelSelector
from scheduler.core.workload import WorkloadSpec

ALWAYS = "Always"
INSUFFICIENT_QUOTA = "InsufficientQuota"
INSUFFICIENT_TOPOLOGY = "QuotaFeasibleAndInsufficientTopology"
TRIGGERS = (ALWAYS, INSUFFICIENT_QUOTA, INSUFFICIENT_TOPOLOGY)

WITHIN_LOCAL_QUEUE = "WithinLocalQueue"
WITHIN_CLUSTER_QUEUE = "WithinClusterQueue"
WITHIN_PARENT_COHORT = "WithinParentCohort"
WITHIN_COHORT_TREE = "WithinCohortTree"
ANY_CLUSTER_QUEUE = "AnyClusterQueue"
SCOPES = (WITHIN_LOCAL_QUEUE, WITHIN_CLUSTER_QUEUE, WITHIN_PARENT_COHORT, WITHIN_COHORT_TREE, ANY_CLUSTER_QUEUE)

COMPARISONS: Mapping[str, Callable[[int, int], bool]] = {
    "LessThan": lambda cand, pre: cand < pre,
    "GreaterThan": lambda cand, pre: cand > pre,
    "LessThanOrEqual": lambda cand, pre: cand <= pre,
    "GreaterThanOrEqual": lambda cand, pre: cand >= pre,
}

GLOBAL = "Global"
PREEMPTING_CLUSTER_QUEUE = "PreemptingClusterQueue"
PREEMPTED_CLUSTER_QUEUE = "PreemptedClusterQueue"
PREEMPTED_WORKLOAD = "PreemptedWorkload"
LIMIT_SCOPES = (GLOBAL, PREEMPTING_CLUSTER_QUEUE, PREEMPTED_CLUSTER_QUEUE, PREEMPTED_WORKLOAD)
# The preemptor's condition and Event when a limit holds a preemption back (KEP-16925).
BLOCKED_CONDITION = "PreemptionBlockedByLimit"
BLOCKED_REASON = "PreemptionLimitExceeded"
THROTTLED_EVENT = "PreemptionThrottled"


def blocked_message(limit: str) -> str:
    return f"Preemption was blocked by PreemptionLimit {limit}"


@dataclass(frozen=True)
class NumericLabel:
    """``numericLabels[]``: the candidate's integer label ``key`` (``fallback`` when absent or
    not an integer; neither: the candidate is not comparable, so not selected), compared with
    the preemptor's by ``comparison`` and bounded by ``min_value`` / ``max_value``."""

    key: str
    fallback: int | None = None
    comparison: str | None = None
    min_value: int | None = None
    max_value: int | None = None

    def value(self, labels: Mapping[str, str]) -> int | None:
        text = labels.get(self.key)
        try:
            return int(text) if text is not None else self.fallback
        except ValueError:
            return self.fallback

    def allows(self, candidate: Mapping[str, str], preemptor: Mapping[str, str]) -> bool:
        cand = self.value(candidate)
        if cand is None:
            return False
        if self.min_value is not None and cand < self.min_value:
            return False
        if self.max_value is not None and cand > self.max_value:
            return False
        if self.comparison is None:
            return True
        pre = self.value(preemptor)
        return pre is not None and COMPARISONS[self.comparison](cand, pre)


BASE = "Base"  # priority without the kueue.x-k8s.io/priority-boost annotation
BOOSTED = "Boosted"  # the effective priority (what the queues sort by)


@dataclass(frozen=True)
class PriorityClassSelector:
    """Kueue's ``PreemptionConfigPriorityClassSelector`` (``filters.MatchesPriorityClassSelector``):
    a workload's priority class name ("" none) must be one of ``match_names`` (when given) and
    none of ``not_match_names``."""

    match_names: tuple[str, ...] = ()
    not_match_names: tuple[str, ...] = ()

    def matches(self, priority_class: str | None) -> bool:
        name = priority_class or ""
        if self.match_names and name not in self.match_names:
            return False
        return name not in self.not_match_names


@dataclass(frozen=True)
class CandidateSelector:
    """``candidateSelectors[]``: the ``scope``; the candidate ClusterQueue's and Workload's
    labels (``clusterQueueSelector``, ``labelSelector``; None accepts all); ``numericLabels``;
    ``priority`` (``comparison`` of the candidate's priority with the preemptor's, ``Base`` or
    ``Boosted``, and the candidate's priority class names)."""

    scope: str
    numeric_labels: tuple[NumericLabel, ...] = ()
    priority_comparison: str | None = None  # a key of COMPARISONS
    priority_mode: str = BOOSTED
    cluster_queue_selector: LabelSelector | None = None
    label_selector: LabelSelector | None = None
    priority_classes: PriorityClassSelector | None = None  # priority.matchNames / notMatchNames


@dataclass(frozen=True)
class Rule:
    name: str
    trigger: str
    candidate_selectors: tuple[CandidateSelector, ...] = ()  # none: the rule selects nothing
    preemptor_selector: LabelSelector = EVERYTHING  # unset: every preemptor
    preemptor_priority_classes: PriorityClassSelector | None = None  # unset: every preemptor

    def applies_to(self, preemptor: WorkloadSpec) -> bool:
        """Kueue's ``matchesPreemptor``: the preemptor's labels, then its priority class."""
        if not self.preemptor_selector.matches(preemptor.labels):
            return False
        return self.preemptor_priority_classes is None or self.preemptor_priority_classes.matches(
            preemptor.priority_class)


@dataclass(frozen=True)
class PreemptionConfigSpec:
    name: str
    rules: tuple[Rule, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)  # what PreemptionLimit.configSelector matches


@dataclass(frozen=True)
class LimitSpec:
    """A ``PreemptionLimit``: at most ``limit`` evictions per key of ``scope`` in any
    ``window_s``. ``config_selector`` None: every preemption toposched makes (with or without a
    PreemptionConfig); set: only those under a PreemptionConfig whose labels it matches.
    ``cluster_queue_selector`` None: every ClusterQueue (the preemptor's for Global and
    PreemptingClusterQueue, the victim's for the other two)."""

    name: str
    scope: str
    limit: int
    window_s: float
    config_selector: LabelSelector | None = None
    cluster_queue_selector: LabelSelector | None = None


@dataclass(frozen=True)
class PreemptionEvent:
    """One confirmed (preemptor, victim) eviction toposched made (domain clearing, defrag)."""

    at: float
    preemptor_cluster_queue: str
    preempted_cluster_queue: str
    preempted_workload: str  # namespace/name
    config: str = ""  # the PreemptionConfig it was made under; "" none


@dataclass(frozen=True)
class ConfiguredPreemption:
    """The PreemptionConfigs, which one each ClusterQueue references, the ClusterQueues' labels
    (for the limits' selectors), the PreemptionLimits and the evictions they count. Empty (the
    default): toposched's own defaults apply."""

    configs: Mapping[str, PreemptionConfigSpec] = field(default_factory=dict)
    cluster_queue_config: Mapping[str, str] = field(default_factory=dict)  # ClusterQueue -> config name
    cluster_queue_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    limits: tuple[LimitSpec, ...] = ()
    events: tuple[PreemptionEvent, ...] = ()

    def config_of(self, cluster_queue: str) -> PreemptionConfigSpec | None:
        name = self.cluster_queue_config.get(cluster_queue)
        return self.configs.get(name) if name else None


NO_CONFIGURED_PREEMPTION = ConfiguredPreemption()


def _cohort_root(cohort: str | None, cohorts: Mapping[str, CohortSpec]) -> str | None:
    seen: set[str] = set()
    while cohort is not None and cohort in cohorts and cohorts[cohort].parent and cohort not in seen:
        seen.add(cohort)
        cohort = cohorts[cohort].parent
    return cohort


def in_scope(scope: str, preemptor: WorkloadSpec, preemptor_cq: str, candidate: AdmittedWorkload,
             cluster_queues: Mapping[str, ClusterQueueSpec], cohorts: Mapping[str, CohortSpec]) -> bool:
    """Kueue's ``PreemptionConfigPreemptionQueueScope``; the preemptor's own ClusterQueue is in
    every scope wider than the LocalQueue, even when it has no Cohort."""
    if scope == ANY_CLUSTER_QUEUE:
        return True
    if scope == WITHIN_LOCAL_QUEUE:
        return (candidate.spec.namespace, candidate.spec.queue_name) == (preemptor.namespace, preemptor.queue_name)
    if candidate.cluster_queue == preemptor_cq:
        return True
    if scope == WITHIN_CLUSTER_QUEUE:
        return False
    mine = cluster_queues.get(preemptor_cq)
    theirs = cluster_queues.get(candidate.cluster_queue)
    if mine is None or theirs is None or mine.cohort is None or theirs.cohort is None:
        return False
    if scope == WITHIN_PARENT_COHORT:
        return mine.cohort == theirs.cohort
    return _cohort_root(mine.cohort, cohorts) == _cohort_root(theirs.cohort, cohorts)  # WithinCohortTree


def base_priority(priority: int, spec: WorkloadSpec) -> int:
    """``priority`` without the workload's ``kueue.x-k8s.io/priority-boost``."""
    try:
        return priority - int(spec.annotations.get(ANN_PRIORITY_BOOST) or 0)
    except ValueError:
        return priority


def _selects(sel: CandidateSelector, preemptor: WorkloadSpec, preemptor_cq: str, preemptor_priority: int,
             cand: AdmittedWorkload, cand_priority: int, cluster_queues: Mapping[str, ClusterQueueSpec],
             cohorts: Mapping[str, CohortSpec], cq_labels: Mapping[str, Mapping[str, str]]) -> bool:
    if not in_scope(sel.scope, preemptor, preemptor_cq, cand, cluster_queues, cohorts):
        return False
    if sel.cluster_queue_selector is not None and not sel.cluster_queue_selector.matches(
            cq_labels.get(cand.cluster_queue, {})):
        return False
    if sel.label_selector is not None and not sel.label_selector.matches(cand.spec.labels):
        return False
    if sel.priority_classes is not None and not sel.priority_classes.matches(cand.spec.priority_class):
        return False
    if sel.priority_comparison is not None:
        mine, theirs = preemptor_priority, cand_priority
        if sel.priority_mode == BASE:
            mine, theirs = base_priority(mine, preemptor), base_priority(theirs, cand.spec)
        if not COMPARISONS[sel.priority_comparison](theirs, mine):
            return False
    return all(n.allows(cand.spec.labels, preemptor.labels) for n in sel.numeric_labels)


def select_candidates(config: PreemptionConfigSpec, triggers: Sequence[str], preemptor: WorkloadSpec,
                      preemptor_cq: str, preemptor_priority: int, candidates: Sequence[AdmittedWorkload],
                      priority: Callable[[AdmittedWorkload], int], cluster_queues: Mapping[str, ClusterQueueSpec],
                      cohorts: Mapping[str, CohortSpec],
                      cq_labels: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, tuple[str, ...]]:
    """Candidate key -> the names of the rules (of the given ``triggers``) that select it.
    Workloads already being evicted, and the preemptor itself, are never selected."""
    rules = [r for r in config.rules if r.trigger in triggers and r.applies_to(preemptor)]
    out: dict[str, tuple[str, ...]] = {}
    for cand in candidates:
        if cand.evicted or cand.key == preemptor.key:
            continue
        cand_priority = priority(cand)
        names = tuple(r.name for r in rules if any(
            _selects(s, preemptor, preemptor_cq, preemptor_priority, cand, cand_priority, cluster_queues, cohorts,
                     cq_labels or {})
            for s in r.candidate_selectors))
        if names:
            out[cand.key] = names
    return out


def active_triggers(quota_fits: bool) -> tuple[str, ...]:
    """The triggers that hold for a preemptor: ``Always``, plus ``InsufficientQuota`` while its
    quota does not fit, or ``QuotaFeasibleAndInsufficientTopology`` once it does (then only the
    topology keeps it out)."""
    return (ALWAYS, INSUFFICIENT_TOPOLOGY) if quota_fits else (ALWAYS, INSUFFICIENT_QUOTA)


def _applies(limit: LimitSpec, config: str, config_labels: Mapping[str, str]) -> bool:
    if limit.config_selector is None:
        return True
    return bool(config) and limit.config_selector.matches(config_labels)


def _key(limit: LimitSpec, event: PreemptionEvent, cq_labels: Mapping[str, Mapping[str, str]]) -> str | None:
    """The key ``event`` counts under in ``limit`` (None: outside the limit's ClusterQueues)."""
    cq = event.preemptor_cluster_queue if limit.scope in (GLOBAL, PREEMPTING_CLUSTER_QUEUE) \
        else event.preempted_cluster_queue
    if limit.cluster_queue_selector is not None and not limit.cluster_queue_selector.matches(cq_labels.get(cq, {})):
        return None
    if limit.scope == GLOBAL:
        return GLOBAL
    if limit.scope == PREEMPTED_WORKLOAD:
        return event.preempted_workload
    return cq


def limit_counts(limit: LimitSpec, rules: ConfiguredPreemption, now: float) -> dict[str, int]:
    """Evictions per key inside ``limit``'s window ending at ``now`` (PreemptionLimit ``status.counts``)."""
    counts: dict[str, int] = {}
    for e in rules.events:
        if now - e.at >= limit.window_s or e.at > now:
            continue
        cfg = rules.configs.get(e.config)
        if not _applies(limit, e.config, cfg.labels if cfg else {}):
            continue
        key = _key(limit, e, rules.cluster_queue_labels)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    return counts


def blocking_limit(rules: ConfiguredPreemption, now: float, proposed: Sequence[PreemptionEvent]) -> LimitSpec | None:
    """The first limit (by name) that ``proposed`` evictions, made at ``now``, would exceed."""
    for limit in sorted(rules.limits, key=lambda lim: lim.name):
        counts = limit_counts(limit, rules, now)
        for e in proposed:
            cfg = rules.configs.get(e.config)
            if not _applies(limit, e.config, cfg.labels if cfg else {}):
                continue
            key = _key(limit, e, rules.cluster_queue_labels)
            if key is None:
                continue
            counts[key] = counts.get(key, 0) + 1
            if counts[key] > limit.limit:
                return limit
    return None


def configured_plan(rules: ConfiguredPreemption, plan: Sequence[Attempt], preemptor: WorkloadSpec,
                    preemptor_cq: str, preemptor_priority: int, admitted: Sequence[AdmittedWorkload],
                    priority: Callable[[AdmittedWorkload], int], quota_fits: bool,
                    cluster_queues: Mapping[str, ClusterQueueSpec],
                    cohorts: Mapping[str, CohortSpec]) -> tuple[list[Attempt], frozenset[str]]:
    """The domain-clearing plan with the candidates the preemptor ClusterQueue's PreemptionConfig
    selects (for the triggers that hold) added to every attempt after the policy's own, in
    Kueue's order; a plan of one attempt when the policy allows nothing. Also the keys the rules
    selected (preempted as ``ConfigurablePreemption``, whatever the policy says)."""
    config = rules.config_of(preemptor_cq)
    if config is None:
        return list(plan), frozenset()
    selected = select_candidates(config, active_triggers(quota_fits), preemptor, preemptor_cq, preemptor_priority,
                                 admitted, priority, cluster_queues, cohorts, rules.cluster_queue_labels)
    # the cheaper victim first (cost.py: lower priority, then more recently admitted), then UID
    extra = sorted((w for w in admitted if w.key in selected), key=lambda w: (cost_of(w, priority), w.uid))
    if not extra:
        return list(plan), frozenset()
    if not plan:
        return [Attempt(extra, True, None)], frozenset(selected)
    out = []
    for attempt in plan:
        have = {c.key for c in attempt.candidates}
        out.append(Attempt([*attempt.candidates, *(w for w in extra if w.key not in have)],
                           attempt.allow_borrowing, attempt.borrow_below_priority))
    return out, frozenset(selected)


def limit_blocking(rules: ConfiguredPreemption, now: float, preemptor_cq: str,
                   targets: Sequence[Target]) -> LimitSpec | None:
    """:func:`blocking_limit` of evicting ``targets`` (those not already being evicted) now."""
    if not rules.limits:
        return None
    config = rules.cluster_queue_config.get(preemptor_cq, "")
    proposed = [PreemptionEvent(now, preemptor_cq, t.workload.cluster_queue, t.workload.key, config)
                for t in targets if not t.workload.evicted]
    return blocking_limit(rules, now, proposed)
