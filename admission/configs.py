"""The Mutating/ValidatingWebhookConfiguration objects the webhook owns, and their upkeep.

failurePolicy design (docs/webhook.md):

* Every governed kind (the job-kind registry) WITH ``kueue.x-k8s.io/queue-name``
  (objectSelector ``Exists``): ``Fail``. Letting such a Job through un-mutated would start it
  unsuspended, past every quota; a dead webhook only blocks jobs that asked for the queue.
* Pods (Kueue's pod integration, ``admission/pods.py``): with the queue label, or with the
  managed label a Deployment's or StatefulSet's template stamp puts on them: ``Fail``; bare pods
  without either are never sent (no LocalQueue defaulting for them: every pod of every
  namespace would wait on the webhook).
* Governed kinds WITHOUT the label (objectSelector ``DoesNotExist``, mutating only, for LocalQueue
  defaulting): ``Ignore`` with a 2 s timeout. A dead webhook never blocks unmanaged Jobs; the
  price is that, while it is down, a Job in a namespace with a ``default`` LocalQueue runs
  unmanaged.
* Governed kinds on UPDATE while queued (``m<kind>-update``, objectSelector ``Exists``, every
  request but the controller's): ``Fail``; the template stamps come back (``admission/restamp.py``).
* Pods on UPDATE that still hold one of Kueue's gates (``vpod-gated``: no object selector,
  ``matchConditions`` on the old object's gates) or carry the managed label before the queue's
  (``vpod-managed``): ``Fail``; only the controller lifts the gates or changes Kueue's keys
  (``admission/update_guards.py``), whatever the labels say now.
* Every other queued object, of any group and kind (``vqueued``, the default deny, CREATE and
  UPDATE, objectSelector ``Exists``): ``Fail``. A queued object of a kind toposched does not
  govern that would run pods (admission/governance.py) is refused with one line naming the gap;
  one that runs none (a Service, a ConfigMap) passes with a warning. With the webhook down no
  queued object is written where it reaches, which is the point: nothing queued runs outside
  toposched. Its reach is scoped by the chart's ``webhook.defaultDeny`` (enabled, extra
  namespace and object selectors, ANDed with these); elsewhere, edit the live configuration:
  :func:`sync` only ever rewrites ``clientConfig``, an admin's selectors stay. The registry's
  kinds are left out (``matchConditions``): their own validating webhook applies the same
  default deny first (a kind the Configuration does not enable is refused there with the same
  line), so a Job costs one validating call, not two.
* The governed kinds' validating webhooks skip the controller's own writes (``matchConditions``,
  as for Workloads): starting, stopping and restoring an admitted job is the controller's to do
  and never waits for (or on) the webhook.
* Kueue objects (Topology, ResourceFlavor, ClusterQueue, LocalQueue): ``Ignore``. Their CRD
  CEL rules still hold; the admins can always repair queues with the webhook down. Kueue's
  PreemptionConfig too: one with a field Kueue v0.20 does not have that gets in while the
  webhook is down is not applied by the controller (its rules only ever widen preemption).
* Workloads: ``Fail`` (as Kueue's own ``vworkload.kb.io``), for everyone but toposched's
  controller, whose username ``matchConditions`` exclude: tenants cannot write the annotations
  the controller owns nor an invalid Workload while the webhook is down, and the controller's
  own writes never wait for (or on) the webhook.
* Namespaces kube-system, kube-public, kube-node-lease and our own are never sent to us.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes.client import ApiException

from admission.governance import QUEUED_PATH
from admission.routes import KUEUE_PLURALS, VALIDATE_PREEMPTION_CONFIG, VALIDATE_WORKLOAD, validate_kueue_path
from admission.suspension import controller_username
from scheduler.adapter.kinds.base import JobKind
from scheduler.adapter.kinds.pod import POD
from scheduler.adapter.kinds.registry import KINDS
from scheduler.core.kueue_names import LABEL_MANAGED
from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import Api, Resource

MUTATING = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", namespaced=False)
VALIDATING = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", namespaced=False)
CONFIG_NAME = "toposched-webhook"
SERVICE_NAME = "toposched-webhook"
DEFAULT_NAMESPACE = "toposched-system"
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")

log = logging.getLogger(__name__)

ClientConfig = Callable[[str], dict[str, Any]]


def url_client_config(base_url: str) -> ClientConfig:
    base = base_url.rstrip("/")
    return lambda path: {"url": f"{base}{path}"}


def service_client_config(namespace: str, service: str = SERVICE_NAME, port: int = 443) -> ClientConfig:
    return lambda path: {"service": {"namespace": namespace, "name": service, "path": path, "port": port}}


def _namespace_selector(namespace: str) -> dict[str, Any]:
    exempt = sorted(set(SYSTEM_NAMESPACES) | {namespace})
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": exempt}]}


def job_kind_rule(kind: JobKind, operations: Sequence[str]) -> list[dict[str, Any]]:
    """The rule of one governed kind (a rule for a resource that is not installed matches nothing)."""
    return [{"apiGroups": [kind.group], "apiVersions": [kind.version], "resources": [kind.plural],
             "operations": list(operations), "scope": "Namespaced"}]


_QUEUED = {"matchExpressions": [{"key": LABEL_QUEUE_NAME, "operator": "Exists"}]}
_UNQUEUED = {"matchExpressions": [{"key": LABEL_QUEUE_NAME, "operator": "DoesNotExist"}]}
_MANAGED_UNQUEUED = {"matchExpressions": [{"key": LABEL_MANAGED, "operator": "Exists"},
                                          {"key": LABEL_QUEUE_NAME, "operator": "DoesNotExist"}]}


def mutating_configuration(client: ClientConfig, namespace: str = DEFAULT_NAMESPACE,
                           default_queue: bool = True, controller_users: Sequence[str] | None = None) -> dict[str, Any]:
    """``controller_users``: as :func:`validating_configuration` (their updates skip the re-stamp)."""
    controllers = list(controller_users) if controller_users else [controller_username(namespace)]
    common = {"admissionReviewVersions": ["v1"], "sideEffects": "None", "matchPolicy": "Equivalent",
              "reinvocationPolicy": "IfNeeded", "namespaceSelector": _namespace_selector(namespace)}
    hooks = []
    for kind in KINDS:
        prefix, path, rules = f"m{kind.kind.lower()}", kind.mutate_path, job_kind_rule(kind, ["CREATE"])
        hooks.append(dict(common, name=f"{prefix}.toposched.io", clientConfig=client(path), rules=rules,
                          failurePolicy="Fail", timeoutSeconds=5, objectSelector=_QUEUED))
        if kind is POD:
            # A pod its Deployment / StatefulSet holds carries the managed label, not yet the queue's.
            hooks.append(dict(common, name=f"{prefix}-managed.toposched.io", clientConfig=client(path), rules=rules,
                              failurePolicy="Fail", timeoutSeconds=5, objectSelector=_MANAGED_UNQUEUED))
        else:
            # The stamps re-applied on UPDATE of a queued object (admission/restamp.py), as Kueue's
            # Deployment, StatefulSet and LeaderWorkerSet webhooks default on UPDATE too. The
            # controller's own starts and stops never wait on it.
            hooks.append(dict(common, name=f"{prefix}-update.toposched.io", clientConfig=client(path),
                              rules=job_kind_rule(kind, ["UPDATE"]), failurePolicy="Fail", timeoutSeconds=5,
                              objectSelector=_QUEUED, matchConditions=not_the_controller(controllers)))
        if kind is not POD and default_queue:
            # (not for bare pods: every pod of every namespace would be sent here on creation)
            hooks.append(dict(common, name=f"{prefix}-default-queue.toposched.io", clientConfig=client(path),
                              rules=rules, failurePolicy="Ignore", timeoutSeconds=2, objectSelector=_UNQUEUED))
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": CONFIG_NAME, "labels": {"app.kubernetes.io/name": "toposched",
                                                         "app.kubernetes.io/component": "webhook"}},
            "webhooks": hooks}


HOLDS_A_KUEUE_GATE = {"name": "holds-a-kueue-gate", "expression": (
    "has(oldObject.spec.schedulingGates) && oldObject.spec.schedulingGates.exists(g, "
    "g.name == 'kueue.x-k8s.io/admission' || g.name == 'kueue.x-k8s.io/topology')")}


def not_the_controller(controller_users: Sequence[str]) -> list[dict[str, str]]:
    """``matchConditions``: every request but the controller's (CEL on the AdmissionReview)."""
    names = ", ".join(json.dumps(u) for u in sorted(set(controller_users)))
    return [{"name": "not-toposched-controller", "expression": f"!(request.userInfo.username in [{names}])"}]


