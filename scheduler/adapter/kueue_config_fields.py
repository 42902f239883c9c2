"""Configuration fields a Kueue release added after v0.17.0: which release and API version has
each, so that a file is decoded as that Kueue's strict decoder decodes it.

Read from ``git diff v0.17.0 v0.19.2 -- apis/config/v1beta1/configuration_types.go
apis/config/v1beta2/configuration_types.go``. Kueue v0.17.0 (``pkg/config/config.go``,
``serializer.EnableStrict``) refuses each of them as an unknown field; so does Kueue v0.19.2's
v1beta1 for the ones only its v1beta2 gained. toposched leaves most of these sections to Kueue's
processes (``tls``, ``metrics``) or does not honour them (``multiKueue``), so it would never look
inside them: this module does, for the new fields only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.core.config import KUEUE_V019

V1BETA1 = "v1beta1"
V1BETA2 = "v1beta2"

# (path of the object holding the field, "[]" where it is each item of a list, field) -> the
# API versions of Kueue v0.19.2 that have it. None of them exists in v0.17.0.
V019_FIELDS: Mapping[tuple[str, str], frozenset[str]] = {
    ("tls", "curvePreferences"): frozenset({V1BETA1, V1BETA2}),
    ("metrics.customLabels[]", "sourceKind"): frozenset({V1BETA2}),
    ("metrics.customLabels[]", "trackedValues"): frozenset({V1BETA2}),
    ("multiKueue", "incrementalDispatcherConfig"): frozenset({V1BETA2}),
    ("multiKueue.clusterProfile", "accessProviders"): frozenset({V1BETA2}),
    ("resources", "quotaCheckStrategy"): frozenset({V1BETA2}),
    ("resources.deviceClassMappings[]", "sources"): frozenset({V1BETA2}),
}


def _objects(doc: Mapping[str, Any], path: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The objects at ``path`` (``a.b[]`` walks each item of the list ``a.b``), each with the
    JSON path Kueue's decoder names (``a.b[0]``); anything that is not an object is left to the
    section's own reader."""
    found: list[tuple[str, Mapping[str, Any]]] = [("", doc)]
    for part in path.split("."):
        each = part.endswith("[]")
        key = part.removesuffix("[]")
        step: list[tuple[str, Mapping[str, Any]]] = []
        for where, obj in found:
            value = obj.get(key)
            prefix = f"{where}.{key}" if where else key
            if each and isinstance(value, list):
                step.extend((f"{prefix}[{i}]", item) for i, item in enumerate(value) if isinstance(item, Mapping))
            elif not each and isinstance(value, Mapping):
                step.append((prefix, value))
        found = step
    return found


def unknown_field(doc: Mapping[str, Any], release: str, api_version: str) -> str | None:
    """Kueue's strict-decoding refusal of the first field of :data:`V019_FIELDS` that the
    ``release``'s ``api_version`` (``v1beta1``/``v1beta2``) does not have; None if there is none."""
    for (path, name), versions in V019_FIELDS.items():
        if release == KUEUE_V019 and api_version in versions:
            continue
        for where, obj in _objects(doc, path):
            if name in obj:
                return f'strict decoding error: unknown field "{where}.{name}"'
    return None
