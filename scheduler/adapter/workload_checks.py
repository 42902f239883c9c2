"""A Workload checked as Kueue's CRD schema and Workload webhook check it, before anything reads it.

The API server enforces Kueue's CRD schema (v0.17.0 ``config/components/crd/bases``) and
Kueue's webhook (``pkg/webhooks/workload_webhook.go``) adds a few rules; toposched must not
depend on either: clusters run older CRDs, the webhook may be down or bypassed, and the
in-memory API has no schema at all. A Workload with a negative pod count was admitted and then
made every later snapshot fail; duplicate pod-set names double-counted usage. So both doors
use these checks: the webhook refuses such a Workload (``admission/workloads.py``) and the
controller leaves it out of every snapshot and marks it inadmissible, naming the field
(``scheduler/kube/invalid.py``); the others are admitted as usual.

Messages are the API server's and Kueue's, word for word, where they have one (the schema's
``... in body should be greater than or equal to 0``, the CEL rules' texts, Kueue's
``at most one podSet can use minCount``). Checks toposched adds where Kueue checks nothing
(negative requests, the consistency of ``topologyRequest``) say what to write instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.adapter.objects import QUOTA_RESERVED, condition_true
from scheduler.core.config import DEFAULT_KUEUE_RELEASE, KUEUE_V017, KUEUE_V019
from scheduler.core.resources import parse_quantity
from scheduler.core.topology_request import (
    F_GROUP_NAME,
    F_POD_INDEX_LABEL,
    F_PREFERRED,
    F_REQUIRED,
    F_SLICE_CONSTRAINTS,
    F_SLICE_SIZE,
    F_SLICE_TOPOLOGY,
    F_SUB_GROUP_COUNT,
    F_SUB_GROUP_INDEX_LABEL,
    F_UNCONSTRAINED,
)
from scheduler.core.workload import DEFAULT_POD_SET, workload_from_kueue

# A Workload's pod sets: the CRD's MaxItems (apis/kueue/v1beta2 and v1beta1 workload_types.go) and,
# from v0.19, jobframework.MaxPodSets (pkg/controller/jobframework/constants.go): 8 at v0.17.0,
# 18 at v0.19.2 (10 in the v0.18 line, a release toposched does not behave as).
MAX_POD_SETS_BY_RELEASE: Mapping[str, int] = {KUEUE_V017: 8, KUEUE_V019: 18}
MAX_POD_SETS = MAX_POD_SETS_BY_RELEASE[DEFAULT_KUEUE_RELEASE]


def max_pod_sets(release: str) -> int:
    """How many pod sets a Workload of Kueue ``release`` may have."""
    return MAX_POD_SETS_BY_RELEASE[release]


INT32_MAX = 2**31 - 1
POD_SET_NAME = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # Kueue's PodSetReference (a DNS label)
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_POD_SET_NAME_RE = re.compile(POD_SET_NAME)
_DNS_SUBDOMAIN_RE = re.compile(DNS_SUBDOMAIN)
RESERVED_RESOURCE = "pods"  # Kueue: "the key is reserved for internal kueue use"
MAX_PROBLEMS = 20


class _Omit:
    def __repr__(self) -> str:
        return "<omitted>"


NO_VALUE: Any = _Omit()


@dataclass(frozen=True)
class FieldProblem:
    """One field error, rendered as apimachinery's ``field.Error`` (``<path>: <kind>: <value>:
    <detail>``; values as JSON); ``fix``, when set, follows after ``"; "``."""

    path: str
    kind: str  # "Invalid value" | "Required value" | "Duplicate value" | "Too many" | "Too long" | "Forbidden" | ""
    detail: str = ""
    value: Any = NO_VALUE
    fix: str = ""

    def __str__(self) -> str:
        if not self.kind:
            body = self.detail
        else:
            body = self.kind if self.value is NO_VALUE else f"{self.kind}: {render_value(self.value)}"
            if self.detail:
                body = f"{body}: {self.detail}"
        text = f"{self.path}: {body}"
        return f"{text}; {self.fix}" if self.fix else text


def render_value(value: Any) -> str:
    """As ``field.Error.ErrorBody``: numbers and booleans plain, strings quoted, the rest as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _type_name(value: Any) -> str:
    """What a JSON value is, in the schema's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number" if isinstance(value, float) else "integer"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _wrong_type(path: str, value: Any, wanted: str) -> FieldProblem:
    """The schema's type error (``field.TypeInvalid``)."""
    return FieldProblem(path, "Invalid value", f"{path} in body must be of type {wanted}: \"{_type_name(value)}\"",
                        _type_name(value))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Checker:
    def __init__(self, max_pod_sets: int = MAX_POD_SETS) -> None:
        self.max_pod_sets = max_pod_sets
        self.problems: list[FieldProblem] = []

    def add(self, problem: FieldProblem) -> None:
        self.problems.append(problem)

    def int32(self, path: str, value: Any, minimum: int | None) -> int | None:
        """An integer field of the schema (``format: int32``, ``minimum``); the value when usable."""
        if not _is_int(value):
            self.add(_wrong_type(path, value, "integer"))
            return None
        if not -INT32_MAX - 1 <= value <= INT32_MAX:
            self.add(FieldProblem(path, "Invalid value", f"{path} in body must be of type int32: \"{value}\"",
                                  value))
            return None
        if minimum is not None and value < minimum:
            self.add(FieldProblem(path, "Invalid value",
                                  f"{path} in body should be greater than or equal to {minimum}", value))
            return None
        return int(value)

    def string(self, path: str, value: Any, max_length: int | None = None, pattern: re.Pattern[str] | None = None,
               min_length: int = 0) -> str | None:
        if not isinstance(value, str):
            self.add(_wrong_type(path, value, "string"))
            return None
        if max_length is not None and len(value) > max_length:
            self.add(FieldProblem(path, "Too long", f"may not be more than {max_length} bytes"))
            return None
        if len(value) < min_length:
            self.add(FieldProblem(path, "Invalid value", f"{path} in body should be at least {min_length} chars long",
                                  value))
            return None
        if pattern is not None and not pattern.fullmatch(value):
            self.add(FieldProblem(path, "Invalid value", f"{path} in body should match '{pattern.pattern}'", value))
            return None
        return value

    def mapping(self, path: str, value: Any) -> Mapping[str, Any] | None:
        if not isinstance(value, Mapping):
            self.add(_wrong_type(path, value, "object"))
            return None
        return value

    # ------------------------------------------------------------------ spec
    def spec(self, spec: Mapping[str, Any], api_version: str) -> None:
        pod_sets = spec.get("podSets")
        if pod_sets is None:
            self.add(FieldProblem("spec.podSets", "Required value"))
        elif not isinstance(pod_sets, list):
            self.add(_wrong_type("spec.podSets", pod_sets, "array"))
        else:
            self.pod_sets(pod_sets)
        if spec.get("queueName") is not None:
            self.string("spec.queueName", spec["queueName"], 253, _DNS_SUBDOMAIN_RE)
        if spec.get("priority") is not None:
            self.int32("spec.priority", spec["priority"], None)
        if spec.get("active") is not None and not isinstance(spec["active"], bool):
            self.add(_wrong_type("spec.active", spec["active"], "boolean"))
        if spec.get("maximumExecutionTimeSeconds") is not None:
            self.int32("spec.maximumExecutionTimeSeconds", spec["maximumExecutionTimeSeconds"], 1)
        if api_version.endswith("/v1beta1"):
            self.v1beta1_priority(spec)
        else:
            self.priority_class_ref(spec)

    def priority_class_ref(self, spec: Mapping[str, Any]) -> None:
        raw = spec.get("priorityClassRef")
        if raw is None:
            return
        ref = self.mapping("spec.priorityClassRef", raw)
        if ref is None:
            return
        if spec.get("priority") is None:  # the CRD's CEL rules: the API server prints no value for them
            self.add(FieldProblem("spec", "Invalid value", "priority should not be nil when priorityClassRef is set"))
        group, kind = ref.get("group"), ref.get("kind")
        for name, value, allowed in (("group", group, ("kueue.x-k8s.io", "scheduling.k8s.io")),
                                     ("kind", kind, ("WorkloadPriorityClass", "PriorityClass"))):
            if value is not None and value not in allowed:
                self.add(FieldProblem(f"spec.priorityClassRef.{name}", "Unsupported value",
                                      "supported values: " + ", ".join(json.dumps(a) for a in allowed), value))
        if group == "scheduling.k8s.io" and kind != "PriorityClass":
            self.add(FieldProblem("spec.priorityClassRef", "Invalid value",
                                  "only the PriorityClass kind is allowed for the scheduling.k8s.io group"))
        if group == "kueue.x-k8s.io" and kind != "WorkloadPriorityClass":
            self.add(FieldProblem("spec.priorityClassRef", "Invalid value",
                                  "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group"))
        if ref.get("name") is not None:
            self.string("spec.priorityClassRef.name", ref["name"], 253, _DNS_SUBDOMAIN_RE, min_length=1)

    def v1beta1_priority(self, spec: Mapping[str, Any]) -> None:
        if spec.get("priorityClassName") is not None:
            self.string("spec.priorityClassName", spec["priorityClassName"], 253, _DNS_SUBDOMAIN_RE)
            if spec.get("priority") is None:
                self.add(FieldProblem("spec", "Invalid value",
                                      "priority should not be nil when priorityClassName is set"))
        source = spec.get("priorityClassSource")
        allowed = ("kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", "")
        if source is not None and source not in allowed:
            self.add(FieldProblem("spec.priorityClassSource", "Unsupported value",
                                  "supported values: " + ", ".join(json.dumps(a) for a in allowed), source))

    def pod_sets(self, pod_sets: list[Any]) -> None:
        if not pod_sets:
            self.add(FieldProblem("spec.podSets", "Invalid value", "spec.podSets in body should have at least 1 items",
                                  0))
            return
        if len(pod_sets) > self.max_pod_sets:
            self.add(FieldProblem("spec.podSets", "Too many", f"must have at most {self.max_pod_sets} items",
                                  len(pod_sets)))
        seen: set[str] = set()
        with_min_count = 0
        for i, raw in enumerate(pod_sets):
            path = f"spec.podSets[{i}]"
            ps = self.mapping(path, raw)
            if ps is None:
                continue
            name = DEFAULT_POD_SET if ps.get("name") is None else ps["name"]  # the schema's defaults
            if self.string(f"{path}.name", name, 63, _POD_SET_NAME_RE) is not None:
                if name in seen:  # listType=map keyed by name
                    self.add(FieldProblem(path, "Duplicate value", "", {"name": name}))
                seen.add(name)
            count = self.int32(f"{path}.count", 1 if ps.get("count") is None else ps["count"], 0)
            if ps.get("minCount") is not None:
                with_min_count += 1
                min_count = self.int32(f"{path}.minCount", ps["minCount"], 1)
                if min_count is not None and count is not None and min_count > count:
                    self.add(FieldProblem(path, "Invalid value", "minCount should be positive and less or equal to "
                                          "count"))
            template = ps.get("template")
            if template is None:
                self.add(FieldProblem(f"{path}.template", "Required value"))
            elif self.mapping(f"{path}.template", template) is not None:
                self.template(f"{path}.template", template)
            if ps.get("topologyRequest") is not None:
                request = self.mapping(f"{path}.topologyRequest", ps["topologyRequest"])
                if request is not None:
                    self.topology_request(f"{path}.topologyRequest", request, count)
        if with_min_count > 1:
            self.add(FieldProblem("spec.podSets", "Invalid value", "at most one podSet can use minCount",
                                  with_min_count))

    def template(self, path: str, template: Mapping[str, Any]) -> None:
        spec = template.get("spec")
        if spec is None:
            return
        pod = self.mapping(f"{path}.spec", spec)
        if pod is None:
            return
        for field in ("containers", "initContainers"):
            containers = pod.get(field)
            if containers is None:
                continue
            if not isinstance(containers, list):
                self.add(_wrong_type(f"{path}.spec.{field}", containers, "array"))
                continue
            for j, raw in enumerate(containers):
                container = self.mapping(f"{path}.spec.{field}[{j}]", raw)
                if container is None:
                    continue
                resources = container.get("resources")
                if resources is None or self.mapping(f"{path}.spec.{field}[{j}].resources", resources) is None:
                    continue
                for kind in ("requests", "limits"):
                    self.quantities(f"{path}.spec.{field}[{j}].resources.{kind}", resources.get(kind),
                                    reserved=kind == "requests")
        self.quantities(f"{path}.spec.overhead", pod.get("overhead"), reserved=False)

    def quantities(self, path: str, raw: Any, reserved: bool) -> None:
        if raw is None:
            return
        amounts = self.mapping(path, raw)
        if amounts is None:
            return
        for resource, quantity in amounts.items():
            where = f"{path}[{resource}]"
            if reserved and resource == RESERVED_RESOURCE:
                self.add(FieldProblem(where, "Invalid value", "the key is reserved for internal kueue use", "pods"))
                continue
            try:
                amount = parse_quantity(quantity, str(resource)) if not isinstance(quantity, bool) else None
            except (ValueError, ArithmeticError, TypeError) as exc:
                if "negative" in str(exc):
                    self.add(FieldProblem(where, "Invalid value", "must be greater than or equal to 0", quantity,
                                          "requests and limits count what one pod uses: write 0 or more"))
                else:
                    self.add(FieldProblem(where, "Invalid value", "quantities must match the regular expression "
                                          "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'", quantity))
                continue
            if amount is None:
                self.add(_wrong_type(where, quantity, "string"))

    def topology_request(self, path: str, request: Mapping[str, Any], count: int | None) -> None:
        """The schema's bounds, and the rules Kueue applies to the annotations the request is made
        from (``tas_validation.go``), for a Workload someone wrote by hand."""
        for field, limit in ((F_REQUIRED, 63), (F_PREFERRED, 63), (F_SLICE_TOPOLOGY, 63), (F_POD_INDEX_LABEL, 317),
                             (F_SUB_GROUP_INDEX_LABEL, 317), (F_GROUP_NAME, 256)):
            if request.get(field) is not None:
                self.string(f"{path}.{field}", request[field], limit)
        unconstrained = request.get(F_UNCONSTRAINED)
        if unconstrained is not None and not isinstance(unconstrained, bool):
            self.add(_wrong_type(f"{path}.{F_UNCONSTRAINED}", unconstrained, "boolean"))
        for field in (F_SUB_GROUP_COUNT, F_SLICE_SIZE):
            if request.get(field) is not None:
                self.int32(f"{path}.{field}", request[field], None)
        chosen = [f for f in (F_REQUIRED, F_PREFERRED) if request.get(f)] + (
            [F_UNCONSTRAINED] if unconstrained is True else [])
        if len(chosen) > 1:
            self.add(FieldProblem(path, "Invalid value", "must not contain more than one topology request: "
                                  + json.dumps([F_REQUIRED, F_PREFERRED, F_UNCONSTRAINED]),
                                  fix=f"keep one of {', '.join(chosen)}"))
        self.slices(path, request, count)

    def slices(self, path: str, request: Mapping[str, Any], count: int | None) -> None:
        layered = request.get(F_SLICE_CONSTRAINTS)
        topology, size = request.get(F_SLICE_TOPOLOGY), request.get(F_SLICE_SIZE)
        if layered is not None:
            if not isinstance(layered, list):
                self.add(_wrong_type(f"{path}.{F_SLICE_CONSTRAINTS}", layered, "array"))
            elif len(layered) > 3:
                self.add(FieldProblem(f"{path}.{F_SLICE_CONSTRAINTS}", "Too many", "must have at most 3 items",
                                      len(layered)))
            else:
                for k, raw in enumerate(layered):
                    item = self.mapping(f"{path}.{F_SLICE_CONSTRAINTS}[{k}]", raw)
                    if item is not None:
                        self.string(f"{path}.{F_SLICE_CONSTRAINTS}[{k}].topology", item.get("topology"), 63,
                                    min_length=1)
                        self.int32(f"{path}.{F_SLICE_CONSTRAINTS}[{k}].size", item.get("size"), 1)
            if layered and (topology is not None or size is not None):
                self.add(FieldProblem(f"{path}.{F_SLICE_CONSTRAINTS}", "Forbidden",
                                      f"may not be set together with '{F_SLICE_TOPOLOGY}' or '{F_SLICE_SIZE}'",
                                      fix="keep one way of asking for slices"))
            return
        if topology and size is None:
            self.add(FieldProblem(f"{path}.{F_SLICE_SIZE}", "Required value",
                                  f"must be set when '{F_SLICE_TOPOLOGY}' is specified"))
        elif size is not None and not topology:
            self.add(FieldProblem(f"{path}.{F_SLICE_SIZE}", "Forbidden",
                                  f"may not be set when '{F_SLICE_TOPOLOGY}' is not specified"))
        elif isinstance(size, int) and size < 1:
            self.add(FieldProblem(f"{path}.{F_SLICE_SIZE}", "Invalid value", "must be greater than or equal to 1",
                                  size))
        elif isinstance(size, int) and count is not None and size > count:
            self.add(FieldProblem(f"{path}.{F_SLICE_SIZE}", "Invalid value",
                                  f"must not be greater than pod set count {count}", size))


