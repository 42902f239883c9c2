"""Kueue ``topologyAssignment`` encodings of a :class:`PodSetPlacement`.

v1beta1: ``{levels, domains: [{values, count}]}``. v1beta2 (storage since Kueue v0.16):
``{levels, slices: [{domainCount, valuesPerLevel: [{universal} | {individual: {prefix?,
suffix?, roots}}], podCounts: {universal} | {individual}}]}``; the assignment is the
concatenation of the slices. The encoder writes what Kueue's ``V1Beta2From`` writes
(``pkg/util/tas/tas_assignment.go``): one maximally compact slice (v0.17, and v0.19 with
``TASAssignmentsEncodingByHostnamePrefix`` off), or (the gate on, v0.19's default) runs of
hostnames sharing a reusable ``-``-terminated prefix, unless one slice is strictly smaller in
Go's compact JSON. The decoder accepts either version and any slice split.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.core.nodes import HOSTNAME_LABEL
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement

# Kueue's v1beta2 limits (MaxItems of roots / individual pod counts, and of slices).
MAX_DOMAINS_PER_SLICE = 100_000
MAX_SLICES = 1_000


class AssignmentFormatError(ValueError):
    """A topologyAssignment that is not in either Kueue shape; the message names the field."""


def encode_v1beta1(p: PodSetPlacement) -> dict[str, Any]:
    return {
        "levels": list(p.levels),
        "domains": [{"values": list(d.values), "count": d.count} for d in p.domains],
    }


def _common_prefix_len(values: Sequence[str]) -> int:
    first = values[0]
    n = min(len(v) for v in values)
    for i in range(n):
        if any(v[i] != first[i] for v in values):
            return i
    return n


def _encode_level(values: Sequence[str]) -> dict[str, Any]:
    """Kueue's ``fillSingleCompactSliceValues``: the common prefix and suffix of all values,
    the prefix shortened where the two would overlap in the shortest value."""
    pre = _common_prefix_len(values)
    longest, shortest = max(len(v) for v in values), min(len(v) for v in values)
    if pre == longest:  # every value is the same
        return {"universal": values[0]}
    suf = _common_prefix_len([v[::-1] for v in values])
    if pre + suf > shortest:
        pre = shortest - suf
    individual: dict[str, Any] = {}
    if pre:
        individual["prefix"] = values[0][:pre]
    if suf:
        individual["suffix"] = values[0][len(values[0]) - suf:]
    individual["roots"] = [v[pre:len(v) - suf] for v in values]
    return {"individual": individual}


def _encode_slice(domains: Sequence[DomainAssignment], n_levels: int) -> dict[str, Any]:
    counts = [d.count for d in domains]
    return {
        "domainCount": len(domains),
        "valuesPerLevel": [_encode_level([d.values[i] for d in domains]) for i in range(n_levels)],
        "podCounts": {"universal": counts[0]}
        if all(c == counts[0] for c in counts)
        else {"individual": counts},
    }


def _dash_prefixes(host: str) -> list[str]:
    """Every ``-``-terminated prefix of ``host`` that leaves at least one character after it."""
    return [host[: i + 1] for i in range(len(host) - 1) if host[i] == "-"]


def _chunks(n: int) -> int:
    return -(-n // MAX_DOMAINS_PER_SLICE)


def _reusable_prefix_keys(hosts: Sequence[str]) -> list[str] | None:
    """Kueue's ``reusableHostnamePrefixKeys``: per host its longest prefix that occurs in at
    least two hosts (``""`` if none), trying shallower prefix depths until the runs fit in
    :data:`MAX_SLICES` slices; None when no depth fits (one run, chunked)."""
    prefixes = [_dash_prefixes(h) for h in hosts]
    seen: dict[str, int] = {}
    for ps in prefixes:
        for p in ps:
            seen[p] = seen.get(p, 0) + 1
    for depth in range(max((len(ps) for ps in prefixes), default=0), 0, -1):
        keys = [next((p for p in reversed(ps[:depth]) if seen[p] >= 2), "") for ps in prefixes]
        slices, start = 0, 0
        for i in range(1, len(keys)):
            if keys[i] != keys[start]:
                slices += _chunks(i - start)
                start = i
        slices += _chunks(len(keys) - start)
        if slices <= MAX_SLICES:
            return keys
    return None


def _prefix_runs(domains: Sequence[DomainAssignment], n_levels: int, hostname_lowest: bool) -> list[dict[str, Any]]:
    """Kueue's ``compactTopologyAssignmentEncodingWithHostnamePrefixRuns``: consecutive
    domains with the same prefix key form a run; runs are chunked at the slice limit."""
    hosts = hostname_lowest and len(domains) > 1
    keys = _reusable_prefix_keys([d.values[-1] for d in domains]) if hosts else None
    runs: list[list[DomainAssignment]] = [[domains[0]]]
    for i in range(1, len(domains)):
        if keys is not None and keys[i] != keys[i - 1]:
            runs.append([domains[i]])
        else:
            runs[-1].append(domains[i])
    return [_encode_slice(run[j:j + MAX_DOMAINS_PER_SLICE], n_levels)
            for run in runs for j in range(0, len(run), MAX_DOMAINS_PER_SLICE)]


def _json_bytes(obj: Any) -> int:
    """The size of Go's ``json.Marshal`` of it (compact, UTF-8 unescaped)."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def encode_v1beta2(p: PodSetPlacement, *, split_by_hostname_prefix: bool = False) -> dict[str, Any]:
    """Kueue's ``V1Beta2From``. ``split_by_hostname_prefix``: the
    ``TASAssignmentsEncodingByHostnamePrefix`` gate (off in Kueue v0.17, on in v0.19)."""
    levels = list(p.levels)
    domains = [d for d in p.domains if d.count > 0]
    if not domains:
        return {"levels": levels, "slices": []}
    single = [_encode_slice(domains, len(levels))]
    if not split_by_hostname_prefix:
        return {"levels": levels, "slices": single}
    runs = _prefix_runs(domains, len(levels), levels[-1] == HOSTNAME_LABEL)
    if len(runs) <= 1 or len(domains) > MAX_DOMAINS_PER_SLICE:
        return {"levels": levels, "slices": runs}
    smaller = _json_bytes({"levels": levels, "slices": single}) < _json_bytes({"levels": levels, "slices": runs})
    return {"levels": levels, "slices": single if smaller else runs}


