"""Kueue ``topologyAssignment`` encodings of a :class:`PodSetPlacement`.

v1beta1: ``{levels, domains: [{values, count}]}``. v1beta2 (storage since Kueue v0.16):
``{levels, slices: [{domainCount, valuesPerLevel: [{universal} | {individual: {prefix?,
suffix?, roots}}], podCounts: {universal} | {individual}}]}``; the assignment is the
concatenation of the slices. The encoder writes the smaller (in JSON bytes) of one slice and
"runs of hostnames sharing a ``-``-terminated prefix"; the decoder accepts either version and
any slice split.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.core.nodes import HOSTNAME_LABEL
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement


class AssignmentFormatError(ValueError):
    """A topologyAssignment that is not in either Kueue shape; the message names the field."""


def encode_v1beta1(p: PodSetPlacement) -> dict[str, Any]:
    return {
        "levels": list(p.levels),
        "domains": [{"values": list(d.values), "count": d.count} for d in p.domains],
    }


def _common_prefix(values: Sequence[str]) -> str:
    return os.path.commonprefix(list(values))


def _encode_level(values: Sequence[str]) -> dict[str, Any]:
    if all(v == values[0] for v in values):
        return {"universal": values[0]}
    prefix = _common_prefix(values)
    rests = [v[len(prefix) :] for v in values]
    suffix = _common_prefix([r[::-1] for r in rests])[::-1]
    roots = [r[: len(r) - len(suffix)] for r in rests]
    individual: dict[str, Any] = {}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = roots
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


def _host_prefix(value: str) -> str:
    cut = value.rfind("-")
    return value[: cut + 1] if cut >= 0 else ""


def encode_v1beta2(p: PodSetPlacement, *, split_by_hostname_prefix: bool = True) -> dict[str, Any]:
    levels = list(p.levels)
    domains = [d for d in p.domains if d.count > 0]
    if not domains:
        return {"levels": levels, "slices": []}
    single = [_encode_slice(domains, len(levels))]
    best = single
    if split_by_hostname_prefix and levels[-1] == HOSTNAME_LABEL and len(domains) > 1:
        runs: list[list[DomainAssignment]] = [[domains[0]]]
        for d in domains[1:]:
            if _host_prefix(d.values[-1]) == _host_prefix(runs[-1][-1].values[-1]):
                runs[-1].append(d)
            else:
                runs.append([d])
        if len(runs) > 1:
            multi = [_encode_slice(run, len(levels)) for run in runs]
            if len(json.dumps(multi)) < len(json.dumps(single)):
                best = multi
    return {"levels": levels, "slices": best}


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
