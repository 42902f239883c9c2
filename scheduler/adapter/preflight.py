"""Can toposched be installed on this cluster? (docs/install.md, "Versions" and "Pre-flight").

Judges plain objects the command reads: the API server's ``gitVersion`` and Kueue's
CustomResourceDefinitions. One verdict per line, ``go:`` or ``no-go:``, then the overall one.

Which Kueue release installed the CRDs is read from their schema, since Kueue's CRDs carry no
release label: each release from v0.17 on changed something an admin's objects can use (read in
Kueue's ``config/components/crd/bases`` at each tag):

- v0.17.0: a Workload's topology request gained ``podsetSliceRequiredTopologyConstraints``;
- v0.18.0: a ClusterQueue's spec gained ``concurrentAdmissionPolicy``;
- v0.19.0: a Workload holds up to 18 pod sets (``spec.podSets`` ``maxItems`` 8 before; the
  CRDs of v0.19.0 and v0.19.2 are the same).

A later release with the same schemas reads as v0.19: the check cannot tell it apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.core.config import KUEUE_RELEASES, KUEUE_V017, KUEUE_V019

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API_VERSION = "v1beta2"  # what toposched reads and writes (scheduler.k8s.informer)
# Matching conditions on the webhooks (the default deny leaves the governed kinds to their own
# webhooks by them) are on by default from 1.28; the chart's kubeVersion says the same.
MIN_KUBERNETES = (1, 28)
TESTED_KUBERNETES = "v1.37.2"  # the local control plane's (scheduler.devcluster.binaries.K8S_VERSION)
# The Kueue kinds toposched's controller and webhook list and watch.
REQUIRED_CRDS = tuple(f"{plural}.{KUEUE_GROUP}" for plural in (
    "workloads", "clusterqueues", "localqueues", "resourceflavors", "topologies", "workloadpriorityclasses",
    "cohorts"))
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Check:
    go: bool
    text: str


@dataclass(frozen=True)
class PreflightReport:
    checks: tuple[Check, ...]

    @property
    def go(self) -> bool:
        return all(c.go for c in self.checks)

    def lines(self) -> list[str]:
        out = [f"{'go' if c.go else 'no-go'}: {c.text}" for c in self.checks]
        out.append("go: install toposched (docs/install.md)" if self.go
                   else "no-go: fix the lines above, then run toposched preflight again")
        return out


def scheduler_tag(git_version: str) -> str | None:
    """The kube-scheduler tag the chart derives from the cluster's version (``v1.33.5`` of
    ``v1.33.5-eks-3025e55``), or None when it has no patch number (the chart refuses then)."""
    match = _VERSION.match(git_version)
    return f"v{match.group(1)}.{match.group(2)}.{match.group(3)}" if match else None


def kubernetes_check(git_version: str) -> Check:
    match = _VERSION.match(git_version)
    if match is None:
        return Check(False, f"Kubernetes {git_version!r}: not a vMAJOR.MINOR.PATCH version; the chart cannot derive "
                            "kube-scheduler's version from it: set scheduler.image.tag")
    minor = (int(match.group(1)), int(match.group(2)))
    need = f"{MIN_KUBERNETES[0]}.{MIN_KUBERNETES[1]}"
    if minor < MIN_KUBERNETES:
        return Check(False, f"Kubernetes {git_version}: toposched needs {need} or later (webhook matchConditions); "
                            "upgrade the control plane first")
    return Check(True, f"Kubernetes {git_version} ({need} or later; tested on {TESTED_KUBERNETES}): the chart runs "
                       f"kube-scheduler {scheduler_tag(git_version)}")


def _version(crd: Obj, name: str) -> Obj | None:
    return next((v for v in (crd.get("spec") or {}).get("versions") or () if v.get("name") == name), None)


def _spec_schema(crd: Obj) -> Obj:
    version = _version(crd, KUEUE_API_VERSION) or {}
    root = ((version.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}
    return dict((root.get("spec") or {}).get("properties") or {})


def crd_check(name: str, crd: Obj | None) -> Check:
    if crd is None:
        return Check(False, f"CRD {name} is missing: install Kueue's CRDs (docs/install.md, step 2)")
    version = _version(crd, KUEUE_API_VERSION)
    if version is None or not version.get("served"):
        return Check(False, f"CRD {name} does not serve {KUEUE_GROUP}/{KUEUE_API_VERSION}, which toposched reads: "
                            "install Kueue v0.17 or v0.19's CRDs")
    return Check(True, f"CRD {name} serves {KUEUE_GROUP}/{KUEUE_API_VERSION}")


def crd_release(crds: Mapping[str, Obj]) -> str:
    """``v0.19``, ``v0.18``, ``v0.17`` or ``older`` from the schemas (module docstring)."""
    workload = _spec_schema(crds[f"workloads.{KUEUE_GROUP}"])
    pod_sets = dict(workload.get("podSets") or {})
    if int(pod_sets.get("maxItems") or 0) >= 18:
        return KUEUE_V019
    if "concurrentAdmissionPolicy" in _spec_schema(crds[f"clusterqueues.{KUEUE_GROUP}"]):
        return "v0.18"
    request = (((pod_sets.get("items") or {}).get("properties") or {}).get("topologyRequest") or {})
    if "podsetSliceRequiredTopologyConstraints" in (request.get("properties") or {}):
        return KUEUE_V017
    return "older"


def release_check(found: str, behave_as: str) -> Check:
    if found not in KUEUE_RELEASES:
        what = "older than v0.17" if found == "older" else found
        return Check(False, f"Kueue's CRDs are {what}'s; toposched behaves as "
                            f"{' or '.join(KUEUE_RELEASES.values())}: install one of those releases' CRDs")
    if found != behave_as:
        value = "-f deploy/helm/toposched/values-hyperpod.yaml (kueueVersion: v0.19)" if found == KUEUE_V019 \
            else f"--set kueueVersion={found}"
        return Check(False, f"Kueue's CRDs are {found}'s but toposched would behave as {behave_as}: install with "
                            f"{value} and run toposched preflight --kueue-version {found}")
    return Check(True, f"Kueue's CRDs are {found}'s ({KUEUE_RELEASES[found]}), as toposched will behave "
                       f"(--kueue-version {behave_as})")


def assess(*, git_version: str, crds: Sequence[Obj], behave_as: str) -> PreflightReport:
    """``crds``: the cluster's CustomResourceDefinitions (any group); ``behave_as``: the Kueue
    release the chart will be installed for (its ``kueueVersion``: v0.17, v0.19)."""
    by_name = {str((c.get("metadata") or {}).get("name")): c for c in crds}
    checks = [kubernetes_check(git_version)]
    checks += [crd_check(name, by_name.get(name)) for name in REQUIRED_CRDS]
    if all(c.go for c in checks[1:]):
        checks.append(release_check(crd_release(by_name), behave_as))
    return PreflightReport(tuple(checks))