def schema_problems(obj: Mapping[str, Any], release: str = DEFAULT_KUEUE_RELEASE) -> list[FieldProblem]:
    """Every way ``obj`` breaks Kueue ``release``'s Workload schema and webhook rules (at most 20)."""
    checker = _Checker(max_pod_sets(release))
    spec = obj.get("spec")
    if spec is None:
        checker.add(FieldProblem("spec", "Required value"))
    elif checker.mapping("spec", spec) is not None:
        checker.spec(spec, str(obj.get("apiVersion") or ""))
    return checker.problems[:MAX_PROBLEMS]


# What reading a Workload the checks passed may still raise (a node affinity toposched cannot
# read, a timestamp that is not one, ...): the Workload's problem, not the reader's.
UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, ArithmeticError, RecursionError)


def unreadable_problem(exc: BaseException) -> FieldProblem:
    if isinstance(exc, RecursionError):
        return FieldProblem("spec", "", "nested too deeply to read")
    field = str(getattr(exc, "field", "") or "spec")
    return FieldProblem(field if field.startswith(("spec", "status", "metadata")) else f"spec.podSets[*].{field}", "",
                        str(exc))


def workload_problems(obj: Mapping[str, Any], release: str = DEFAULT_KUEUE_RELEASE) -> list[FieldProblem]:
    """:func:`schema_problems`, plus anything that keeps toposched from reading the spec. Empty:
    the Workload may be admitted."""
    problems = schema_problems(obj, release)
    if not problems:
        try:
            workload_from_kueue(obj)
        except UNREADABLE as exc:
            problems = [unreadable_problem(exc)]
    return problems


