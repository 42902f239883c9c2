"""The job-kind registry is the one place a kind is declared: the RBAC toposched ships (kustomize
and the Helm chart) grants exactly what the registry derives for each kind, the webhook
configurations carry one rule per kind, and each kind is spelled one way."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from admission import configs
from scheduler.adapter.kinds import rbac
from scheduler.adapter.kinds.notbuilt import NOT_BUILT
from scheduler.adapter.kinds.ownership import INTERIM_KINDS
from scheduler.adapter.kinds.registry import BY_FRAMEWORK, KINDS

ROOT = Path(__file__).resolve().parents[2]


def cluster_role(text: str, name: str) -> list[dict[str, Any]]:
    """The rules of ClusterRole ``name`` in a manifest or a chart template (template lines dropped)."""
    text = re.sub(r"\{\{-? */\*.*?\*/ *-?\}\}", "", text, flags=re.S)  # template comments
    for doc in text.split("\n---"):
        plain = "\n".join(line for line in doc.splitlines() if "{{" not in line)
        obj = yaml.safe_load(plain) or {}
        if obj.get("kind") == "ClusterRole" and obj.get("metadata", {}).get("name") == name:
            return list(obj.get("rules") or [])
    raise AssertionError(f"no ClusterRole {name}")


def grants_on_kinds(rules: list[dict[str, Any]], resources: set[tuple[str, str]]) -> rbac.Grants:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule.get("apiGroups") or ():
            for resource in rule.get("resources") or ():
                if (group, resource) in resources:
                    out.setdefault((group, resource), set()).update(rule.get("verbs") or ())
    return {key: frozenset(verbs) for key, verbs in out.items()}


def kind_resources(interim: bool) -> set[tuple[str, str]]:
    """Every resource of a governed kind (and its finalizers), and of the interim owner kinds
    when the role reads owners through them: what a role grants on them must be exactly what
    the registry derives, no more."""
    governed = {(k.group, r) for k in KINDS for r in (k.plural, f"{k.plural}/finalizers")}
    return governed | rbac.related_resources() | ({(k.group, k.plural) for k in INTERIM_KINDS} if interim else set())


@pytest.mark.parametrize("files, role, expected", [
    (("deploy/rbac/controller.yaml", "deploy/helm/toposched/templates/rbac-controller.yaml"), "toposched-controller",
     rbac.controller_grants()),
    (("deploy/rbac/webhook.yaml", "deploy/helm/toposched/templates/rbac-webhook.yaml"), "toposched-webhook",
     rbac.webhook_grants()),
    (("deploy/rbac/scheduler.yaml", "deploy/helm/toposched/templates/rbac-scheduler.yaml"), "toposched-extender",
     rbac.extender_grants()),
])
def test_shipped_rbac_grants_what_the_registry_derives(files: tuple[str, ...], role: str,
                                                      expected: rbac.Grants) -> None:
    for path in files:
        rules = cluster_role((ROOT / path).read_text(), role)
        assert grants_on_kinds(rules, kind_resources(role == "toposched-webhook")) == expected, path


def test_one_webhook_rule_per_kind_with_its_paths() -> None:
    client = configs.url_client_config("https://x")
    hooks = {h["name"]: h for c in (configs.mutating_configuration(client), configs.validating_configuration(client))
             for h in c["webhooks"]}
    for kind in KINDS:
        for prefix, path in (("m", kind.mutate_path), ("v", kind.validate_path)):
            hook = hooks[f"{prefix}{kind.kind.lower()}.toposched.io"]
            assert hook["clientConfig"]["url"] == f"https://x{path}"
            assert hook["rules"][0]["apiGroups"] == [kind.group] and hook["rules"][0]["resources"] == [kind.plural]


def test_the_chart_lists_the_same_kinds_as_the_registry() -> None:
    """The chart's webhook template cannot import Python: its list of kinds is checked here
    (tests/integration/test_helm_chart.py renders it and compares it with deploy/)."""
    text = (ROOT / "deploy/helm/toposched/templates/webhook-configurations.yaml").read_text()
    listed = re.findall(r'\(list "m(\w+)" "v\w+" "(/mutate-[^"]+)" "(/validate-[^"]+)" "([^"]*)" "(\w+)" "(\w+)" '
                        r'"(\w+)"\)', text)
    assert listed == [(k.kind.lower(), k.mutate_path, k.validate_path, k.group, k.version, k.plural,
                       "managed" if k.kind == "Pod" else "default") for k in KINDS]


# Kueue v0.17.0's integration names (pkg/controller/jobs/*/..._controller.go FrameworkName).
KUEUE_FRAMEWORKS = {"batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob", "kubeflow.org/mpijob",
                    "leaderworkerset.x-k8s.io/leaderworkerset", "trainer.kubeflow.org/trainjob", "ray.io/rayjob",
                    "ray.io/raycluster", "ray.io/rayservice", "pod", "deployment", "statefulset",
                    "workload.codeflare.dev/appwrapper", "sparkoperator.k8s.io/sparkapplication",
                    "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob", "kubeflow.org/jaxjob"}


def test_one_spelling_per_kind() -> None:
    """Kueue's framework names are the registry's keys; no kind is both built and not built."""
    assert len(BY_FRAMEWORK) == len(KINDS)
    assert all(k.framework in KUEUE_FRAMEWORKS for k in KINDS if k.builtin)
    assert [k.kind for k in KINDS if not k.builtin] == ["HyperPodPyTorchJob"]  # an external framework in Kueue
    built = {(k.group, k.kind) for k in KINDS}
    assert not built & {(k.group, k.kind) for k in NOT_BUILT}


def test_files_naming_one_kind_outside_the_registry() -> None:
    """Issue 31: adding a kind is one module and a registry line. Outside devcluster/ and
    commands/, the Python that names MPIJob is its kind module (and nothing else)."""
    naming = sorted(str(p.relative_to(ROOT)) for d in ("scheduler", "admission") for p in (ROOT / d).rglob("*.py")
                    if "MPIJob" in p.read_text() and not {"devcluster", "commands"} & set(p.parts))
    assert naming == ["scheduler/adapter/kinds/mpijob.py"]


def test_the_charts_default_deny_leaves_out_the_same_kinds_as_the_registry() -> None:
    """The chart's ``not-a-registry-kind`` condition is written out by hand (Go templates cannot
    read the registry): it must name exactly the registry's kinds, or a queued kind would cost two
    validating calls, or one left out of the registry would pass the default deny unread."""
    text = (ROOT / "deploy/helm/toposched/templates/webhook-configurations.yaml").read_text()
    [line] = [line for line in text.splitlines() if line.startswith("{{- $notRegistryKind :=")]
    expression = json.loads(line.split('"expression" ', 1)[1].removesuffix(" }}"))
    assert expression == configs.not_a_registry_kind()[0]["expression"]
