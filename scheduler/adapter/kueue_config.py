"""Kueue's own Configuration file -> :class:`scheduler.core.config.KueueConfig`.

An admin's ``config.kueue.x-k8s.io/v1beta2`` (or ``v1beta1``) Configuration — the file Kueue
is started with (``--config``) — works unchanged: toposched reads the fields that decide
scheduling (``featureGates``, ``fairSharing``, ``admissionFairSharing``, ``waitForPodsReady``,
``integrations.frameworks``) with Kueue v0.17's defaults
and validation, and sorts every other field it finds into one of two lists reported once at
start-up:

- *process settings* (``webhook``, ``metrics``, ``health``, ``leaderElection``, ...): Kueue's
  own server settings; toposched's processes take theirs from their flags;
- *not supported*: fields that change scheduling which toposched does not implement yet
  (``multiKueue``, ``resources.*``, ...): the admin must know their setting is
  not honoured.

Like Kueue (a strict decoder), a field Kueue does not know is an error, as is a value Kueue's
validation refuses; messages name the field path as Kueue's do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from scheduler.adapter.kueue_config_fields import unknown_field
from scheduler.adapter.kueue_gates import KUEUE_GATES, KUEUE_LOCKED_GATES
from scheduler.core.config import (
    DEFAULT_KUEUE_RELEASE,
    GATE_DEFAULTS_BY_RELEASE,
    KUEUE_RELEASES,
    KUEUE_V019,
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    AdmissionFairSharing,
    FairSharing,
    FeatureGates,
    KueueConfig,
    RequeuingStrategy,
    WaitForPodsReady,
    kueue_defaults,
)

GROUP = "config.kueue.x-k8s.io"
API_VERSIONS = (f"{GROUP}/v1beta2", f"{GROUP}/v1beta1")
KIND = "Configuration"
MAX_BYTES = 1 << 20

# Kueue v0.17.0's feature gates and their defaults (pkg/features/kube_features.go), kept under
# this name for callers (the conformance harness); every release's list is in kueue_gates.py.
KUEUE_V017_GATES: Mapping[str, bool] = KUEUE_GATES["v0.17"]
# component-base's umbrella gates, accepted by every Kubernetes-style feature gate set.
_UMBRELLA_GATES = ("AllAlpha", "AllBeta")

# Top-level fields of Kueue's Configuration that configure Kueue's own processes (servers,
# certificates, client, leader election); toposched's commands have flags for their own.
PROCESS_SETTINGS = frozenset({
    "namespace", "internalCertManagement", "clientConnection", "webhook", "leaderElection", "metrics",
    "health", "pprofBindAddress", "controller", "tls", "visibilityServer", "queueVisibility",
})
# Fields that change scheduling which toposched does not implement.
NOT_SUPPORTED = frozenset({
    "multiKueue", "objectRetentionPolicies", "managedJobsNamespaceSelector", "podOptions",
})
_HONOURED = frozenset({"apiVersion", "kind", "featureGates", "fairSharing", "admissionFairSharing",
                       "waitForPodsReady", "resources", "integrations", "manageJobsWithoutQueueName"})
_TOP_LEVEL = PROCESS_SETTINGS | NOT_SUPPORTED | _HONOURED

_VALID_STRATEGIES = (
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (LESS_THAN_INITIAL_SHARE,),
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE),
)
_V1BETA1_WAIT_TIMEOUT_S = 300.0  # v1beta1 defaulted the timeout to 5 minutes
_V019_WAIT_TIMEOUT_S = 1800.0  # v0.19's v1beta2 default (DefaultWaitForPodsReadyTimeout)
# resources.quotaCheckStrategy (v0.19; QuotaCheckStrategy gate): BlockUndeclared is v0.17's behaviour.
# In the order Kueue's field.NotSupported lists them (pkg/config/validation.go at v0.19.2).
QUOTA_CHECK_STRATEGIES = ("IgnoreUndeclared", "BlockUndeclared")


class ConfigError(ValueError):
    """The file is not a Configuration Kueue would start with. ``str()`` is one line."""


@dataclass(frozen=True)
class LoadedConfig:
    config: KueueConfig
    process_settings: tuple[str, ...] = ()  # field paths toposched leaves to its own flags
    not_supported: tuple[str, ...] = ()  # field paths whose setting toposched does not honour
    inert_gates: tuple[str, ...] = field(default=())  # Kueue gates set here that toposched does not act on

    def report(self) -> list[str]:
        """The start-up lines (empty when everything in the file is honoured)."""
        lines = []
        if self.not_supported:
            lines.append("Kueue Configuration: NOT honoured by toposched (scheduling differs from Kueue's): "
                         + ", ".join(self.not_supported))
        if self.inert_gates:
            lines.append("Kueue Configuration: featureGates toposched does not act on (Kueue's behaviour "
                         "without them applies): " + ", ".join(self.inert_gates))
        if self.process_settings:
            lines.append("Kueue Configuration: Kueue process settings, ignored (toposched's commands take "
                         "theirs from flags): " + ", ".join(self.process_settings))
        return lines


# ------------------------------------------------------------------ small readers
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: object, path: str) -> float:
    """A Go ``time.Duration`` string (``1h30m``, ``300ms``, ``0s``) in seconds, as metav1.Duration reads it."""
    if not isinstance(text, str) or not text:
        raise ConfigError(f"{path}: invalid duration {text!r}: expected a string such as \"30m\" or \"1h30m\"")
    sign = -1.0 if text.startswith("-") else 1.0
    body = text[1:] if text[0] in "+-" else text
    if body == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None:
            raise ConfigError(f"{path}: time: invalid duration {text!r}")
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if pos == 0:
        raise ConfigError(f"{path}: time: invalid duration {text!r}")
    return sign * total


def _mapping(value: object, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: expected an object, got {type(value).__name__}")
    return value


def _only(obj: Mapping[str, Any], known: frozenset[str] | set[str], path: str) -> None:
    for key in obj:
        if key not in known:
            raise ConfigError(f'strict decoding error: unknown field "{path}.{key}"')


def _int(value: object, path: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{path}: expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{path}: Invalid value: {value}: must be greater than or equal to {minimum}")
    return value


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: expected true or false, got {value!r}")
    return value


# ------------------------------------------------------------------ sections
# Gates Kueue refuses without others (pkg/config/validation.go at v0.19.2), among those toposched acts on.
_GATE_DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "UnadmittedWorkloadsExplicitStatus": ("UnadmittedWorkloadsObservability",),
}
# toposched's own names for behaviour that a Kueue release lacks but toposched offers
# (docs/kueue-config.md "toposched's settings"): ``featureGates: {toposched.io/<Gate>: true}``. Under
# a release that has the Kueue gate, its Kueue name works too; under one that lacks it (v0.17.0 has
# none of these), the Kueue name is refused as that Kueue refuses it.
TOPOSCHED_GATE_PREFIX = "toposched.io/"
TOPOSCHED_GATES = frozenset({
    "TASRespectNodeAffinityPreferred",  # preferred node affinity orders domains (Kueue v0.18.0+)
    "WorkloadPriorityClassDefaulting",  # the "default" WorkloadPriorityClass (Kueue v0.18.0+)
    "UnadmittedWorkloadsObservability",  # granular QuotaReserved reasons (Kueue v0.18.5/v0.19.0+)
})
# Gates of the v0.20 cycle toposched builds, in no release it behaves as; accepted under both.
LATER_RELEASE_GATES = frozenset({"TASTopologySpreading", "TASPartialSlices"})


def _unrecognized(name: str, release: str) -> ConfigError:
    """component-base's refusal (``SetFromMap``: "unrecognized feature gate: X"), naming the
    Kueue tag; for a behaviour toposched offers under its own name, that name."""
    message = f"featureGates: unrecognized feature gate: {name} (Kueue {KUEUE_RELEASES[release]})"
    if name in TOPOSCHED_GATES:
        message += f"; toposched offers this behaviour as featureGates.{TOPOSCHED_GATE_PREFIX}{name}"
    return ConfigError(message)


def _feature_gates(raw: object, release: str) -> tuple[FeatureGates, tuple[str, ...]]:
    gates = _mapping(raw, "featureGates")
    ours, kueue = GATE_DEFAULTS_BY_RELEASE[release], KUEUE_GATES[release]
    overrides: dict[str, bool] = {}
    inert: list[str] = []
    for name, value in gates.items():
        enabled = _bool(value, f"featureGates.{name}")
        own = name.removeprefix(TOPOSCHED_GATE_PREFIX) if name.startswith(TOPOSCHED_GATE_PREFIX) else None
        if own is not None:
            if own not in TOPOSCHED_GATES:
                raise ConfigError(f"featureGates: unknown toposched setting: {name}; toposched's are "
                                  + ", ".join(TOPOSCHED_GATE_PREFIX + g for g in sorted(TOPOSCHED_GATES)))
            if own in gates and gates[own] != enabled:
                raise ConfigError(f"featureGates: {own} and {name} disagree; set one of them")
            overrides[own] = enabled
            continue
        if name not in kueue and name not in LATER_RELEASE_GATES and name not in _UMBRELLA_GATES:
            raise _unrecognized(name, release)
        if name in KUEUE_LOCKED_GATES[release] and enabled != kueue[name]:
            raise ConfigError(f"featureGates: cannot set feature gate {name} to {str(enabled).lower()}, "
                              f"feature is locked to {str(kueue[name]).lower()} (Kueue {KUEUE_RELEASES[release]})")
        if name in ours:
            overrides[name] = enabled
        elif enabled != kueue.get(name, False):
            inert.append(f"{name}={str(enabled).lower()}")
    result = FeatureGates(overrides, release)
    for gate, needs in _GATE_DEPENDENCIES.items():  # Kueue's validateFeatureGateDependency
        for dependency in needs:
            if gate in ours and result.enabled(gate) and not result.enabled(dependency):
                raise ConfigError(f'featureGates: Invalid value: "{gate}": {gate} requires {dependency} to be enabled')
    return result, tuple(inert)


def _fair_sharing(raw: object, v1beta1: bool) -> FairSharing:
    if raw is None:
        return FairSharing()
    fs = _mapping(raw, "fairSharing")
    _only(fs, {"enable", "preemptionStrategies"} if v1beta1 else {"preemptionStrategies"}, "fairSharing")
    if v1beta1 and not _bool(fs.get("enable", False), "fairSharing.enable"):
        return FairSharing()
    raw_strategies = fs.get("preemptionStrategies")
    if not raw_strategies:
        if v1beta1:  # v1beta1 defaulted the list
            return FairSharing(enabled=True)
        raise ConfigError("fairSharing.preemptionStrategies: Required value: must be specified")
    strategies = tuple(str(s) for s in raw_strategies) if isinstance(raw_strategies, list) else ()
    if strategies not in _VALID_STRATEGIES:
        supported = ", ".join("[" + ", ".join(s) + "]" for s in _VALID_STRATEGIES)
        raise ConfigError(f"fairSharing.preemptionStrategies: Unsupported value: {raw_strategies!r}: "
                          f"supported values: {supported}")
    return FairSharing(enabled=True, preemption_strategies=strategies)


def _admission_fair_sharing(raw: object) -> AdmissionFairSharing:
    if raw is None:
        return AdmissionFairSharing()
    afs = _mapping(raw, "admissionFairSharing")
    _only(afs, {"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"}, "admissionFairSharing")
    half_life = parse_duration(afs.get("usageHalfLifeTime", "0s"), "admissionFairSharing.usageHalfLifeTime")
    if half_life < 0:
        raise ConfigError("admissionFairSharing.usageHalfLifeTime: Invalid value: must be greater than or equal to 0")
    sampling = parse_duration(afs.get("usageSamplingInterval", "5m"), "admissionFairSharing.usageSamplingInterval")
    if sampling <= 0:
        raise ConfigError("admissionFairSharing.usageSamplingInterval: Invalid value: must be greater than 0")
    weights: dict[str, float] = {}
    for res, value in _mapping(afs.get("resourceWeights"), "admissionFairSharing.resourceWeights").items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"admissionFairSharing.resourceWeights[{res}]: Invalid value: {value!r}: "
                              "must be greater than or equal to 0")
        weights[str(res)] = float(value)
    return AdmissionFairSharing(enabled=True, usage_half_life_time_s=half_life, usage_sampling_interval_s=sampling,
                                resource_weights=weights)


def _requeuing(raw: object) -> RequeuingStrategy:
    rs = _mapping(raw, "waitForPodsReady.requeuingStrategy")
    path = "waitForPodsReady.requeuingStrategy"
    _only(rs, {"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}, path)
    timestamp = rs.get("timestamp", "Eviction")
    if timestamp not in ("Eviction", "Creation"):
        raise ConfigError(f'{path}.timestamp: Unsupported value: "{timestamp}": '
                          'supported values: "Creation", "Eviction"')
    limit = rs.get("backoffLimitCount")
    return RequeuingStrategy(
        timestamp=str(timestamp),
        backoff_limit_count=None if limit is None else _int(limit, f"{path}.backoffLimitCount", 0),
        backoff_base_seconds=_int(rs.get("backoffBaseSeconds", 60), f"{path}.backoffBaseSeconds", 0),
        backoff_max_seconds=_int(rs.get("backoffMaxSeconds", 3600), f"{path}.backoffMaxSeconds", 0),
    )


def _wait_for_pods_ready(raw: object, v1beta1: bool, release: str) -> WaitForPodsReady:
    """v0.17: absent = off, ``timeout`` required (v1beta2). v0.19: absent = on with a 30-minute
    timeout, and a missing timeout defaults to 30 minutes (Kueue #11855). v1beta1 keeps ``enable``."""
    v019 = release == KUEUE_V019 and not v1beta1
    if raw is None:
        return kueue_defaults(release).wait_for_pods_ready if v019 else WaitForPodsReady()
    w = _mapping(raw, "waitForPodsReady")
    known = {"timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"}
    _only(w, known | {"enable"} if v1beta1 else known, "waitForPodsReady")
    if v1beta1 and not _bool(w.get("enable", False), "waitForPodsReady.enable"):
        return WaitForPodsReady()
    if "timeout" not in w and not v1beta1 and not v019:
        raise ConfigError("waitForPodsReady.timeout: Required value: set the time an admitted workload has to "
                          "reach PodsReady=True, e.g. timeout: 5m")
    default_timeout = _V019_WAIT_TIMEOUT_S if v019 else _V1BETA1_WAIT_TIMEOUT_S
    timeout = parse_duration(w["timeout"], "waitForPodsReady.timeout") if "timeout" in w else default_timeout
    if timeout == 0 and v019:
        timeout = _V019_WAIT_TIMEOUT_S  # Kueue v0.19 defaults a zero timeout before validating
    if timeout < 0:
        raise ConfigError("waitForPodsReady.timeout: Invalid value: must be greater than or equal to 0")
    recovery = w.get("recoveryTimeout")
    recovery_s = None if recovery is None else parse_duration(recovery, "waitForPodsReady.recoveryTimeout")
    if recovery_s is not None and recovery_s < 0:
        raise ConfigError("waitForPodsReady.recoveryTimeout: Invalid value: must be greater than or equal to 0")
    return WaitForPodsReady(enabled=True, timeout_s=timeout, recovery_timeout_s=recovery_s,
                            block_admission=_bool(w.get("blockAdmission", False), "waitForPodsReady.blockAdmission"),
                            requeuing_strategy=_requeuing(w.get("requeuingStrategy")))


def _resources(raw: object, not_supported: list[str], gate_on: bool) -> str:
    """The ``resources`` section: what toposched does not honour is listed; returns the quota
    check strategy (Kueue validates it only with the QuotaCheckStrategy gate on, and ignores it
    with the gate off)."""
    res = _mapping(raw, "resources")
    # quotaCheckStrategy's release and API version: kueue_config_fields (checked before this)
    _only(res, {"excludeResourcePrefixes", "transformations", "deviceClassMappings", "quotaCheckStrategy"},
          "resources")
    not_supported.extend(f"resources.{k}" for k in ("excludeResourcePrefixes", "transformations",
                                                    "deviceClassMappings") if res.get(k))
    strategy = res.get("quotaCheckStrategy")
    if strategy is None or not gate_on:
        return "BlockUndeclared"
    if strategy == "IgnoreUndeclared" and res.get("excludeResourcePrefixes"):
        raise ConfigError('resources.quotaCheckStrategy: Invalid value: "IgnoreUndeclared": excludeResourcePrefixes '
                          "is not allowed when quotaCheckStrategy is IgnoreUndeclared")
    if strategy not in QUOTA_CHECK_STRATEGIES:
        raise ConfigError(f'resources.quotaCheckStrategy: Unsupported value: "{strategy}": supported values: '
                          + ", ".join(f'"{v}"' for v in QUOTA_CHECK_STRATEGIES))
    return str(strategy)


def _frameworks(raw: object, not_supported: list[str]) -> tuple[str, ...]:
    integrations = _mapping(raw, "integrations")
    _only(integrations, {"frameworks", "externalFrameworks", "podOptions", "labelKeysToCopy"}, "integrations")
    not_supported.extend(f"integrations.{k}" for k in ("podOptions", "labelKeysToCopy") if integrations.get(k))
    frameworks = integrations.get("frameworks") or []
    if not isinstance(frameworks, list):
        raise ConfigError("integrations.frameworks: expected a list of framework names such as batch/job")
    return tuple(str(f) for f in frameworks)


def external_framework(arg: str) -> tuple[str, str, str] | None:
    """Kubernetes' ``schema.ParseKindArg`` as Kueue validates ``integrations.externalFrameworks``:
    ``Kind.version.group`` (at least two dots; the group is everything after the second)."""
    if arg.count(".") < 2:
        return None
    kind, version, group = arg.split(".", 2)
    return group, version, kind


def _external_frameworks(raw: object) -> tuple[tuple[str, str, str], ...]:
    """Kueue's ``validateIntegrations`` for ``integrations.externalFrameworks``: each one
    ``Kind.version.group``, none twice."""
    listed = _mapping(raw, "integrations").get("externalFrameworks") or []
    if not isinstance(listed, list):
        raise ConfigError("integrations.externalFrameworks: expected a list such as "
                          "[HyperPodPytorchJob.v1.sagemaker.amazonaws.com]")
    out: list[tuple[str, str, str]] = []
    for i, arg in enumerate(listed):
        gvk = external_framework(str(arg))
        path = f"integrations.externalFrameworks[{i}]"
        if gvk is None:
            raise ConfigError(f"{path}: Invalid value: \"{arg}\": must be format, 'Kind.version.group.com'")
        if gvk in out:
            raise ConfigError(f"{path}: Duplicate value: \"{arg}\"")
        out.append(gvk)
    return tuple(out)


# ------------------------------------------------------------------ entry points
def parse_kueue_config(doc: object, release: str = DEFAULT_KUEUE_RELEASE) -> LoadedConfig:
    """One Configuration object (a decoded YAML document) -> :class:`LoadedConfig`, read as
    Kueue ``release`` reads it (its gate list, its defaults, its fields)."""
    obj = _mapping(doc, "Configuration")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version not in API_VERSIONS or kind != KIND:
        raise ConfigError(f"expected apiVersion {API_VERSIONS[0]} (or {API_VERSIONS[1]}) and kind {KIND}, "
                          f"got apiVersion {api_version!r}, kind {kind!r}: this is not Kueue's Configuration file")
    for key in obj:
        if key not in _TOP_LEVEL:
            raise ConfigError(f'strict decoding error: unknown field "{key}"')
    v1beta1 = api_version.endswith("/v1beta1")
    later = unknown_field(obj, release, api_version.rsplit("/", 1)[-1])
    if later is not None:
        raise ConfigError(later)
    not_supported = sorted(k for k in NOT_SUPPORTED if obj.get(k))
    if obj.get("manageJobsWithoutQueueName"):
        not_supported.append("manageJobsWithoutQueueName")
    gates, inert = _feature_gates(obj.get("featureGates"), release)
    strategy = _resources(obj.get("resources"), not_supported, gates.enabled("QuotaCheckStrategy"))
    wait = _wait_for_pods_ready(obj.get("waitForPodsReady"), v1beta1, release)
    if gates.enabled("DisableWaitForPodsReady"):  # v0.19's temporary off switch
        wait = WaitForPodsReady()
    config = KueueConfig(
        feature_gates=gates,
        fair_sharing=_fair_sharing(obj.get("fairSharing"), v1beta1),
        admission_fair_sharing=_admission_fair_sharing(obj.get("admissionFairSharing")),
        wait_for_pods_ready=wait,
        frameworks=_frameworks(obj.get("integrations"), not_supported),
        external_frameworks=_external_frameworks(obj.get("integrations")),
        quota_check_strategy=strategy,
    )
    process = tuple(sorted(k for k in PROCESS_SETTINGS if k in obj))
    return LoadedConfig(config, process, tuple(sorted(not_supported)), inert)


def load_kueue_config_text(text: str, source: str = "the Kueue Configuration",
                           release: str = DEFAULT_KUEUE_RELEASE) -> LoadedConfig:
    if len(text.encode()) > MAX_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_BYTES} bytes; a Kueue Configuration is a few kilobytes")
    if "\0" in text:
        raise ConfigError(f"{source}: not a text file (a NUL byte at offset {text.index(chr(0))})")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{source}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from exc
    except RecursionError:
        raise ConfigError(f"{source}: nests too deep; a Kueue Configuration nests a few levels") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a timestamp with month 13
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    try:
        return parse_kueue_config(doc, release)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