def holds_quota(obj: Mapping[str, Any]) -> bool:
    return condition_true(obj, QUOTA_RESERVED)


def update_problems(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldProblem]:
    """Kueue's rules for an update beyond the new object's own checks: the pod sets are
    immutable while the old Workload holds a quota reservation (``validateImmutablePodSets``),
    and so are the queue and the priority class (the CRD's CEL rules)."""
    if not holds_quota(old):
        return []
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    out: list[FieldProblem] = []
    new_sets, old_sets = new_spec.get("podSets") or [], old_spec.get("podSets") or []
    if not isinstance(new_sets, list) or not isinstance(old_sets, list) or len(new_sets) != len(old_sets):
        out.append(FieldProblem("spec.podSets", "Invalid value", "field is immutable", "array"))
    else:
        for i, (a, b) in enumerate(zip(new_sets, old_sets, strict=True)):
            if a != b:
                out.append(FieldProblem(f"spec.podSets[{i}]", "Invalid value", "field is immutable",
                                        fix="the pod sets cannot change while the Workload holds quota"))
    if holds_quota(new) and new_spec.get("queueName") != old_spec.get("queueName") and old_spec.get("queueName"):
        out.append(FieldProblem("spec.queueName", "Invalid value", "queueName is immutable while workload quota "
                                "reserved"))
    new_ref, old_ref = new_spec.get("priorityClassRef"), old_spec.get("priorityClassRef")
    if (new_ref is None) != (old_ref is None):
        out.append(FieldProblem("spec.priorityClassRef", "Invalid value", "priorityClassRef is immutable while "
                                "workload quota reserved"))
    elif isinstance(new_ref, Mapping) and isinstance(old_ref, Mapping):
        for part in ("group", "kind"):
            if new_ref.get(part) != old_ref.get(part):
                out.append(FieldProblem(f"spec.priorityClassRef.{part}", "Invalid value",
                                        f"priorityClassRef.{part} is immutable while workload quota reserved"))
    return out


def describe(problems: Iterable[FieldProblem]) -> str:
    """One line per problem, for a condition message, an Event or a log line."""
    texts = [str(p) for p in problems]
    return texts[0] if len(texts) == 1 else f"{len(texts)} problems: " + "; ".join(texts)
