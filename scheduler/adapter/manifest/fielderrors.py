"""Field errors rendered the way the Kubernetes API server renders them.

``field.Invalid(path, value, detail)`` prints ``<path>: Invalid value: <value>: <detail>``;
strings are quoted. Kueue's validation messages are Kubernetes field errors, so users who
know Kueue's texts see the same shape here. Every toposched error also carries a ``fix``:
what to do about it, appended after ``"; "``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

OMIT = object()  # field.OmitValueType: no value printed


def _render_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class FieldError:
    path: str
    kind: str  # "Invalid value" | "Required value" | "Forbidden" | "Duplicate value" | "Not found" | ""
    detail: str
    value: Any = OMIT
    fix: str = ""

    def __str__(self) -> str:
        body = self.detail
        if self.kind:  # as field.Error.ErrorBody: ": <detail>" only when there is one
            body = self.kind if self.value is OMIT else f"{self.kind}: {_render_value(self.value)}"
            if self.detail:
                body = f"{body}: {self.detail}"
        text = f"{self.path}: {body}"
        return f"{text}; {self.fix}" if self.fix else text


def invalid(path: str, value: Any, detail: str, fix: str = "") -> FieldError:
    return FieldError(path, "Invalid value", detail, value, fix)


def required(path: str, detail: str, fix: str = "") -> FieldError:
    return FieldError(path, "Required value", detail, OMIT, fix)


def forbidden(path: str, detail: str, fix: str = "") -> FieldError:
    return FieldError(path, "Forbidden", detail, OMIT, fix)


def duplicate(path: str, value: Any, fix: str = "") -> FieldError:
    return FieldError(path, "Duplicate value", "", value, fix)


def not_supported(path: str, value: Any, supported: tuple[str, ...], fix: str = "") -> FieldError:
    return FieldError(path, "Unsupported value", "supported values: " + ", ".join(json.dumps(v) for v in supported),
                      value, fix)


def too_many(path: str, count: int, most: int, fix: str = "") -> FieldError:
    return FieldError(path, "Too many", f"must have at most {most} items", count, fix)


def plain(path: str, detail: str, fix: str = "") -> FieldError:
    """toposched's own checks: ``<path>: <detail>; <fix>``."""
    return FieldError(path, "", detail, OMIT, fix)


# The HTTP code of a refusal. Kueue's webhooks return field errors, which controller-runtime's
# validator turns into ``admission.Denied``: 403, reason Forbidden. Where toposched refuses what
# Kueue would accept (and leave pending: a missing queue, a job that can never fit), 422, reason
# Invalid: kubectl prints "The request is invalid: <message>", and the ``hyp`` CLI, which reads
# any 403 as "Access denied to resource", prints "Unhandled Kubernetes error: 422 Unprocessable
# Entity" instead (docs/webhook.md).
FORBIDDEN = 403
INVALID = 422


@dataclass
class Verdict:
    """The decision of one validation: denied when ``errors`` is non-empty, with ``code``."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    code: int = FORBIDDEN

    @property
    def allowed(self) -> bool:
        return not self.errors

    def message(self) -> str:
        """One error as is; several one per line (messages contain commas, so Kubernetes'
        ``[e1, e2]`` aggregate would be hard to read)."""
        texts = [str(e) for e in self.errors]
        if len(texts) == 1:
            return texts[0]
        return f"{len(texts)} problems:\n" + "\n".join(f"- {t}" for t in texts)

    def extend(self, other: Verdict) -> None:
        if other.errors and not self.errors and other.code != FORBIDDEN:
            self.code = other.code  # a refusal of toposched's own, judged by a step of its own
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)