def _expect(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise AssignmentFormatError(f"{where}.{key}: expected {kind.__name__}, got {value!r}")
    return value


def _decode_slice(sl: Mapping[str, Any], n_levels: int, where: str) -> list[DomainAssignment]:
    if not isinstance(sl, Mapping):
        raise AssignmentFormatError(f"{where}: expected an object")
    n = _expect(sl, "domainCount", int, where)
    if n < 1:
        raise AssignmentFormatError(f"{where}.domainCount: must be >= 1, got {n}")
    per_level = _expect(sl, "valuesPerLevel", list, where)
    if len(per_level) != n_levels:
        raise AssignmentFormatError(
            f"{where}.valuesPerLevel: has {len(per_level)} entries, levels has {n_levels}"
        )
    columns: list[list[str]] = []
    for i, item in enumerate(per_level):
        at = f"{where}.valuesPerLevel[{i}]"
        if not isinstance(item, Mapping) or (("universal" in item) == ("individual" in item)):
            raise AssignmentFormatError(f"{at}: exactly one of universal or individual is required")
        if "universal" in item:
            columns.append([str(item["universal"])] * n)
            continue
        ind = item["individual"]
        if not isinstance(ind, Mapping):
            raise AssignmentFormatError(f"{at}.individual: expected an object")
        roots = _expect(ind, "roots", list, f"{at}.individual")
        if len(roots) != n:
            raise AssignmentFormatError(
                f"{at}.individual.roots: has {len(roots)} entries, domainCount is {n}"
            )
        prefix, suffix = str(ind.get("prefix") or ""), str(ind.get("suffix") or "")
        columns.append([f"{prefix}{r}{suffix}" for r in roots])
    pc = sl.get("podCounts")
    if not isinstance(pc, Mapping) or (("universal" in pc) == ("individual" in pc)):
        raise AssignmentFormatError(f"{where}.podCounts: exactly one of universal or individual is required")
    if "universal" in pc:
        counts = [int(pc["universal"])] * n
    else:
        raw = pc["individual"]
        if not isinstance(raw, list) or len(raw) != n:
            raise AssignmentFormatError(f"{where}.podCounts.individual: must list {n} counts")
        counts = [int(c) for c in raw]
    return [DomainAssignment(tuple(col[j] for col in columns), counts[j]) for j in range(n)]


def decode_topology_assignment(obj: Mapping[str, Any]) -> tuple[tuple[str, ...], list[DomainAssignment]]:
    """Either Kueue shape -> (levels, domains in stored order)."""
    if not isinstance(obj, Mapping):
        raise AssignmentFormatError("topologyAssignment: expected an object")
    levels = _expect(obj, "levels", list, "topologyAssignment")
    if not levels:
        raise AssignmentFormatError("topologyAssignment.levels: must not be empty")
    lv = tuple(str(x) for x in levels)
    if "slices" in obj:
        slices = _expect(obj, "slices", list, "topologyAssignment")
        out: list[DomainAssignment] = []
        for i, sl in enumerate(slices):
            out.extend(_decode_slice(sl, len(lv), f"topologyAssignment.slices[{i}]"))
        return lv, out
    if "domains" in obj:
        domains = _expect(obj, "domains", list, "topologyAssignment")
        result = []
        for i, d in enumerate(domains):
            where = f"topologyAssignment.domains[{i}]"
            if not isinstance(d, Mapping):
                raise AssignmentFormatError(f"{where}: expected an object")
            values = _expect(d, "values", list, where)
            if len(values) != len(lv):
                raise AssignmentFormatError(
                    f"{where}.values: has {len(values)} entries, levels has {len(lv)}"
                )
            result.append(
                DomainAssignment(tuple(str(v) for v in values), int(_expect(d, "count", int, where)))
            )
        return lv, result
    raise AssignmentFormatError("topologyAssignment: neither slices (v1beta2) nor domains (v1beta1)")
