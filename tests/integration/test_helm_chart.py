"""The Helm chart deploy/helm/toposched, rendered by the real helm (helm.sh/helm/v4, built from
the Go module proxy into the toposched cache), stays in step with the kustomize manifests in
deploy/: with default values it renders the same objects, field by field (RBAC rules,
webhooks, pod specs), apart from what Helm adds (bookkeeping labels) or kustomize adds (the
ConfigMap hash suffix), and the Namespace, which a chart does not own. Its options render what
they promise, and every object passes the real API server's server-side dry-run apply.

Kept in step by comparison, not generation: the kustomize files stay readable and commented,
and a change to either side fails here until the other follows.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from scheduler.adapter.kueue_config import load_kueue_config_text
from scheduler.devcluster import binaries
from scheduler.errors import UserError
from scheduler.k8s.informer import Api
from tests.integration.test_deploy import KUBECTL, NS
from tests.integration.test_deploy import render as render_kustomize

CHART = binaries.repo_root() / "deploy" / "helm" / "toposched"
RELEASE = "toposched"
# Labels Helm's chart conventions add and kustomize does not.
HELM_LABELS = {"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version",
               "helm.sh/chart"}
CONFIGMAP_HASH = re.compile(r"^(toposched-scheduler-config)-[a-z0-9]{10}$")

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def helm() -> Path:
    if not binaries.helm_binary_path().is_file() and shutil.which("go") is None:
        pytest.skip("helm is built from the Go module proxy and Go is not on PATH")
    try:
        return binaries.ensure_helm()
    except UserError as err:
        pytest.fail(f"cannot build helm {binaries.HELM_VERSION}: {err}")


def helm_template(helm: Path, values: dict[str, Any] | None = None, tmp_path: Path | None = None,
                  kube_version: str = binaries.K8S_VERSION) -> list[Obj]:
    """``helm template`` as a cluster of ``kube_version`` (the local control plane's by default)
    would render it: the kube-scheduler tag follows the cluster's version."""
    args = [str(helm), "template", RELEASE, str(CHART), "--namespace", NS, "--kube-version", kube_version]
    if values:
        assert tmp_path is not None
        path = tmp_path / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        args += ["--values", str(path)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if out.returncode != 0:
        raise HelmError(out.stderr.strip())
    return [d for d in yaml.safe_load_all(out.stdout) if d]


class HelmError(Exception):
    pass


def by_key(objects: list[Obj]) -> dict[tuple[str, str, str], Obj]:
    keyed = {}
    for o in objects:
        key = (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", ""))
        assert key not in keyed, f"duplicate object {key}"
        keyed[key] = o
    return keyed


def _normalise_pod_spec(spec: Obj) -> None:
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        # Kubernetes' default for a non-latest tag; the chart states it, kustomize leaves it out.
        if container.get("imagePullPolicy") == "IfNotPresent":
            del container["imagePullPolicy"]
    for volume in spec.get("volumes", []):
        cm = volume.get("configMap")
        if cm:
            cm["name"] = CONFIGMAP_HASH.sub(r"\1", cm["name"])


def normalise(obj: Obj) -> Obj:
    """What must be equal between the two renders, without each tool's own additions."""
    o = copy.deepcopy(obj)
    meta = o["metadata"]
    meta["name"] = CONFIGMAP_HASH.sub(r"\1", meta["name"])
    meta["labels"] = {k: v for k, v in meta.get("labels", {}).items() if k not in HELM_LABELS}
    if o["kind"] == "ConfigMap":  # kustomize keeps the file's comments: compare what it says
        o["data"] = {k: yaml.safe_load(v) for k, v in o["data"].items()}
    if o["kind"] == "Deployment":
        template = o["spec"]["template"]
        annotations = template["metadata"].pop("annotations", {})
        annotations.pop("checksum/config", None)  # the chart's stand-in for the hash suffix
        if annotations:
            template["metadata"]["annotations"] = annotations
        _normalise_pod_spec(template["spec"])
    return o


@pytest.fixture(scope="module")
def chart_objects(helm: Path) -> list[Obj]:
    return helm_template(helm)


@pytest.fixture(scope="module")
def kustomize_objects() -> list[Obj]:
    return render_kustomize()


def test_helm_is_the_pinned_release(helm: Path) -> None:
    out = subprocess.run([str(helm), "version", "--short"], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip().startswith(binaries.HELM_VERSION), out.stdout


def test_chart_lints(helm: Path) -> None:
    out = subprocess.run([str(helm), "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_default_render_has_the_kustomize_objects(chart_objects: list[Obj], kustomize_objects: list[Obj]) -> None:
    chart = {(k, CONFIGMAP_HASH.sub(r"\1", n), ns) for k, n, ns in by_key(chart_objects)}
    kustomize = {(k, CONFIGMAP_HASH.sub(r"\1", n), ns) for k, n, ns in by_key(kustomize_objects)}
    assert kustomize - chart == {("Namespace", NS, "")}, "the chart leaves only the Namespace to the installer"
    assert chart - kustomize == set()


def test_default_render_equals_kustomize_field_by_field(chart_objects: list[Obj],
                                                        kustomize_objects: list[Obj]) -> None:
    chart = {key: normalise(o) for key, o in by_key(chart_objects).items()}
    for key, obj in by_key(kustomize_objects).items():
        if obj["kind"] == "Namespace":
            continue
        want = normalise(obj)
        got = chart[(key[0], want["metadata"]["name"], key[2])]
        assert got == want, f"{key}: chart and deploy/ differ\nchart:   {got}\ndeploy/: {want}"


def test_rbac_rules_are_the_same(chart_objects: list[Obj], kustomize_objects: list[Obj]) -> None:
    """Stated separately from the field-by-field test because least privilege is the point."""
    def rbac(objects: list[Obj]) -> dict[tuple[str, str], Any]:
        return {(o["kind"], o["metadata"]["name"]): o.get("rules") or (o["roleRef"], o["subjects"])
                for o in objects if o["kind"] in ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")}
    assert rbac(chart_objects) == rbac(kustomize_objects)


def _deployment(objects: list[Obj], component: str) -> Obj:
    return next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == f"toposched-{component}")


def _container(objects: list[Obj], component: str, name: str | None = None) -> Obj:
    containers = _deployment(objects, component)["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == (name or component))


def test_every_component_has_a_disruption_budget_and_anti_affinity(chart_objects: list[Obj]) -> None:
    budgets = {o["metadata"]["name"]: o["spec"] for o in chart_objects if o["kind"] == "PodDisruptionBudget"}
    for component in ("controller", "webhook", "scheduler"):
        budget = budgets[f"toposched-{component}"]
        selector = _deployment(chart_objects, component)["spec"]["selector"]
        assert budget["selector"] == selector and budget["maxUnavailable"] == 1
        affinity = _deployment(chart_objects, component)["spec"]["template"]["spec"]["affinity"]
        (term,) = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["labelSelector"] == selector
        assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def test_network_policy_admits_only_the_given_sources_on_the_webhook_port(helm: Path, tmp_path: Path) -> None:
    objects = helm_template(helm, {"networkPolicy": {"apiServerCIDRs": ["10.1.0.0/24", "10.1.1.0/24"]},
                                   "webhook": {"port": 10443}}, tmp_path)
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "NetworkPolicy"}
    assert set(policies) == {"toposched-webhook", "toposched-scheduler"}
    policy = policies["toposched-webhook"]
    assert policy["spec"]["podSelector"] == _deployment(objects, "webhook")["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"ipBlock": {"cidr": "10.1.0.0/24"}}, {"ipBlock": {"cidr": "10.1.1.0/24"}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": 10443}]
    assert "--port=10443" in _container(objects, "webhook")["args"]
    scheduler = policies["toposched-scheduler"]["spec"]  # only kube-scheduler's port; never the extender's
    assert scheduler["podSelector"] == _deployment(objects, "scheduler")["spec"]["selector"]
    assert scheduler["ingress"] == [{"ports": [{"protocol": "TCP", "port": 10259}]}]
    off = helm_template(helm, {"networkPolicy": {"enabled": False}}, tmp_path)
    assert not [o for o in off if o["kind"] == "NetworkPolicy"]


def test_cert_manager_mode(helm: Path, tmp_path: Path) -> None:
    objects = helm_template(helm, {"certificates": {"mode": "cert-manager"}, "webhook": {"replicas": 2}}, tmp_path)
    keyed = by_key(objects)
    cert = keyed[("Certificate", "toposched-webhook", NS)]["spec"]
    assert cert["secretName"] == "toposched-webhook-tls"
    assert set(cert["dnsNames"]) == {f"toposched-webhook.{NS}.svc", f"toposched-webhook.{NS}.svc.cluster.local"}
    assert cert["issuerRef"] == {"kind": "Issuer", "name": "toposched-selfsigned"}
    assert keyed[("Issuer", "toposched-selfsigned", NS)]["spec"] == {"selfSigned": {}}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = keyed[(kind, "toposched-webhook", "")]["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"{NS}/toposched-webhook"}
    webhook = _deployment(objects, "webhook")
    assert webhook["spec"]["replicas"] == 2
    args = _container(objects, "webhook")["args"]
    assert "--no-register" in args and "--no-create-configs" not in args, "cainjector publishes caBundle"
    # The certificate from cert-manager's Secret; /tmp for the Go front's private socket (issue 42).
    assert webhook["spec"]["template"]["spec"]["volumes"] == [
        {"name": "certs", "secret": {"secretName": "toposched-webhook-tls"}},
        {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}]
    role = keyed[("ClusterRole", "toposched-webhook", "")]
    assert all(r["apiGroups"] != ["admissionregistration.k8s.io"] for r in role["rules"]), \
        "no rights on webhook configurations when cainjector writes caBundle"
    issued = helm_template(helm, {"certificates": {"mode": "cert-manager", "certManager": {
        "issuerRef": {"kind": "ClusterIssuer", "name": "corp-ca"}}}}, tmp_path)
    assert not [o for o in issued if o["kind"] == "Issuer"]
    assert by_key(issued)[("Certificate", "toposched-webhook", NS)]["spec"]["issuerRef"] == {
        "kind": "ClusterIssuer", "name": "corp-ca"}


def test_self_managed_certificates_share_a_secret_between_replicas(helm: Path, tmp_path: Path,
                                                                  chart_objects: list[Obj]) -> None:
    """Issue 14: any number of replicas in self-managed mode (the refusal of > 1 is gone); they
    share the Secret the Lease holder fills, with RBAC on exactly that Secret and Lease."""
    objects = helm_template(helm, {"webhook": {"replicas": 3}}, tmp_path)
    assert _deployment(objects, "webhook")["spec"]["replicas"] == 3
    assert _deployment(chart_objects, "webhook")["spec"]["replicas"] == 2
    args = _container(objects, "webhook")["args"]
    assert {"--cert-source=secret", "--no-create-configs", "--shutdown-delay-seconds=5"} <= set(args)
    keyed = by_key(objects)
    assert keyed[("Secret", "toposched-webhook-certs", NS)]["type"] == "Opaque"
    certificates = keyed[("Role", "toposched-webhook-certificates", NS)]["rules"]
    assert {"resources": ["secrets"], "resourceNames": ["toposched-webhook-certs"], "apiGroups": [""],
            "verbs": ["get", "list", "watch", "update"]} in certificates
    injector = keyed[("ClusterRole", "toposched-webhook-ca-injector", "")]["rules"]
    assert [r["resourceNames"] for r in injector] == [["toposched-webhook"]]
    assert all(r["apiGroups"] != ["admissionregistration.k8s.io"]
               for r in keyed[("ClusterRole", "toposched-webhook", "")]["rules"]), "CA injection in its own role"


def test_values_schema_rejects_an_unknown_certificate_mode(helm: Path, tmp_path: Path) -> None:
    with pytest.raises(HelmError, match="certificates"):
        helm_template(helm, {"certificates": {"mode": "vault"}}, tmp_path)


def _vqueued(objects: list[Obj]) -> list[Obj]:
    (config,) = [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
    return [h for h in config["webhooks"] if h["name"] == "vqueued.toposched.io"]


def test_default_deny_is_scoped_by_its_values(helm: Path, tmp_path: Path, chart_objects: list[Obj]) -> None:
    """Issue 40: webhook.defaultDeny's selectors are ANDed with the exemption of system namespaces
    and with the queue label; enabled: false leaves the catch-all out (the job kinds' own
    webhooks, and their default deny, stay)."""
    (default,) = _vqueued(chart_objects)
    tenants = {"key": "toposched.io/tenant", "operator": "In", "values": ["true"]}
    skip_helm = {"key": "app.kubernetes.io/managed-by", "operator": "NotIn", "values": ["Helm"]}
    (scoped,) = _vqueued(helm_template(helm, {"webhook": {"defaultDeny": {
        "namespaceSelector": {"matchLabels": {"team": "ml"}, "matchExpressions": [tenants]},
        "objectSelector": {"matchExpressions": [skip_helm]}}}}, tmp_path))
    assert scoped["namespaceSelector"] == {
        "matchLabels": {"team": "ml"},
        "matchExpressions": [*default["namespaceSelector"]["matchExpressions"], tenants]}
    assert scoped["objectSelector"] == {"matchExpressions": [
        {"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}, skip_helm]}
    assert {k: v for k, v in scoped.items() if not k.endswith("Selector")} == \
        {k: v for k, v in default.items() if not k.endswith("Selector")}
    off = helm_template(helm, {"webhook": {"defaultDeny": {"enabled": False}}}, tmp_path)
    assert _vqueued(off) == []
    (config,) = [o for o in off if o["kind"] == "ValidatingWebhookConfiguration"]
    assert "vjob.toposched.io" in {h["name"] for h in config["webhooks"]}
    with pytest.raises(HelmError, match="defaultDeny"):
        helm_template(helm, {"webhook": {"defaultDeny": {"namespaceSelector": {"matchExpressions": [
            {"key": "a", "operator": "Matches"}]}}}}, tmp_path)


def test_grpc_is_exposed_only_with_tls(helm: Path, tmp_path: Path, chart_objects: list[Obj]) -> None:
    service = by_key(chart_objects)[("Service", "toposched-controller", NS)]
    assert [p["name"] for p in service["spec"]["ports"]] == ["http"], "loopback-only gRPC gets no Service port"
    assert not any(a.startswith("--grpc-bind") for a in _container(chart_objects, "controller")["args"])
    with pytest.raises(HelmError, match="never exposed without TLS"):
        helm_template(helm, {"grpc": {"expose": True}}, tmp_path)

    objects = helm_template(helm, {"grpc": {"expose": True, "port": 50052, "tokenSecretName": "api-token",
                                            "tls": {"secretName": "api-tls", "clientAuth": True}}}, tmp_path)
    controller = _container(objects, "controller")
    assert {"--grpc-bind=0.0.0.0", "--grpc-port=50052", "--grpc-tls-cert=/etc/toposched/grpc-tls/tls.crt",
            "--grpc-tls-key=/etc/toposched/grpc-tls/tls.key", "--grpc-client-ca=/etc/toposched/grpc-tls/ca.crt",
            "--grpc-token-file=/etc/toposched/grpc-token/token"} <= set(controller["args"])
    assert {"name": "grpc", "containerPort": 50052} in controller["ports"]
    service = by_key(objects)[("Service", "toposched-controller", NS)]
    assert {"name": "grpc", "port": 50052, "targetPort": "grpc"} in service["spec"]["ports"]
    volumes = _deployment(objects, "controller")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "grpc-tls", "secret": {"secretName": "api-tls"}} in volumes
    assert {"name": "grpc-token", "secret": {"secretName": "api-token"}} in volumes

    issued = by_key(helm_template(helm, {"grpc": {"expose": True}, "certificates": {"mode": "cert-manager"}},
                                  tmp_path))
    assert issued[("Certificate", "toposched-controller-grpc", NS)]["spec"]["secretName"] == \
        "toposched-controller-grpc-tls"


def test_image_scheduling_and_profile_values(helm: Path, tmp_path: Path) -> None:
    objects = helm_template(helm, {
        "image": {"repository": "registry.example/toposched", "tag": "1.2.3", "pullPolicy": "Always"},
        "nodeSelector": {"node-role": "system"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "controller": {"replicas": 3, "resources": {"requests": {"cpu": "1"}}},
        "scheduler": {"schedulerName": "gpu-topo", "extender": {"weight": 5, "port": 8899}},
        "metrics": {"port": 9090, "serviceMonitor": {"enabled": True}}}, tmp_path)
    controller = _container(objects, "controller")
    assert controller["image"] == "registry.example/toposched:1.2.3" and controller["imagePullPolicy"] == "Always"
    # Helm merges maps with the defaults: the memory request and limit stay.
    assert controller["resources"] == {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}
    assert "--health-port=9090" in controller["args"]
    assert _deployment(objects, "controller")["spec"]["replicas"] == 3
    for component in ("controller", "webhook", "scheduler"):
        pod = _deployment(objects, component)["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"node-role": "system"}
        assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert "--scheduler-name=gpu-topo" in _container(objects, "webhook")["args"]
    extender = _container(objects, "scheduler", "extender")
    assert extender["image"] == "registry.example/toposched:1.2.3"
    assert {"--port=8899", "--scheduler-name=gpu-topo"} <= set(extender["args"])
    cm = by_key(objects)[("ConfigMap", "toposched-scheduler-config", NS)]
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert [p["schedulerName"] for p in config["profiles"]] == ["gpu-topo"]
    assert config["extenders"][0]["urlPrefix"] == "https://127.0.0.1:8899" and config["extenders"][0]["weight"] == 5
    monitor = by_key(objects)[("ServiceMonitor", "toposched-controller", NS)]["spec"]
    assert monitor["endpoints"][0]["port"] == "http" and monitor["endpoints"][0]["path"] == "/metrics"


def _scheduler_image(objects: list[Obj]) -> str:
    return str(_container(objects, "scheduler", "kube-scheduler")["image"])


def test_kube_scheduler_version_is_the_clusters(helm: Path, tmp_path: Path) -> None:
    """Issue 40: the second kube-scheduler runs the cluster's own version (a kube-scheduler must not
    be newer than its API server), derived from .Capabilities.KubeVersion; a pinned tag of a later
    minor, or a cluster version nothing can be derived from, is refused with one line."""
    assert _scheduler_image(helm_template(helm, kube_version="v1.33.5-eks-3025e55")) == \
        "registry.k8s.io/kube-scheduler:v1.33.5"
    assert _scheduler_image(helm_template(helm, kube_version="v1.31.12+k3s1")) == \
        "registry.k8s.io/kube-scheduler:v1.31.12"
    older = {"scheduler": {"image": {"repository": "123.dkr.ecr.us-west-2.amazonaws.com/kube-scheduler",
                                     "tag": "v1.32.9"}}}
    assert _scheduler_image(helm_template(helm, older, tmp_path, kube_version="v1.33.5-eks-3025e55")) == \
        "123.dkr.ecr.us-west-2.amazonaws.com/kube-scheduler:v1.32.9"
    with pytest.raises(HelmError, match=r"scheduler.image.tag: v1.34.0 is newer than the cluster's v1.33.5-eks"):
        helm_template(helm, {"scheduler": {"image": {"tag": "v1.34.0"}}}, tmp_path, kube_version="v1.33.5-eks-3025e55")
    with pytest.raises(HelmError, match=r"cannot derive kube-scheduler's version from the cluster's \"v1.33\""):
        helm_template(helm, kube_version="1.33")
    with pytest.raises(HelmError, match="requires kubeVersion"):
        helm_template(helm, kube_version="v1.27.16")  # matchConditions are off by default before 1.28


def test_webhook_on_the_host_network_for_overlay_cnis(helm: Path, tmp_path: Path, chart_objects: list[Obj]) -> None:
    """Issue 40: where the EKS control plane cannot reach pod addresses (overlay CNIs), the webhook
    runs on its node's network; off by default."""
    assert "hostNetwork" not in _deployment(chart_objects, "webhook")["spec"]["template"]["spec"]
    pod = _deployment(helm_template(helm, {"webhook": {"hostNetwork": True}}, tmp_path), "webhook")["spec"]["template"]
    assert pod["spec"]["hostNetwork"] is True and pod["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["spec"]["containers"][0]["ports"][0]["containerPort"] == 9443


def test_uninstall_keeps_the_preemption_crds(helm: Path, tmp_path: Path) -> None:
    """Issue 40: deleting a CRD deletes every admin's object of its kind, so Helm keeps the
    PreemptionLimit CRD (toposched.io, by default) and Kueue's PreemptionConfig CRD (on request)
    on uninstall (the e2e uninstalls and checks)."""
    objects = helm_template(helm, {"kueuePreemptionConfigCRD": {"install": True}}, tmp_path)
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    assert {o["metadata"]["name"] for o in crds} == {"preemptionlimits.toposched.io",
                                                      "preemptionconfigs.kueue.x-k8s.io"}
    assert all(o["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"} for o in crds)
    on_disk = {d["metadata"]["name"]: d for f in ("toposched-preemption-limits.yaml", "kueue-preemptionconfig.yaml")
               for d in yaml.safe_load_all((CHART / "files" / f).read_text()) if d}
    assert all(o["spec"] == on_disk[o["metadata"]["name"]]["spec"] for o in crds), "the files' definitions, unchanged"


def test_binder_value_sets_the_extender_verbs_and_its_flag(helm: Path, tmp_path: Path) -> None:
    def render(values: dict[str, Any]) -> tuple[Obj, list[str]]:
        objects = helm_template(helm, values, tmp_path)
        cm = by_key(objects)[("ConfigMap", "toposched-scheduler-config", NS)]
        return yaml.safe_load(cm["data"]["config.yaml"])["extenders"][0], _container(objects, "scheduler", "extender")[
            "args"]

    entry, args = render({})  # default: kube-scheduler binds, filter only
    assert entry["filterVerb"] == "filter" and "bindVerb" not in entry and "prioritizeVerb" not in entry
    assert "--binder=kube-scheduler" in args
    entry, args = render({"scheduler": {"extender": {"binder": "extender"}}})
    assert (entry["filterVerb"], entry["prioritizeVerb"], entry["bindVerb"]) == ("filter", "prioritize", "bind")
    assert "--binder=extender" in args


def test_chart_applies_with_server_side_dry_run(helm: Path, tmp_path: Path, kube_api: client.ApiClient,
                                                local_cluster: Any) -> None:
    """`kubectl apply --server-side --dry-run=server` of the default render and of the exposed-gRPC
    render: schema (fieldValidation Strict), defaulting and admission on the real API server.
    cert-manager's and the Prometheus Operator's kinds are not installed there: rendered above only."""
    try:  # namespaced dry-runs need the namespace to exist for real
        Api(kube_api).request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    renders = {"default": helm_template(helm),
               "grpc": helm_template(helm, {"grpc": {"expose": True, "tls": {"secretName": "api-tls"}},
                                            "networkPolicy": {"apiServerCIDRs": ["10.0.0.0/24"]}}, tmp_path)}
    for name, objects in renders.items():
        manifest = tmp_path / f"{name}.yaml"
        manifest.write_text(yaml.safe_dump_all(objects))
        out = subprocess.run([KUBECTL, f"--kubeconfig={local_cluster.kubeconfig}", "apply", "--server-side",
                              "--dry-run=server", "--field-manager=helm", "--validate=strict", "-f", str(manifest)],
                             capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0, f"{name}: {out.stderr}"
        applied = [ln for ln in out.stdout.splitlines() if "(server dry run)" in ln]
        assert len(applied) == len(objects), out.stdout


def test_log_format_and_metrics_flags(helm: Path, tmp_path: Path) -> None:
    objects = by_key(helm_template(helm, {"logFormat": "json", "metrics": {"port": 9090}}, tmp_path))
    args = {name: [a for c in objects[("Deployment", name, NS)]["spec"]["template"]["spec"]["containers"]
                   for a in c.get("args") or ()]
            for name in ("toposched-controller", "toposched-webhook", "toposched-scheduler")}
    assert all("--log-format=json" in a for a in args.values())
    assert {"--metrics-bind=0.0.0.0", "--metrics-port=9090", "--health-port=9090"} <= set(args["toposched-controller"])
    with pytest.raises(HelmError, match="logFormat"):
        helm_template(helm, {"logFormat": "yaml"}, tmp_path)


def test_controller_may_be_rendered_with_no_replicas_for_the_kueue_handover(helm: Path, tmp_path: Path) -> None:
    """docs/install.md "Adopting toposched where Kueue runs", step 3: webhook and scheduler first."""
    objects = helm_template(helm, {"controller": {"replicas": 0}}, tmp_path)
    assert _deployment(objects, "controller")["spec"]["replicas"] == 0
    assert _deployment(objects, "webhook")["spec"]["replicas"] == 2
    with pytest.raises(HelmError, match="replicas"):
        helm_template(helm, {"webhook": {"replicas": 0}}, tmp_path)


def test_kueue_guard_adds_the_flag_and_a_role_on_that_one_lease(helm: Path, tmp_path: Path,
                                                                 chart_objects: list[Obj]) -> None:
    assert not any(a.startswith("--kueue-lease") for a in _container(chart_objects, "controller")["args"])
    objects = helm_template(helm, {"kueueGuard": {"lease": "kueue-system/c1f6bfd2.kueue.x-k8s.io"}}, tmp_path)
    assert "--kueue-lease=kueue-system/c1f6bfd2.kueue.x-k8s.io" in _container(objects, "controller")["args"]
    keyed = by_key(objects)
    assert keyed[("Role", "toposched-controller-kueue-guard", "kueue-system")]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["c1f6bfd2.kueue.x-k8s.io"],
         "verbs": ["get"]}]
    binding = keyed[("RoleBinding", "toposched-controller-kueue-guard", "kueue-system")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "toposched-controller", "namespace": NS}]
    with pytest.raises(HelmError, match="kueueGuard"):
        helm_template(helm, {"kueueGuard": {"lease": "no-slash"}}, tmp_path)


def test_kueue_config_is_mounted_and_read_by_the_controller_and_webhook(helm: Path, tmp_path: Path,
                                                                        chart_objects: list[Obj]) -> None:
    for component in ("controller", "webhook"):
        assert not any(a.startswith("--kueue-config") for a in _container(chart_objects, component)["args"])
    kueue_file = ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nnamespace: kueue-system\n"
                  "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n"
                  "waitForPodsReady:\n  timeout: 10m\n")
    objects = helm_template(helm, {"kueueConfig": kueue_file, "grpc": {"expose": True,
                                   "tls": {"secretName": "api-tls"}}}, tmp_path)
    controller = _container(objects, "controller")
    assert "--kueue-config=/etc/toposched/kueue-config/config.yaml" in controller["args"]
    assert {"name": "kueue-config", "mountPath": "/etc/toposched/kueue-config", "readOnly": True} in \
        controller["volumeMounts"]
    assert {"name": "grpc-tls", "mountPath": "/etc/toposched/grpc-tls", "readOnly": True} in controller["volumeMounts"]
    volumes = _deployment(objects, "controller")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "kueue-config", "configMap": {"name": "toposched-kueue-config"}} in volumes
    webhook = _container(objects, "webhook")  # its featureGates switch Kueue's gated checks
    assert "--kueue-config=/etc/toposched/kueue-config/config.yaml" in webhook["args"]
    assert {"name": "kueue-config", "mountPath": "/etc/toposched/kueue-config", "readOnly": True} in \
        webhook["volumeMounts"]
    assert {"name": "kueue-config", "configMap": {"name": "toposched-kueue-config"}} in \
        _deployment(objects, "webhook")["spec"]["template"]["spec"]["volumes"]
    data = by_key(objects)[("ConfigMap", "toposched-kueue-config", NS)]["data"]["config.yaml"]
    loaded = load_kueue_config_text(data)  # what the controller reads at start-up
    assert loaded.config.fair_sharing.enabled and loaded.config.wait_for_pods_ready.timeout_s == 600


def test_hyperpod_values_make_toposched_behave_as_kueue_v019(helm: Path, tmp_path: Path,
                                                              chart_objects: list[Obj]) -> None:
    """values-hyperpod.yaml selects Kueue v0.19 (task governance v1.6 runs v0.19.2) for both the
    controller and the webhook; the default render passes no --kueue-version (v0.17)."""
    for component in ("controller", "webhook"):
        assert not any(a.startswith("--kueue-version") for a in _container(chart_objects, component)["args"])
    hyperpod = yaml.safe_load((CHART / "values-hyperpod.yaml").read_text())
    objects = helm_template(helm, hyperpod, tmp_path)
    from scheduler.cli import build_parser

    for component in ("controller", "webhook"):
        args = _container(objects, component)["args"]
        assert "--kueue-version=v0.19" in args
        parsed = build_parser().parse_args([a for a in args if not a.startswith("--kueue-config")])
        assert parsed.kueue_version == "v0.19"
    with pytest.raises(HelmError, match="kueueVersion"):
        helm_template(helm, {"kueueVersion": "v0.18"}, tmp_path)


def test_the_chart_installs_no_crd_in_kueues_group_unless_asked(
        helm: Path, tmp_path: Path, chart_objects: list[Obj]) -> None:
    """Issue 41: toposched's PreemptionLimit CRD is toposched.io's and installed by default;
    Kueue's PreemptionConfig CRD (kueue.x-k8s.io) only with kueuePreemptionConfigCRD.install,
    which the HyperPod values leave off too. The old value preemptionCRDs fails the render with
    what replaced it. The controller's ClusterRole reads PreemptionConfigs and the old limits
    (to migrate them) and reads, creates and patches the status of toposched.io's."""
    def crds(objects: list[Obj]) -> set[str]:
        return {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    assert crds(chart_objects) == {"preemptionlimits.toposched.io"}
    limit_crd = next(o for o in chart_objects if o["kind"] == "CustomResourceDefinition")
    assert limit_crd["spec"]["group"] == "toposched.io"
    assert limit_crd["spec"]["versions"][0]["subresources"] == {"status": {}}
    hyperpod = yaml.safe_load((CHART / "values-hyperpod.yaml").read_text())
    assert hyperpod["kueuePreemptionConfigCRD"] == {"install": False}
    assert crds(helm_template(helm, hyperpod, tmp_path)) == {"preemptionlimits.toposched.io"}
    asked = helm_template(helm, {**hyperpod, "kueuePreemptionConfigCRD": {"install": True}}, tmp_path)
    assert crds(asked) == {"preemptionlimits.toposched.io", "preemptionconfigs.kueue.x-k8s.io"}
    assert not any(o["spec"]["group"] == "kueue.x-k8s.io" and o["spec"]["names"]["kind"] == "PreemptionLimit"
                   for o in asked if o["kind"] == "CustomResourceDefinition")
    with pytest.raises(HelmError, match="preemptionCRDs is gone"):
        helm_template(helm, {"preemptionCRDs": {"install": True}}, tmp_path)
    role = by_key(chart_objects)[("ClusterRole", "toposched-controller", "")]
    rules = [(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"])) for r in role["rules"]]
    assert (("kueue.x-k8s.io",), ("preemptionconfigs", "preemptionlimits"), ("list", "watch")) in rules
    assert (("toposched.io",), ("preemptionlimits",), ("list", "watch", "create")) in rules
    assert (("toposched.io",), ("preemptionlimits/status",), ("patch",)) in rules
    assert not any("kueue.x-k8s.io" in g and "preemptionlimits/status" in r for g, r, _ in rules)
