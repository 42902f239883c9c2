"""One domain of a TAS flavor, named by its node selector: the domain a preemptor preempts for
(the sticky preemption target), the domain a compact wait holds (core/beyond/held_domains.py), the
domain defragmentation opens (core/beyond/defrag.py). Encoded on the Workload as a JSON annotation so
later cycles, and a restarted controller, keep to it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.core.placement.types import PodSetPlacement
from scheduler.core.topology import TopologyTree
from scheduler.core.workload import json_object_annotation

ANN_PREEMPTION_TARGET = "toposched.io/preemption-target"


@dataclass(frozen=True)
class DomainTarget:
    """The domain a preemptor preempts for: ``selector`` maps each topology level label from
    the root down to ``level`` to its value (a node selector for that domain)."""

    pod_set: str
    flavor: str
    level: str
    selector: Mapping[str, str]

    def encode(self) -> str:
        return json.dumps({"podSet": self.pod_set, "flavor": self.flavor, "level": self.level,
                           "domain": dict(self.selector)}, sort_keys=True)

    @property
    def name(self) -> str:
        """The domain's value at its level (what `explain` prints)."""
        return self.selector.get(self.level, "")


def parse_target(annotations: Mapping[str, str], key: str = ANN_PREEMPTION_TARGET) -> DomainTarget | None:
    """The sticky target recorded on a Workload under ``key`` (the preemption target, or the
    domain a compact wait holds: core/beyond/held_domains.py), or None (absent or malformed: ignored)."""
    data = json_object_annotation(annotations, key)
    if data is None or not isinstance(data.get("domain"), dict):
        return None
    fields = (data.get("podSet"), data.get("flavor"), data.get("level"))
    if not all(isinstance(f, str) and f for f in fields):
        return None
    selector = {str(k): str(v) for k, v in data["domain"].items()}
    return DomainTarget(str(data["podSet"]), str(data["flavor"]), str(data["level"]), selector)


def levels_to_try(tree: TopologyTree, level: str, required: bool) -> list[str]:
    """``required``: the level; ``preferred``: the level, then every wider level up to the root."""
    if not tree.has_level(level):
        return []
    if required:
        return [level]
    return list(reversed(tree.levels[: tree.level_index(level) + 1]))


def selector_of(tree: TopologyTree, level: str, domain: int) -> dict[str, str]:
    lvl = tree.level_index(level)
    return dict(zip(tree.levels[: lvl + 1], tree.paths[lvl][domain], strict=True))


def domain_of_placement(tree: TopologyTree, placement: PodSetPlacement, level: str) -> int | None:
    """The one domain at ``level`` holding every pod of ``placement``, or None if it spans more."""
    anc = tree.ancestors_array(tree.level_index(level))
    found = {int(anc[leaf]) for dom in placement.domains
             if (leaf := tree.leaf_for_values(placement.levels, dom.values)) is not None}
    return found.pop() if len(found) == 1 else None


def target_of_placement(tree: TopologyTree, flavor: str, placement: PodSetPlacement,
                        level: str, required: bool) -> DomainTarget | None:
    """The narrowest domain (``level`` first, wider for ``preferred``) holding the whole placement."""
    for lvl in levels_to_try(tree, level, required):
        d = domain_of_placement(tree, placement, lvl)
        if d is not None:
            return DomainTarget(placement.name, flavor, lvl, selector_of(tree, lvl, d))
    return None
