"""Where a workload is placed first (beyond Kueue): the domain it preempted for (its sticky
preemption target, ``domain_target.ANN_PREEMPTION_TARGET``), else the domain its compact wait
holds (reserve-compact), else the domains it held before its eviction (:data:`ANN_PREVIOUS_DOMAINS`,
written by the controller when it evicts). The placement tries them first and takes them when
everything fits there (``placement.planner.place_workload`` ``preferred_domains``).

And where a domain-wanting preemptor lands once its victims are gone (:func:`landing_target`),
which the cycle records as its sticky target.
"""

from __future__ import annotations

from scheduler.core.beyond.domain_target import DomainTarget, parse_target, target_of_placement
from scheduler.core.kueue.topologies import PreferredDomains
from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.preemption.domains import DomainRequest
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import WorkloadSpec, json_object_annotation

ANN_PREVIOUS_DOMAINS = "toposched.dev/previous-domains"


def previous_domains(spec: WorkloadSpec) -> dict[str, dict[str, str]] | None:
    """The domains a requeued workload held before its eviction (annotation written by the
    controller: JSON ``{"<pod set>": {"<level label>": "<value>"}}``), or None."""
    data = json_object_annotation(spec.annotations, ANN_PREVIOUS_DOMAINS)
    if data is None:
        return None
    return {str(ps): {str(k): str(v) for k, v in sel.items()} for ps, sel in data.items() if isinstance(sel, dict)}


def preferred_domains(spec: WorkloadSpec, target: DomainTarget | None, held: DomainTarget | None,
                      sticky: bool) -> PreferredDomains | None:
    """The domain to try first: ``target`` (this cycle's preemption target), else (``sticky``:
    domain preemption on) the sticky one on the Workload, else ``held`` (the domain its compact
    wait holds), else the domains a requeued workload held before."""
    if target is None and sticky:
        target = parse_target(spec.annotations)
    if target is None:
        target = held
    if target is not None:
        return {target.pod_set: dict(target.selector)}
    return previous_domains(spec)


def landing_target(tree: TopologyTree, request: DomainRequest, required: bool,
                   placement: PodSetPlacement | None) -> DomainTarget | None:
    """The domain a domain-wanting preemptor lands in once its victims are gone (its placement
    there), or None when the placement spans more."""
    if placement is None:
        return None
    return target_of_placement(tree, request.flavor, placement, request.level, required)
