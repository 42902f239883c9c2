"""What docs/kueue-versions.md ("Not in either release, in toposched") and
docs/quota-and-preemption.md say is Kueue's and what is toposched's, checked against the code and
the manifests without a cluster: PreemptionConfig is read and defined in ``kueue.x-k8s.io`` and
installed only on request; PreemptionLimit is ``toposched.io`` everywhere toposched reads, writes
or installs it; nothing of toposched's is installed in Kueue's group by default (kustomize and
the chart's values, HyperPod's included). The rendered chart: tests/integration/test_helm_chart.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scheduler.k8s.informer import LEGACY_PREEMPTION_LIMITS, PREEMPTION_CONFIGS, PREEMPTION_LIMITS
from scheduler.models.preemption import PreemptionConfig
from scheduler.models.preemption_limit import PreemptionLimit

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "toposched"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_each_kind_is_in_the_group_the_docs_say() -> None:
    assert (PREEMPTION_CONFIGS.group, PREEMPTION_CONFIGS.version) == ("kueue.x-k8s.io", "v1alpha1")
    assert PreemptionConfig().api_version == "kueue.x-k8s.io/v1alpha1"
    assert (PREEMPTION_LIMITS.group, PREEMPTION_LIMITS.version) == ("toposched.io", "v1alpha1")
    assert PreemptionLimit.model_fields["api_version"].default == "toposched.io/v1alpha1"
    assert LEGACY_PREEMPTION_LIMITS.group == "kueue.x-k8s.io"  # read only, to migrate
    (limit_crd,) = _docs(ROOT / "deploy" / "crds" / "toposched-preemption-limits.yaml")
    assert limit_crd["metadata"] == {"name": "preemptionlimits.toposched.io",
                                     "labels": {"app.kubernetes.io/part-of": "toposched"},
                                     "annotations": {"helm.sh/resource-policy": "keep"}}
    (config_crd,) = _docs(ROOT / "deploy" / "crds" / "kueue-preemptionconfig.yaml")
    assert config_crd["spec"]["group"] == "kueue.x-k8s.io"
    assert config_crd["spec"]["names"]["kind"] == "PreemptionConfig"


def test_nothing_is_installed_in_kueues_group_by_default() -> None:
    kustomization = yaml.safe_load((ROOT / "deploy" / "kustomization.yaml").read_text())
    crds = [r for r in kustomization["resources"] if r.startswith("crds/")]
    assert crds == ["crds/toposched-preemption-limits.yaml"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    hyperpod = yaml.safe_load((CHART / "values-hyperpod.yaml").read_text())
    assert values["preemptionLimitCRD"] == {"install": True}
    assert values["kueuePreemptionConfigCRD"] == {"install": False}
    assert hyperpod["kueuePreemptionConfigCRD"] == {"install": False}
    assert "preemptionCRDs" not in values and "preemptionCRDs" not in hyperpod
    for name in ("toposched-preemption-limits.yaml", "kueue-preemptionconfig.yaml"):
        assert (ROOT / "deploy" / "crds" / name).read_text() == (CHART / "files" / name).read_text()
