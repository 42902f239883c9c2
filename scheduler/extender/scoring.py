"""The score step: compactness of a pod's candidate nodes with its group's pods already placed
(the deepest shared level of the workload's Topology above the hostname, e.g. the same layer-3
domain), then the group's free slots left in the node's lowest such domain. Pure: it reads the
cache and the occupancy as the slot book hands them over under its lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.extender.cache import ExtenderCache, PathReader
from scheduler.extender.occupancy import used_slots
from scheduler.extender.workload_view import Assignment, Domain

MAX_SCORE = 10  # k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority


@dataclass(frozen=True)
class Scoring:
    """What a compactness score of one pod's candidate nodes needs: the node -> path reader,
    the prefixes its group's other pods occupy, the free slots per path and the most free."""

    path_of: PathReader
    prefixes: list[set[Domain]]
    free_by_path: dict[Domain, int]
    best_free: int

    def score(self, path: Domain) -> int:
        return _compact_score(path, self.prefixes, self.free_by_path.get(path, 0), self.best_free)


def scoring(cache: ExtenderCache, assignment: Assignment, occupied: Mapping[str, int],
            used: Mapping[Domain, int] | None = None) -> Scoring:
    """``occupied``: the group's other pods per node; ``used``: per assignment domain (a filter
    run's, when it has them)."""
    levels = cache.compact_levels_of(assignment)
    path_of = cache.path_reader(levels)
    if used is None:
        used = used_slots(cache, assignment, occupied)
    prefixes = _sibling_prefixes(set(map(path_of, occupied)), len(levels))
    free_by_path = _free_by_path(cache, assignment, used, levels, path_of)
    return Scoring(path_of, prefixes, free_by_path, max(free_by_path.values(), default=0))


def scores(cache: ExtenderCache, assignment: Assignment, occupied: Mapping[str, int],
           names: Sequence[str]) -> list[tuple[str, int]]:
    """Prioritize's scores 0..10 (nodes outside the assignment or unknown: 0)."""
    how = scoring(cache, assignment, occupied)
    out: list[tuple[str, int]] = []
    for name in names:
        npath = how.path_of(name)
        if npath is None or cache.node_domain(name, assignment) is None:
            out.append((name, 0))
            continue
        out.append((name, how.score(npath)))
    return out


def most_compact(cache: ExtenderCache, assignment: Assignment, passed: Sequence[str], occupied: Mapping[str, int],
                 used: Mapping[Domain, int]) -> str:
    """The first of the passed nodes prioritize would score highest. Every passed node is in
    the assignment, and nodes of one compact path score alike, so each path is scored once.
    Sharing the deepest compact domain with a sibling scores at least 7 and anything else at
    most 6 (:func:`_compact_score`), so when a passed node shares it, only such nodes are scored
    (the common case while a gang fills a domain)."""
    how = scoring(cache, assignment, occupied, used)
    prefixes = how.prefixes
    deepest = {p for p in prefixes[-1] & how.free_by_path.keys() if p[-1] != ""} if len(prefixes) > 1 else set()
    if deepest:
        shared = [name for name in passed if how.path_of(name) in deepest]
        if shared:
            passed = shared
    by_path: dict[Domain | None, int] = {None: 0}
    best_name, best_score = passed[0], -1
    for name in passed:
        npath = how.path_of(name)
        score = by_path.get(npath)
        if score is None:
            assert npath is not None
            score = by_path[npath] = how.score(npath)
        if score > best_score:
            best_name, best_score = name, score
            if score >= MAX_SCORE:  # nothing later can beat it, and the first of the best wins
                break
    return best_name


def _free_by_path(cache: ExtenderCache, assignment: Assignment, used: Mapping[Domain, int],
                  levels: tuple[str, ...], path_of: PathReader) -> dict[Domain, int]:
    """Free slots of the group per lowest compact domain (summed over the assignment's domains
    in it), given its ``used`` slots per assignment domain."""
    free_by_path: dict[Domain, int] = {}
    for dom, count in assignment.counts.items():
        free = count - used.get(dom, 0)
        if free <= 0:
            continue
        dom_path = cache.domain_path(dom, assignment, levels, path_of)
        if dom_path is not None:
            free_by_path[dom_path] = free_by_path.get(dom_path, 0) + free
    return free_by_path


def _sibling_prefixes(paths: Iterable[Domain | None], depth_n: int) -> list[set[Domain]]:
    """prefixes[k]: the first k compact-level values of every placed sibling's node."""
    known = [path for path in paths if path is not None]
    return [set()] + [{path[:k] for path in known} for k in range(1, depth_n + 1)]


def _compact_score(npath: Domain, prefixes: Sequence[set[Domain]], free: int, best_free: int) -> int:
    """7 parts affinity (the deepest level shared with a sibling), 3 parts free slots nearby."""
    depth_n = len(prefixes) - 1
    depth = 0
    for k in range(depth_n, 0, -1):
        if npath[:k] in prefixes[k] and npath[k - 1] != "":
            depth = k
            break
    # Exponential in depth: sharing the deepest domain outweighs any number of wider ones.
    affinity = (2**depth - 1) / (2**depth_n - 1) if depth_n else 0.0
    slots = free / best_free if best_free else 0.0
    return max(0, min(MAX_SCORE, round(7 * affinity + 3 * slots)))
