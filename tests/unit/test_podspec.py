"""The podman node runs a Pod's container as a kubelet would (scheduler/devcluster/podspec.py):
the chart's arguments, environment, mounts and security settings reach ``podman create``
unchanged, and what a kubelet refuses (or this node does not implement) stops the container
with a reason instead of being dropped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.devcluster.podspec import (
    HostDir,
    PodContext,
    PodSpecError,
    container_env,
    create_argv,
    expand,
    probe,
    run_as,
)

CTX = PodContext(pod_ip="10.88.0.7", host_ip="10.88.0.1", node_name="podman-0", api_host="kubernetes.default.svc",
                 api_port=16443, volumes={name: HostDir(f"/state/pods/u1/volumes/{name}")
                                          for name in ("tmp", "config", "kube-api-access-x")})


def webhook_pod() -> dict[str, Any]:
    """The chart's webhook pod as the API server stores it (with the ServiceAccount volume)."""
    return {
        "metadata": {"name": "toposched-webhook-abc", "namespace": "toposched-system", "uid": "u1234567-89"},
        "spec": {
            "serviceAccountName": "toposched-webhook", "nodeName": "podman-0",
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "webhook", "image": "localhost/toposched:0.1.0",
                "args": ["webhook", "--bind=0.0.0.0", "--port=9443", "--namespace=$(POD_NAMESPACE)", "$$literal"],
                "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                        {"name": "GREETING", "value": "in $(POD_NAMESPACE)"}],
                "ports": [{"name": "https", "containerPort": 9443}],
                "readinessProbe": {"httpGet": {"path": "/readyz", "port": "https", "scheme": "HTTPS"},
                                   "periodSeconds": 5},
                "resources": {"limits": {"memory": "1Gi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},
                                 {"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/"
                                  "serviceaccount", "readOnly": True}],
            }],
        },
    }


def no_keys(kind: str, namespace: str, name: str, key: str) -> str | None:
    return None


def argv_of(pod: dict[str, Any], image_user: str = "65532:65532") -> list[str]:
    container = pod["spec"]["containers"][0]
    env = container_env(pod, container, CTX, no_keys)
    return create_argv(pod, container, CTX, env, image_user, "podman-0")


def test_arguments_environment_and_mounts_reach_podman_as_the_chart_wrote_them() -> None:
    argv = argv_of(webhook_pod())
    image_at = argv.index("localhost/toposched:0.1.0")
    assert argv[image_at + 1:] == ["webhook", "--bind=0.0.0.0", "--port=9443", "--namespace=toposched-system",
                                   "$literal"]
    assert "--entrypoint" not in argv  # no `command`: the image's entrypoint
    envs = [argv[i + 1] for i, a in enumerate(argv) if a == "--env"]
    assert "POD_NAMESPACE=toposched-system" in envs and "GREETING=in toposched-system" in envs
    assert "KUBERNETES_SERVICE_HOST=kubernetes.default.svc" in envs and "KUBERNETES_SERVICE_PORT=16443" in envs
    # the in-memory emptyDir is the tmpfs podvolumes mounted for the pod, shared like any volume
    assert "/state/pods/u1/volumes/tmp:/tmp:rw" in argv and "--mount" not in argv
    assert "/state/pods/u1/volumes/kube-api-access-x:/var/run/secrets/kubernetes.io/serviceaccount:ro" in argv
    for flag in ("--read-only", "--read-only-tmpfs=false", "--cap-drop=ALL", "no-new-privileges",
                 f"--memory={2**30}", "--pull=never", "--restart=no"):
        assert flag in argv, flag
    assert "--user" not in argv  # the image's own 65532


def test_command_becomes_the_entrypoint_and_run_as_user_the_user() -> None:
    pod = webhook_pod()
    pod["spec"]["securityContext"]["runAsUser"] = 65532
    pod["spec"]["containers"][0]["command"] = ["kube-scheduler", "--config=/etc/toposched/config.yaml"]
    argv = argv_of(pod, image_user="")
    assert json.loads(argv[argv.index("--entrypoint") + 1]) == ["kube-scheduler", "--config=/etc/toposched/config.yaml"]
    assert argv[argv.index("--user") + 1] == "65532"


@pytest.mark.parametrize(("image_user", "message"), [
    ("", r"non-numeric user \(none\)"), ("toposched", r"non-numeric user \(toposched\)"), ("0:0", "will run as root")])
def test_run_as_non_root_is_checked_as_the_kubelet_does(image_user: str, message: str) -> None:
    pod = webhook_pod()
    with pytest.raises(PodSpecError, match=message):
        run_as(pod, pod["spec"]["containers"][0], image_user)


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c.update(envFrom=[{"configMapRef": {"name": "x"}}]), "envFrom is not supported"),
    (lambda c: c.update(readinessProbe={"exec": {"command": ["true"]}}), "only httpGet probes"),
    (lambda c: c["env"].append({"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}),
     "valueFrom .* is not supported"),
    (lambda c: c["env"].append({"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}),
     'secret "s" key "k" not found'),
    (lambda c: c["volumeMounts"].append({"name": "data", "mountPath": "/data"}), 'volume "data" .* not prepared'),
    (lambda c: c.update(securityContext={"privileged": True}), "privileged"),
])
def test_what_the_node_cannot_run_stops_the_container_with_a_reason(change: Any, message: str) -> None:
    pod = webhook_pod()
    container = pod["spec"]["containers"][0]
    change(container)
    with pytest.raises(PodSpecError, match=message):
        argv_of(pod)
        probe(container, "readinessProbe", CTX.pod_ip)


def test_optional_secret_key_is_skipped_and_present_keys_are_read() -> None:
    pod = webhook_pod()
    container = pod["spec"]["containers"][0]
    container["env"] += [{"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": True}}},
                         {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "level"}}}]
    env = container_env(pod, container, CTX, lambda kind, ns, name, key: "debug" if kind == "ConfigMap" else None)
    assert "OPT" not in env and env["CM"] == "debug"


def test_probe_resolves_named_ports_against_the_pod_ip_with_kubernetes_defaults() -> None:
    container = webhook_pod()["spec"]["containers"][0]
    found = probe(container, "readinessProbe", "10.88.0.7")
    assert found is not None
    assert found.url == "https://10.88.0.7:9443/readyz"
    assert (found.period_s, found.timeout_s, found.failure_threshold, found.success_threshold) == (5, 1, 3, 1)
    assert probe(container, "livenessProbe", "10.88.0.7") is None


def test_variable_expansion_follows_kubernetes() -> None:
    env = {"A": "x"}
    assert expand("$(A)-$(B)-$$(A)-$$", env) == "x-$(B)-$(A)-$"
