"""``toposched preflight``: may toposched be installed on this cluster? (docs/install.md,
"Versions and pre-flight").

Reads the API server's version and Kueue's CustomResourceDefinitions and prints one go/no-go
line per check (``scheduler.adapter.preflight`` judges). Exit 0: go; 1: a no-go line, or the
cluster cannot be read; 2: bad input (one line). Writes nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.core.config import DEFAULT_KUEUE_RELEASE

# Imports inside functions: the Kubernetes client loads only when the command runs (`toposched
# --help` imports every command module).


def register(sub: Any) -> None:
    p = sub.add_parser("preflight", help="check the cluster's Kubernetes version and Kueue CRDs before installing "
                                         "(read only; docs/install.md)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    # A plain string, checked in run(): argparse's own error is a usage block, not one line.
    p.add_argument("--kueue-version", default=DEFAULT_KUEUE_RELEASE, metavar="VERSION",
                   help="the Kueue release toposched will behave as: the chart's kueueVersion (v0.17 by default; "
                        "v0.19 with values-hyperpod.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import urllib3
    from kubernetes import client

    from scheduler.adapter.preflight import assess
    from scheduler.core.config import kueue_release
    from scheduler.errors import UserError
    from scheduler.k8s.client import api_client
    from scheduler.k8s.informer import Api, Resource

    try:
        behave_as = kueue_release(args.kueue_version)
    except ValueError as exc:
        raise UserError(f"--kueue-version: {exc}") from exc
    kube = api_client(args.kubeconfig)
    crds = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)
    try:
        git_version = str(client.VersionApi(kube).get_code().git_version)
        items = Api(kube).list(crds).get("items", [])
    except client.ApiException as exc:
        raise UserError(f"cannot read the cluster ({exc.status} {exc.reason}); the check needs get on /version and "
                        "list on customresourcedefinitions", exit_code=1) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise UserError(f"cannot reach the API server ({type(exc).__name__}); check --kubeconfig and the network",
                        exit_code=1) from exc
    report = assess(git_version=git_version, crds=items, behave_as=behave_as)
    for line in report.lines():
        print(line)
    return 0 if report.go else 1
