"""The controller's side of the job-kind registry (``scheduler/adapter/kinds``): the API
resource of each governed kind, and the index the phases read (object uid -> (kind, object)).

Nothing in the controller knows a job's kind: the phases call the kind's declaration
(``JobKind``: pod sets, suspend / start / restore patches, finish state, readiness) on the
object they hold. Adding a kind is one module and one registry line (docs/design/job-kinds.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.adapter.kinds.base import JobKind
from scheduler.k8s.informer import Resource

Obj = dict[str, Any]
# uid -> (its kind, the object), over the queued objects of the enabled suspendable kinds.
JobIndex = Mapping[str, tuple[JobKind, Obj]]


def resource_of(kind: JobKind) -> Resource:
    return Resource(kind.group, kind.version, kind.plural)
