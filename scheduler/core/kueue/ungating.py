"""Which gated pod of an admitted pod set goes to which topology domain: Kueue v0.17.0's topology
ungater (``pkg/controller/tas/topology_ungater.go``), on plain data.

A pod set admitted with a topology assignment has its pods held by the scheduling gate
``kueue.x-k8s.io/topology``; the ungater removes the gate from each and pins it to one assigned
domain through node-selector labels (every level of the assignment). The choice:

- **By rank**, when the pod set names a pod-index label and every live pod carries a valid rank:
  rank = index - offset (sub-grouped pod sets: index + child-job index x pods per child job -
  offset), each below the pod-set size, all distinct, and no already-released pod sits outside
  its rank's domain. The assignment's domains, in order, are expanded one slot per pod; rank r
  takes slot r.
- **Greedily** otherwise: count the released pods already in each domain (read from their node
  selectors), then hand the gated pods, in the given order, to the domains still short of their
  count.

Two pod sets sharing a ``podSetGroupName`` (a leader and its workers) share one rank space: the
smaller takes ranks from 0, the larger after it. A ``kueue.x-k8s.io/pod-index-offset`` annotation
on the pods shifts the ranks.

:func:`plan_ungating` returns the releases and one note per pod set where ranks could not be
used or the input was refused, so the shell can log why; it never releases a pod to a domain
outside the assignment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.core.kueue_names import ANN_POD_INDEX_OFFSET
from scheduler.core.placement.types import DomainAssignment

_UINT = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class GatedPodView:
    """A live (not Succeeded/Failed) pod of the pod set, as the ungater needs it."""

    name: str
    gated: bool  # still carries kueue.x-k8s.io/topology
    node_selector: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AdmittedPodSet:
    """One pod set of an admitted Workload: its admitted count, its topology assignment
    (levels, domains in stored order; None when admitted without TAS) and the rank labels of its
    topology request."""

    name: str
    count: int
    levels: tuple[str, ...] = ()
    domains: tuple[DomainAssignment, ...] | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    group_name: str | None = None


@dataclass(frozen=True)
class Release:
    """Remove the topology gate from ``pod`` and add ``node_labels`` to its nodeSelector."""

    pod_set: str
    pod: str
    node_labels: Mapping[str, str]


@dataclass(frozen=True)
class UngatePlan:
    releases: tuple[Release, ...]
    notes: tuple[str, ...] = ()


class RankError(ValueError):
    """Ranks cannot be used for this pod set; the message says why (Kueue logs it likewise)."""


def _domain_id(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(values)


def _read_uint_below(labels: Mapping[str, str], key: str, bound: int, pod: str) -> int:
    value = labels.get(key)
    if value is None:
        raise RankError(f'label not found: no label "{key}" for Pod "{pod}"')
    if not _UINT.fullmatch(value):
        raise RankError(f'incorrect label value "{value}" for Pod "{pod}": invalid unsigned integer')
    number = int(value)
    if number >= bound:
        raise RankError(f'incorrect label value "{value}" for Pod "{pod}": value should be less than {bound}')
    return number


def rank_offsets(pod_sets: Sequence[AdmittedPodSet]) -> dict[str, tuple[int, int]]:
    """pod-set name -> (rank offset, rank bound) before any pod-index-offset annotation."""
    groups: dict[str, list[AdmittedPodSet]] = {}
    for i, ps in enumerate(pod_sets):
        groups.setdefault(ps.group_name if ps.group_name is not None else f"#{i}", []).append(ps)
    out: dict[str, tuple[int, int]] = {}
    for members in groups.values():
        if len(members) > 1:
            smaller, larger = members[0], members[1]
            if smaller.count > larger.count:
                smaller, larger = larger, smaller
            out[smaller.name] = (0, smaller.count)
            out[larger.name] = (smaller.count, larger.count + smaller.count)
        else:
            out[members[0].name] = (0, members[0].count)
    return out


def _slots(domains: Sequence[DomainAssignment]) -> list[tuple[str, ...]]:
    return [_domain_id(d.values) for d in domains for _ in range(d.count)]


def _ranks(ps: AdmittedPodSet, pods: Sequence[GatedPodView], offset: int, bound: int) -> dict[int, GatedPodView]:
    assert ps.pod_index_label is not None
    size = ps.count
    sub_size = size
    if ps.sub_group_index_label is not None:
        if not ps.sub_group_count:
            raise RankError("sub-group count missing")
        sub_size = size // ps.sub_group_count
    out: dict[int, GatedPodView] = {}
    for pod in pods:
        index = _read_uint_below(pod.labels, ps.pod_index_label, bound, pod.name)
        rank = index - offset
        if ps.sub_group_index_label is not None:
            job = _read_uint_below(pod.labels, ps.sub_group_index_label, ps.sub_group_count or 0, pod.name)
            if index >= sub_size:
                raise RankError(f'pod index {index} of Pod "{pod.name}" exceeds the single Job size: {sub_size}')
            rank = index + job * sub_size - offset
        if rank >= size:
            raise RankError(f'rank {rank} of Pod "{pod.name}" exceeds PodSet size {size}')
        if rank < 0:
            raise RankError(f'rank {rank} of Pod "{pod.name}" is below 0')
        if rank in out:
            raise RankError(f'conflicting rank {rank} found for pod "{pod.name}"')
        out[rank] = pod
    return out


def _by_rank(ps: AdmittedPodSet, pods: Sequence[GatedPodView], offset: int, bound: int,
             slots: list[tuple[str, ...]]) -> list[tuple[GatedPodView, tuple[str, ...]]]:
    ranked = _ranks(ps, pods, offset, bound)
    for rank, pod in ranked.items():
        if rank >= len(slots):
            raise RankError(f'rank {rank} of Pod "{pod.name}" has no slot in the topology assignment')
        if not pod.gated:
            actual = _domain_id([pod.node_selector.get(level, "") for level in ps.levels])
            if actual != slots[rank]:
                raise RankError(f'running Pod "{pod.name}" (rank {rank}) is in domain {list(actual)}, its rank\'s '
                                f"domain is {list(slots[rank])}")
    return [(pod, slots[rank]) for rank, pod in sorted(ranked.items()) if pod.gated]


def _greedy(ps: AdmittedPodSet, pods: Sequence[GatedPodView],
            domains: Sequence[DomainAssignment]) -> list[tuple[GatedPodView, tuple[str, ...]]]:
    gated = [p for p in pods if p.gated]
    placed: dict[tuple[str, ...], int] = {}
    for pod in pods:
        if not pod.gated:
            key = _domain_id([pod.node_selector.get(level, "") for level in ps.levels])
            placed[key] = placed.get(key, 0) + 1
    out: list[tuple[GatedPodView, tuple[str, ...]]] = []
    for domain in domains:
        key = _domain_id(domain.values)
        room = max(domain.count - placed.get(key, 0), 0)
        take = min(room, len(gated) - len(out))
        out.extend((pod, key) for pod in gated[len(out):len(out) + take])
    return out


def plan_ungating(pod_sets: Sequence[AdmittedPodSet],
                  pods_by_pod_set: Mapping[str, Sequence[GatedPodView]]) -> UngatePlan:
    """The releases for one admitted Workload (see the module doc)."""
    offsets = rank_offsets(pod_sets)
    releases: list[Release] = []
    notes: list[str] = []
    for ps in pod_sets:
        if ps.domains is None:
            continue
        pods = list(pods_by_pod_set.get(ps.name, ()))
        offset, bound = offsets[ps.name]
        if pods and ANN_POD_INDEX_OFFSET in pods[0].annotations:
            raw = pods[0].annotations[ANN_POD_INDEX_OFFSET]
            if not re.fullmatch(r"[+-]?[0-9]+", raw):
                notes.append(f"pod set {ps.name}: annotation {ANN_POD_INDEX_OFFSET}={raw!r} on Pod "
                             f'"{pods[0].name}" is not an integer; its pods stay gated')
                continue
            offset, bound = offset + int(raw), bound + int(raw)
        slots = _slots(ps.domains)
        chosen: list[tuple[GatedPodView, tuple[str, ...]]]
        if ps.pod_index_label is not None:
            try:
                chosen = _by_rank(ps, pods, offset, bound, slots)
            except RankError as exc:
                notes.append(f"pod set {ps.name}: ranks not used ({exc}); placing greedily")
                chosen = _greedy(ps, pods, ps.domains)
        else:
            chosen = _greedy(ps, pods, ps.domains)
        for pod, domain in chosen:
            releases.append(Release(ps.name, pod.name, dict(zip(ps.levels, domain, strict=True))))
    return UngatePlan(tuple(releases), tuple(notes))
