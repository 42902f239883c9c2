"""``toposched adopt``: the read-only pre-flight of the replace-Kueue migration.

Lists what the judgement in ``scheduler.adapter.adoption`` needs (Kueue's Deployments and
leader Lease, webhook configurations, Workloads, ClusterQueues, gated pods) and prints one line
per finding, then the verdict. Exit 0: toposched may start; 1: a blocker remains; 2: bad input.
Writes nothing: the steps that change the cluster are the admin's (docs/install.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from scheduler.adapter.adoption import KUEUE_LEADER_LEASE, assess

# Imports inside functions: the Kubernetes client loads only when the command runs, so
# `toposched --help` stays fast (scheduler.cli imports every command module to register it).


def register(sub: Any) -> None:
    p = sub.add_parser("adopt", help="check a cluster running Kueue is ready for toposched to take over "
                                     "(read only; docs/install.md)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--kueue-namespace", default="kueue-system",
                   help="namespace of Kueue's controller Deployment and leader Lease (default kueue-system)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kubernetes import client

    from scheduler.errors import UserError
    from scheduler.k8s.client import api_client
    from scheduler.k8s.informer import CLUSTER_QUEUES, LEASES, PODS, WORKLOADS, Api, Resource

    api = Api(api_client(args.kubeconfig))
    deployments = Resource("apps", "v1", "deployments")
    hook_kinds = (Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", namespaced=False),
                  Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", namespaced=False))
    try:
        configurations = []
        for resource, kind in zip(hook_kinds, ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"),
                                  strict=True):
            configurations += [{**item, "kind": kind} for item in api.list(resource).get("items", [])]
        try:
            lease: dict[str, Any] | None = api.get(LEASES, KUEUE_LEADER_LEASE, args.kueue_namespace)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            lease = None
        report = assess(
            workloads=api.list(WORKLOADS).get("items", []),
            cluster_queues=api.list(CLUSTER_QUEUES).get("items", []),
            webhook_configurations=configurations,
            pods=api.list(PODS).get("items", []),
            kueue_deployments=[d for d in api.list(deployments, args.kueue_namespace).get("items", [])
                               if "kueue" in d["metadata"]["name"]],
            kueue_lease=lease, now=dt.datetime.now(dt.UTC))
    except client.ApiException as exc:
        raise UserError(f"cannot read the cluster ({exc.status} {exc.reason}); the check needs list on "
                        "workloads, clusterqueues, pods, deployments, leases and webhook configurations",
                        exit_code=1) from exc
    for line in report.lines():
        print(line)
    return 0 if report.ready else 1
