"""Issue 40: ``toposched preflight`` judges the cluster's Kubernetes version and Kueue's CRDs,
go/no-go line by line (scheduler.adapter.preflight). The release is read from the CRDs' schemas
as each Kueue tag wrote them (module docstring); the real v0.17.0 files are used when the Go
module cache holds them (the local control plane applies the same files)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.adapter.preflight import REQUIRED_CRDS, assess, crd_release, kubernetes_check, scheduler_tag
from scheduler.cli import main


def crd(name: str, spec: dict[str, Any] | None = None,
        served: tuple[str, ...] = ("v1beta1", "v1beta2")) -> dict[str, Any]:
    versions = [{"name": v, "served": True, "storage": v == "v1beta2",
                 "schema": {"openAPIV3Schema": {"properties": {"spec": {"properties": spec or {}}}}}}
                for v in served]
    return {"metadata": {"name": name}, "spec": {"group": "kueue.x-k8s.io", "versions": versions}}


def kueue_crds(release: str) -> list[dict[str, Any]]:
    """The schema points each release changed (v0.17: slice layers; v0.18: a ClusterQueue's
    concurrentAdmissionPolicy; v0.19: 18 pod sets), the rest empty."""
    layers = {"podsetSliceRequiredTopologyConstraints": {"type": "array"}} if release != "v0.16" else {}
    pod_sets = {"maxItems": 18 if release == "v0.19" else 8,
                "items": {"properties": {"topologyRequest": {"properties": {"required": {}, **layers}}}}}
    cq = {"concurrentAdmissionPolicy": {"type": "object"}} if release in ("v0.18", "v0.19") else {}
    out = []
    for name in REQUIRED_CRDS:
        spec = {"podSets": pod_sets} if name.startswith("workloads.") else {}
        out.append(crd(name, cq if name.startswith("clusterqueues.") else spec))
    return out


def test_scheduler_tag_is_the_clusters_version_without_its_suffix() -> None:
    assert scheduler_tag("v1.33.5-eks-3025e55") == "v1.33.5"
    assert scheduler_tag("v1.31.12+k3s1") == "v1.31.12"
    assert scheduler_tag("v1.33") is None


def test_kubernetes_version_lines() -> None:
    eks = kubernetes_check("v1.33.5-eks-3025e55")
    assert eks.go and "kube-scheduler v1.33.5" in eks.text
    old = kubernetes_check("v1.27.16-eks-2f46c53")
    assert not old.go and "needs 1.28 or later" in old.text
    assert not kubernetes_check("weird").go


@pytest.mark.parametrize(("release", "found"), [("v0.17", "v0.17"), ("v0.18", "v0.18"), ("v0.19", "v0.19"),
                                                ("v0.16", "older")])
def test_the_release_is_read_from_the_schemas(release: str, found: str) -> None:
    by_name = {c["metadata"]["name"]: c for c in kueue_crds(release)}
    assert crd_release(by_name) == found


def test_go_when_the_crds_match_the_release_toposched_behaves_as() -> None:
    report = assess(git_version="v1.33.5-eks-3025e55", crds=kueue_crds("v0.19"), behave_as="v0.19")
    lines = report.lines()
    assert report.go and all(line.startswith("go: ") for line in lines), lines
    assert len(lines) == 1 + len(REQUIRED_CRDS) + 1 + 1
    assert "Kueue's CRDs are v0.19's (v0.19.2), as toposched will behave (--kueue-version v0.19)" in lines[-2]


def test_no_go_lines_say_what_to_do() -> None:
    mismatch = assess(git_version="v1.33.5-eks-3025e55", crds=kueue_crds("v0.19"), behave_as="v0.17")
    assert not mismatch.go
    assert ("no-go: Kueue's CRDs are v0.19's but toposched would behave as v0.17: install with -f "
            "deploy/helm/toposched/values-hyperpod.yaml (kueueVersion: v0.19) and run toposched preflight "
            "--kueue-version v0.19") in mismatch.lines()
    v018 = assess(git_version="v1.33.5", crds=kueue_crds("v0.18"), behave_as="v0.17")
    assert any(line.startswith("no-go: Kueue's CRDs are v0.18's; toposched behaves as v0.17.0 or v0.19.2")
               for line in v018.lines())
    missing = [c for c in kueue_crds("v0.17") if not c["metadata"]["name"].startswith("topologies.")]
    report = assess(git_version="v1.33.5", crds=missing, behave_as="v0.17")
    assert "no-go: CRD topologies.kueue.x-k8s.io is missing: install Kueue's CRDs (docs/install.md, step 2)" \
        in report.lines()
    assert not any("CRDs are" in line for line in report.lines()), "no release guessed from a partial set"
    old_api = [crd(c["metadata"]["name"], served=("v1beta1",)) if c["metadata"]["name"].startswith("workloads.")
               else c for c in kueue_crds("v0.17")]
    assert any(line.startswith("no-go: CRD workloads.kueue.x-k8s.io does not serve kueue.x-k8s.io/v1beta2")
               for line in assess(git_version="v1.33.5", crds=old_api, behave_as="v0.17").lines())


def _module_crds() -> list[dict[str, Any]]:
    try:
        out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    bases = Path(out.stdout.strip(), "sigs.k8s.io", "kueue@v0.17.0", "config", "components", "crd", "bases")
    return [yaml.safe_load(p.read_text()) for p in sorted(bases.glob("*.yaml"))]


def test_kueue_v0170s_own_crds_read_as_v017() -> None:
    crds = _module_crds()
    if not crds:
        pytest.skip("Kueue v0.17.0 is not in the Go module cache")
    report = assess(git_version="v1.37.2", crds=crds, behave_as="v0.17")
    assert report.go, report.lines()
    assert "go: Kueue's CRDs are v0.17's (v0.17.0), as toposched will behave (--kueue-version v0.17)" \
        in report.lines()


def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", "--kueue-version", "v0.18"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["toposched preflight: --kueue-version: unsupported Kueue version 'v0.18': toposched behaves as "
                   "v0.17 (v0.17.0), v0.19 (v0.19.2)"]
    assert main(["preflight", "--kubeconfig", "/nonexistent/kubeconfig"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
