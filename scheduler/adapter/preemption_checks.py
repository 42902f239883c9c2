"""The checks of a PreemptionConfig (Kueue v0.20's type, exactly) and a PreemptionLimit
(toposched's) as field errors, one reader of the models' verdicts for the webhook
(``admission/steps.py``) and the controller (``adapter/preemption_rules.py``).

A field the type does not have is an error, never a field kept and ignored: a rule or a limit
read without it would not be the one its author wrote (a PreemptionConfig's
``preemptorPriorityClassSelector`` dropped makes the rule match every preemptor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from scheduler.adapter.manifest.fielderrors import OMIT, FieldError, invalid, plain, required
from scheduler.models import preemption as m
from scheduler.models import preemption_limit as ml

OWNER = {"PreemptionConfig": "Kueue v0.20's PreemptionConfig", "PreemptionLimit": "toposched's PreemptionLimit"}


def field_path(loc: Sequence[int | str]) -> str:
    """pydantic's location -> the API's field path (``spec.rules[0].candidateSelectors[1].scope``)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def field_errors(kind: str, exc: ValidationError) -> list[FieldError]:
    out: list[FieldError] = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        path = field_path(loc)
        if err.get("type") == "extra_forbidden":
            out.append(plain(path, f"unknown field {str(loc[-1])!r}: {OWNER[kind]} has no such field",
                             "remove it (toposched never keeps a field it does not act on)"))
            continue
        fix = f"write it as {OWNER[kind]} defines it"
        if err.get("type") == "missing":
            out.append(required(path, "", fix))
            continue
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        value = err.get("input")
        scalar = isinstance(value, str | int | float | bool) or value is None
        out.append(invalid(path, value if scalar else OMIT, msg, fix))
    return out


def config_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    try:
        m.PreemptionConfig.model_validate(obj)
    except ValidationError as exc:
        return field_errors("PreemptionConfig", exc)
    return []


def limit_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    try:
        ml.PreemptionLimit.model_validate(obj)
    except ValidationError as exc:
        return field_errors("PreemptionLimit", exc)
    return []


__all__ = ["config_errors", "field_errors", "field_path", "limit_errors"]
