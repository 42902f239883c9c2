"""Kueue's ``kueue.x-k8s.io/admission-gated-by`` (gate ``AdmissionGatedBy``: alpha off in
v0.17, beta on in v0.19): external controllers named in the annotation hold a job's admission
until each has taken its name out.

Who may set and clear it, as Kueue's ``pkg/util/webhook/validation_admissiongatedby.go``
(v0.19.2; the same rules and words in v0.17.0 once the gate is on): anyone who may create the
object sets it at CREATE, in a valid format; on UPDATE names may only be removed (or the whole
annotation), never added, and the annotation may not appear after creation. The same rules hold
for jobs (jobframework's ``ValidateJobOnCreate`` / ``ValidateJobOnUpdate``) and for Workloads
(``workload_webhook.go``). With the gate off the annotation is neither checked nor honoured.

Pure functions on object dicts: the webhook (admission/validation.py, admission/workloads.py),
the controller (kube/admission_gates.py) and the snapshot (adapter/snapshot.py) read them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from scheduler.adapter.manifest.fielderrors import FieldError, forbidden, invalid
from scheduler.adapter.manifest.labelkeys import is_dns1123_subdomain, regex_error
from scheduler.core.config import FeatureGates
from scheduler.core.kueue_names import ANN_ADMISSION_GATED_BY

GATE = "AdmissionGatedBy"
PATH = f"metadata.annotations[{ANN_ADMISSION_GATED_BY}]"
MAX_GATE_NAME_LENGTH = 63  # Kueue's MaxGateNameLengthForAdmissionGatedBy (a Job's spec.managedBy limit)
_HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_HTTP_PATH_RE = re.compile(_HTTP_PATH_FMT)
DOMAIN_PREFIXED = 'must be a domain-prefixed path (such as "acme.io/foo")'
# toposched's fixes, after Kueue's words.
FORMAT_FIX = ("list each gate once, comma-separated, as a domain-prefixed path of at most 63 bytes "
              "(e.g. example.com/controller)")
ADD_FIX = ("an admission gate is set when the object is created: delete it and create it again with the "
           "annotation, or leave it ungated")
REMOVE_FIX = "keep only names already in the annotation (a gate's controller removes its own name when it is done)"


def parse(value: str) -> list[str]:
    """Kueue's ``csv.Parse``: comma-separated names, spaces around each trimmed; none when blank."""
    if not value.strip():
        return []
    return [part.strip() for part in value.split(",")]


def gated_by(obj: Mapping[str, Any]) -> str | None:
    """The annotation's value, None when the object has none (a non-string reads as absent:
    the API server keeps annotations as strings)."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(ANN_ADMISSION_GATED_BY) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) else None


def has_admission_gate(obj: Mapping[str, Any], gates: FeatureGates) -> bool:
    """Kueue's ``workload.HasAdmissionGate``: a non-empty annotation, with the gate on."""
    return gates.enabled(GATE) and bool(gated_by(obj))


def _domain_prefixed_path(gate: str) -> list[FieldError]:
    """apimachinery's ``validation.IsDomainPrefixedPath`` (v0.36), field errors in its words."""
    host, slash, path = gate.partition("/")
    if not slash or not host or not path:
        return [invalid(PATH, gate, DOMAIN_PREFIXED, FORMAT_FIX)]
    errors = [invalid(PATH, host, problem, FORMAT_FIX) for problem in is_dns1123_subdomain(host)]
    if not _HTTP_PATH_RE.fullmatch(path):
        errors.append(invalid(PATH, path, regex_error("Invalid path", _HTTP_PATH_FMT), FORMAT_FIX))
    return errors


def format_errors(value: str) -> list[FieldError]:
    """Kueue's ``validateAdmissionGatedByAnnotationFormat``: no empty or repeated name, each a
    domain-prefixed path of at most 63 bytes."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for gate in parse(value):
        if not gate:
            errors.append(invalid(PATH, value, "cannot contain empty gate names", FORMAT_FIX))
            continue
        if gate in seen:
            errors.append(invalid(PATH, value, f"duplicate gate name: {gate}", FORMAT_FIX))
            continue
        seen.add(gate)
        errors.extend(_domain_prefixed_path(gate))
        if len(gate.encode()) > MAX_GATE_NAME_LENGTH:
            errors.append(FieldError(PATH, "Too long", f"may not be more than {MAX_GATE_NAME_LENGTH} bytes",
                                     fix=FORMAT_FIX))
    return errors


def create_errors(obj: Mapping[str, Any], gates: FeatureGates) -> list[FieldError]:
    """``ValidateAdmissionGatedByAnnotationOnCreate`` when the gate is on."""
    if not gates.enabled(GATE):
        return []
    return format_errors(gated_by(obj) or "")


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], gates: FeatureGates) -> list[FieldError]:
    """``ValidateAdmissionGatedByAnnotationOnUpdate`` when the gate is on: the annotation cannot
    appear after creation and names can only be removed, whoever writes (Kueue gives no one,
    itself included, the right to add a gate to a created object: a gate holds admission only
    from the start)."""
    if not gates.enabled(GATE):
        return []
    before, after = gated_by(old) or "", gated_by(new) or ""
    errors: list[FieldError] = []
    if not before and after:
        errors.append(forbidden(PATH, "cannot add admission gate after creation", ADD_FIX))
    if before and after:
        old_gates = parse(before)
        if any(gate not in old_gates for gate in parse(after)):
            errors.append(forbidden(PATH, "can only remove gates, not add new ones", REMOVE_FIX))
    errors.extend(format_errors(after))
    return errors