def not_a_registry_kind() -> list[dict[str, str]]:
    """``matchConditions`` of the default deny: every kind but the registry's, whose own
    validating webhooks apply it (``admission/review.py``)."""
    kinds = ", ".join(json.dumps(f"{k.group}/{k.kind}") for k in KINDS)
    return [{"name": "not-a-registry-kind",
             "expression": f"!((request.kind.group + '/' + request.kind.kind) in [{kinds}])"}]


def validating_configuration(client: ClientConfig, namespace: str = DEFAULT_NAMESPACE,
                             controller_users: Sequence[str] | None = None) -> dict[str, Any]:
    """``controller_users``: the controller's usernames (``--controller-user``; default its
    ServiceAccount in ``namespace``), whose Workload and job writes skip the webhook."""
    controllers = list(controller_users) if controller_users else [controller_username(namespace)]
    common = {"admissionReviewVersions": ["v1"], "sideEffects": "None", "matchPolicy": "Equivalent",
              "namespaceSelector": _namespace_selector(namespace)}
    hooks = [dict(common, name=f"v{kind.kind.lower()}.toposched.io", clientConfig=client(kind.validate_path),
                  failurePolicy="Fail", timeoutSeconds=5, rules=job_kind_rule(kind, ["CREATE", "UPDATE"]),
                  objectSelector=_QUEUED, matchConditions=not_the_controller(controllers)) for kind in KINDS]
    # A pod its StatefulSet holds carries the managed label before the queue's: its gates and
    # keys are guarded on UPDATE too (admission/update_guards.py).
    hooks.append(dict(common, name=f"v{POD.kind.lower()}-managed.toposched.io", clientConfig=client(POD.validate_path),
                      failurePolicy="Fail", timeoutSeconds=5, rules=job_kind_rule(POD, ["UPDATE"]),
                      objectSelector=_MANAGED_UNQUEUED, matchConditions=not_the_controller(controllers)))
    # A pod that still holds one of Kueue's gates, whatever its labels say now (had they been
    # stripped past the webhook, no label selector would find it): only its updates are sent.
    hooks.append(dict(common, name=f"v{POD.kind.lower()}-gated.toposched.io", clientConfig=client(POD.validate_path),
                      failurePolicy="Fail", timeoutSeconds=5, rules=job_kind_rule(POD, ["UPDATE"]),
                      matchConditions=[*not_the_controller(controllers), HOLDS_A_KUEUE_GATE]))
    # The default deny (admission/governance.py): every other queued object, of any kind.
    hooks.append(dict(common, name="vqueued.toposched.io", clientConfig=client(QUEUED_PATH), failurePolicy="Fail",
                      timeoutSeconds=5, rules=[{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"],
                                                "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}],
                      objectSelector=_QUEUED, matchConditions=not_a_registry_kind()))
    for kind, plural in KUEUE_PLURALS.items():
        hooks.append(dict(
            common, name=f"v{kind.lower()}.kueue.toposched.io", clientConfig=client(validate_kueue_path(kind)),
            failurePolicy="Ignore", timeoutSeconds=3,
            rules=[{"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1beta2", "v1beta1"], "resources": [plural],
                    "operations": ["CREATE", "UPDATE"],
                    "scope": "Namespaced" if kind == "LocalQueue" else "Cluster"}]))
    # Kueue's alpha PreemptionConfig: a field Kueue v0.20's type does not have is refused by name
    # (the controller re-checks and does not apply such an object, so Ignore only delays the news).
    hooks.append(dict(
        common, name="vpreemptionconfig.kueue.toposched.io", clientConfig=client(VALIDATE_PREEMPTION_CONFIG),
        failurePolicy="Ignore", timeoutSeconds=3,
        rules=[{"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1alpha1"], "resources": ["preemptionconfigs"],
                "operations": ["CREATE", "UPDATE"], "scope": "Cluster"}]))
    hooks.append(dict(common, name="vworkload.kueue.toposched.io", clientConfig=client(VALIDATE_WORKLOAD),
                      failurePolicy="Fail", timeoutSeconds=5,
                      rules=[{"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1beta2", "v1beta1"],
                              "resources": ["workloads", "workloads/status"], "operations": ["CREATE", "UPDATE"],
                              "scope": "Namespaced"}],
                      matchConditions=not_the_controller(controllers)))
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": CONFIG_NAME, "labels": {"app.kubernetes.io/name": "toposched",
                                                         "app.kubernetes.io/component": "webhook"}},
            "webhooks": hooks}


def _with_ca(config: dict[str, Any], ca_bundle: bytes) -> dict[str, Any]:
    b64 = base64.b64encode(ca_bundle).decode()
    for hook in config["webhooks"]:
        hook["clientConfig"]["caBundle"] = b64
    return config


def sync(api: Api, desired: Sequence[dict[str, Any]], ca_bundle: bytes, *, create: bool = True,
         attempts: int = 10) -> None:
    """Create each configuration if missing (``create``), else point every webhook we know by name at
    our clientConfig and caBundle, keeping whatever else an admin changed (failurePolicy, selectors)."""
    for config in desired:
        resource = MUTATING if config["kind"] == "MutatingWebhookConfiguration" else VALIDATING
        config = _with_ca(config, ca_bundle)
        wanted = {h["name"]: h for h in config["webhooks"]}
        name = config["metadata"]["name"]
        for attempt in range(attempts):
            try:
                try:
                    current = api.get(resource, name)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                    if not create:
                        log.warning("%s %s does not exist and creating it is disabled", config["kind"], name)
                        break
                    api.create(resource, config)
                    log.info("created %s %s", config["kind"], name)
                    break
                changed = False
                for hook in current.get("webhooks") or ():
                    if hook.get("name") in wanted and hook.get("clientConfig") != wanted[hook["name"]]["clientConfig"]:
                        hook["clientConfig"] = wanted[hook["name"]]["clientConfig"]
                        changed = True
                if changed:
                    api.replace(resource, current)
                    log.info("updated clientConfig/caBundle of %s %s", config["kind"], name)
                break
            except ApiException as exc:
                if exc.status == 409 and attempt < attempts - 1:
                    time.sleep(0.1 * (attempt + 1))
                    continue
                raise


def webhook_names(desired: Sequence[dict[str, Any]]) -> dict[str, set[str]]:
    """Kind -> names of the webhooks we own in it (the ones whose caBundle we set)."""
    return {c["kind"]: {h["name"] for h in c["webhooks"]} for c in desired}


def ca_bundles(current: Mapping[str, dict[str, Any] | None], owned: dict[str, set[str]]) -> list[bytes]:
    """The caBundle of every webhook we own, from ``current`` (kind -> the configuration as the API
    server holds it, None when missing); a missing webhook counts as an empty bundle."""
    found: dict[tuple[str, str], bytes] = {}
    for kind, config in current.items():
        for hook in (config or {}).get("webhooks") or ():
            try:
                found[(kind, hook.get("name", ""))] = base64.b64decode((hook.get("clientConfig") or {}).get("caBundle")
                                                                       or "")
            except ValueError:
                pass
    return [found.get((kind, name), b"") for kind, names in owned.items() for name in sorted(names)]
