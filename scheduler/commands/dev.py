"""``toposched dev up|down|status|node|helm``: the embedded demo cluster.

``up`` starts the local control plane (real kube-apiserver, etcd, kube-controller-manager,
kube-scheduler; KWOK fake nodes), creates the topology-labelled nodes of a cluster
description, applies HyperPod-style Kueue queues, and starts toposched's own components
that are built. Everything keeps running in the background until ``down``. ``up --bare`` starts
no toposched but a node that runs pods with podman, so docs/install.md (Helm chart, container
image) can be followed on this machine. ``status`` says what answers, ``helm`` where helm is.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from scheduler.commands._kueue_config import add_kueue_version_argument, read_kueue_config
from scheduler.devcluster import binaries
from scheduler.devcluster.controlplane import FAKE_NODE_LABEL, LocalCluster, Ports, port_in_use
from scheduler.devcluster.stack import StackPorts, start_toposched
from scheduler.errors import UserError

# Imports inside functions: the command's heavy dependencies (Kubernetes client, OR-Tools, gRPC,
# the controller) load only when it runs, so `toposched --help` and the other commands start in
# about 0.1 s instead of 1.5 s (scheduler.cli imports every command module to register it).

DEFAULT_PORT = 16443


def default_dir() -> Path:
    return binaries.cache_root() / "clusters" / "dev"


def register(sub: Any) -> None:
    dev = sub.add_parser("dev", help="start/stop the local demo cluster (real control plane, fake GPU nodes)")
    dev_sub = dev.add_subparsers(dest="dev_command", metavar="ACTION", required=True)
    up = dev_sub.add_parser("up", help="start the control plane, fake nodes, queues and toposched")
    up.add_argument("--cluster", type=Path,
                    default=binaries.repo_root() / "examples" / "clusters" / "hyperpod-64.yaml",
                    help="cluster description (layers, fan-out, instance type); default: 64 p5.48xlarge nodes")
    up.add_argument("--queues", type=Path,
                    default=binaries.repo_root() / "examples" / "kueue" / "hyperpod-queues.yaml",
                    help="Kueue objects to apply (ClusterQueues, LocalQueues, flavors, Topology, priorities)")
    up.add_argument("--dir", type=Path, default=None, help=f"cluster state directory (default {default_dir()})")
    up.add_argument("--port", type=int, default=DEFAULT_PORT,
                    help="kube-apiserver port on 127.0.0.1 (the next nine are used by etcd, controller-manager, "
                    "scheduler, kwok, and toposched's extender, webhook, controller health, gRPC API)")
    up.add_argument("--jobset", action="store_true",
                    help="also run the JobSet v0.10.1 controller (built once from the Go module proxy, ~1.5 min) "
                    "so JobSets can be submitted (examples/jobs/jobset-leader-workers.yaml)")
    up.add_argument("--pytorchjob", action="store_true",
                    help="also run the Kubeflow training-operator v1.9.3 (PyTorchJob only; built once, ~1.5 min) so "
                    "PyTorchJobs can be submitted (examples/jobs/pytorchjob-master-workers.yaml)")
    up.add_argument("--lws", action="store_true",
                    help="also run the LeaderWorkerSet v0.8.0 controller (built once, ~1.5 min) so LeaderWorkerSets "
                    "can be submitted (examples/jobs/lws-leader-workers.yaml)")
    up.add_argument("--mpijob", action="store_true",
                    help="also run the Kubeflow mpi-operator v0.8.0 (MPIJob v2beta1; built once, ~1.5 min) so "
                    "MPIJobs can be submitted (examples/jobs/mpijob-launcher-workers.yaml)")
    up.add_argument("--trainjob", action="store_true",
                    help="also run the Kubeflow Trainer v2.2.0 controller manager (TrainJob; built once, ~5 min; "
                    "starts the JobSet controller too) with the torch-distributed ClusterTrainingRuntime. NOT "
                    "governed by toposched yet: a TrainJob runs without a Workload (docs/design/new-kinds.md)")
    up.add_argument("--ray", action="store_true",
                    help="also run the KubeRay ray-operator v1.6.0 (RayJob, RayCluster, RayService; built once, "
                    "~5 min). NOT governed by toposched yet: Ray objects run without a Workload "
                    "(docs/design/new-kinds.md)")
    up.add_argument("--kueue-config", type=Path, metavar="FILE", default=None,
                    help="Kueue's Configuration file for toposched's controller (fairSharing, waitForPodsReady, "
                    "featureGates, ...; see `toposched controller --help`)")
    add_kueue_version_argument(up)
    up.add_argument("--bare", action="store_true",
                    help="no toposched: the control plane with Kueue's CRDs, the fake nodes and queues, and a node "
                    "(podman-0) that runs pods with podman, to install toposched as docs/install.md says "
                    "(Helm chart, container image; the chart's kueueVersion then sets the Kueue release)")
    up.set_defaults(func=run_up)
    down = dev_sub.add_parser("down", help="stop everything `dev up` started")
    down.add_argument("--dir", type=Path, default=None)
    down.add_argument("--purge", action="store_true", help="also delete the cluster directory (etcd data, certs)")
    down.set_defaults(func=run_down)
    status = dev_sub.add_parser("status", help="show what answers: each process's health endpoint, the webhook "
                                "configurations' backends, the podman node's pods (exit 1 if anything fails)")
    status.add_argument("--dir", type=Path, default=None)
    status.set_defaults(func=run_status)
    node = dev_sub.add_parser("node", help="run the podman node of a cluster in the foreground (`dev up --bare` "
                              "starts it)")
    node.add_argument("--dir", type=Path, default=None)
    node.add_argument("--health-port", type=int, required=True, help="its /healthz and /readyz on 127.0.0.1")
    node.set_defaults(func=run_node)
    helm = dev_sub.add_parser("helm", help=f"print the path of helm {binaries.HELM_VERSION}, building it from the Go "
                              "module proxy the first time (a few minutes)")
    helm.set_defaults(func=run_helm)


def _read_yaml(path: Path, what: str) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise UserError(f"{what} {path}: no such file") from exc
    except yaml.YAMLError as exc:
        raise UserError(f"{what} {path}: not valid YAML ({exc.__class__.__name__})") from exc


def run_up(args: argparse.Namespace) -> int:
    directory = args.dir or default_dir()
    description, nodes = _fake_nodes(args.cluster)
    queues = _load_queues(args.queues)
    if args.kueue_config is not None:
        read_kueue_config(args.kueue_config, args.kueue_version)  # a bad file costs nothing: checked first
    _check_toposched_ports(args.port)
    if args.bare:
        _check_podman()
    started = time.monotonic()
    print(f"starting the local control plane in {directory} (first run builds Kubernetes: ~5-15 min) ...",
          file=sys.stderr, flush=True)
    cluster = LocalCluster(directory, Ports.fixed(args.port)).start()
    try:
        _create_objects(cluster, nodes, queues, toposched_namespace=not args.bare)
        _start_job_operators(cluster, jobset=args.jobset, pytorchjob=args.pytorchjob, lws=args.lws,
                             mpijob=args.mpijob, trainjob=args.trainjob, ray=args.ray)
        if args.bare:
            from scheduler.devcluster.podnode import start_podman_node

            start_podman_node(cluster, StackPorts.after(args.port).extender)
            components = []
        else:
            components = start_toposched(cluster, StackPorts.after(args.port), kueue_config=(
                args.kueue_config.resolve() if args.kueue_config is not None else None),
                kueue_version=args.kueue_version)
    except BaseException:
        cluster.stop()
        raise
    _print_up_summary(args, cluster.kubeconfig, description, nodes, components, time.monotonic() - started)
    return 0


def _check_podman() -> None:
    if shutil.which("podman") is None:
        raise UserError("--bare runs the chart's pods with podman, which is not installed "
                        "(Debian: apt-get install podman runc)")
    if os.geteuid() != 0:
        raise UserError("--bare runs pods on podman's bridge network, which the API server must reach: run it as "
                        "root (rootless podman gives pods no address this machine can reach)")


def _fake_nodes(cluster_file: Path) -> tuple[Any, list[dict[str, Any]]]:
    """The cluster description and its generated nodes; a bad description is the user's error."""
    from scheduler.core.fakecluster import generate_nodes

    description = _read_yaml(cluster_file, "cluster description")
    try:
        return description, generate_nodes(description)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"cluster description {cluster_file}: {exc}") from exc


def _load_queues(queues_file: Path) -> list[dict[str, Any]]:
    """The Kueue objects to apply, read before anything starts so a bad file costs nothing."""
    from scheduler.devcluster.apply import load_documents

    return load_documents(queues_file)


def _check_toposched_ports(port: int) -> None:
    """toposched's own ports (after the control plane's) must be free before anything starts."""
    for offset, what in ((6, "toposched extender"), (7, "toposched webhook"), (8, "toposched controller health"),
                         (9, "toposched gRPC API")):
        if port_in_use(port + offset):
            raise UserError(f"port {port + offset} ({what}) on 127.0.0.1 is in use: stop what holds it "
                            f"or choose another --port (toposched uses --port .. --port+9)")


def _create_objects(cluster: LocalCluster, nodes: list[dict[str, Any]], queues: list[dict[str, Any]],
                    toposched_namespace: bool = True) -> None:
    """Fake nodes (waited until placeable), toposched's namespace, then the Kueue objects."""
    from scheduler.devcluster.apply import apply_objects, create_nodes, wait_nodes_settled

    api = cluster.api_client()
    create_nodes(api, nodes, FAKE_NODE_LABEL)
    # 'up' means placeable: Ready and the node-lifecycle controller's not-ready taint lifted.
    wait_nodes_settled(api, [n["metadata"]["name"] for n in nodes], timeout_s=120)
    # toposched's own namespace (leader-election Lease, webhook certificates), as deploy/ has it;
    # a bare cluster leaves it to the install (docs/install.md creates it with its Pod Security label).
    if toposched_namespace:
        apply_objects(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "toposched-system"}}])
    apply_objects(api, queues)


def _start_job_operators(cluster: LocalCluster, *, jobset: bool, pytorchjob: bool, lws: bool = False,
                         mpijob: bool = False, trainjob: bool = False, ray: bool = False) -> None:
    """The optional JobSet, LeaderWorkerSet controllers and Kubeflow training-operator,
    mpi-operator, Trainer, KubeRay ray-operator (each built on first use)."""
    if jobset:
        from scheduler.devcluster.jobset import JOBSET_VERSION, start_jobset

        print(f"starting the JobSet {JOBSET_VERSION} controller (first run builds it: ~1.5 min) ...",
              file=sys.stderr, flush=True)
        start_jobset(cluster)
    if pytorchjob:
        from scheduler.devcluster.kubeflow import TRAINING_OPERATOR_VERSION, start_training_operator

        print(f"starting the Kubeflow training-operator {TRAINING_OPERATOR_VERSION} (first run builds it: "
              "~1.5 min) ...", file=sys.stderr, flush=True)
        start_training_operator(cluster)
    if lws:
        from scheduler.devcluster.lws import LWS_VERSION, start_lws

        print(f"starting the LeaderWorkerSet {LWS_VERSION} controller (first run builds it: ~1.5 min) ...",
              file=sys.stderr, flush=True)
        start_lws(cluster)
    if mpijob:
        from scheduler.devcluster.mpioperator import MPI_OPERATOR_VERSION, start_mpi_operator

        print(f"starting the Kubeflow mpi-operator {MPI_OPERATOR_VERSION} (first run builds it: ~1.5 min) ...",
              file=sys.stderr, flush=True)
        start_mpi_operator(cluster)
    if trainjob:
        from scheduler.devcluster.trainer import TRAINER_VERSION, start_trainer

        print(f"starting the Kubeflow Trainer {TRAINER_VERSION} controller manager (first run builds it: ~5 min"
              f"{'' if jobset else '; it needs the JobSet controller, started too'}) ...", file=sys.stderr, flush=True)
        start_trainer(cluster)
    if ray:
        from scheduler.devcluster.kuberay import KUBERAY_VERSION, start_kuberay

        print(f"starting the KubeRay ray-operator {KUBERAY_VERSION} (first run builds it: ~5 min) ...",
              file=sys.stderr, flush=True)
        start_kuberay(cluster)


def _print_up_summary(args: argparse.Namespace, kubeconfig: Path, description: Any, nodes: list[dict[str, Any]],
                      components: list[str], took: float) -> None:
    """What is up, where to point kubectl, and what to try next."""
    layers = sorted({k for n in nodes for k in n["metadata"]["labels"] if k.startswith("topology.k8s.aws/")})
    print(f"toposched dev cluster is up ({len(nodes)} fake {description.get('instanceType', 'GPU')} nodes, "
          f"{len(layers)} topology layers) in {took:.0f}s")
    print(f"  kubeconfig: {kubeconfig}")
    if args.bare:
        print("  toposched:  not installed (--bare); node podman-0 runs pods with podman")
        print("next: install it as docs/install.md says (\"On this machine\"):")
        print(f"  export KUBECONFIG={kubeconfig}")
        print("  scripts/build-image.sh && scripts/build-kube-scheduler-image.sh")
        print('  export PATH="$(dirname "$(toposched dev helm)"):$PATH"   # helm v4.3.2')
        print("  helm install toposched deploy/helm/toposched -n toposched-system ...   # docs/install.md")
        print("  toposched dev status   # what answers; toposched dev down when done")
        return
    print(f"  gRPC API:   127.0.0.1:{StackPorts.after(args.port).grpc}  (toposched place|topology --server ...)")
    print(f"  toposched:  {', '.join(components) if components else 'no components built yet'}")
    print("next:")
    print(f"  export KUBECONFIG={kubeconfig}")
    print("  kubectl get nodes -L topology.k8s.aws/network-node-layer-3,sagemaker.amazonaws.com/node-health-status")
    print("  scripts/visualize_topology")
    print("  kubectl apply -f examples/jobs/hyperpod-required-layer3.yaml")
    if args.jobset:
        print("  kubectl apply -f examples/jobs/jobset-leader-workers.yaml")
    if args.pytorchjob:
        print("  kubectl apply -f examples/jobs/pytorchjob-master-workers.yaml")
    if args.lws:
        print("  kubectl apply -f examples/jobs/lws-leader-workers.yaml")
    if args.mpijob:
        print("  kubectl apply -f examples/jobs/mpijob-launcher-workers.yaml")
    if args.trainjob:
        print("  kubectl apply -f examples/jobs/trainjob-torch.yaml   # not governed by toposched yet")
    if args.ray:
        print("  kubectl apply -f examples/jobs/raycluster.yaml       # not governed by toposched yet")
    print("  toposched dev down   # when done")
    print("to install toposched yourself (Helm chart, image; docs/install.md), start with `toposched dev up --bare`")


def _load(args: argparse.Namespace) -> LocalCluster:
    directory = args.dir or default_dir()
    if not (directory / "state.json").exists():
        raise UserError(f"no dev cluster in {directory}: start one with `toposched dev up`", exit_code=1)
    return LocalCluster.load(directory)


def run_down(args: argparse.Namespace) -> int:
    from scheduler.devcluster.podnode import sweep

    cluster = _load(args)
    names = [n for n, alive in cluster.running().items() if alive]
    cluster.stop()
    sweep(cluster)  # containers of a podman node that died without removing them
    cluster.stop(remove_data=args.purge)
    print(f"stopped {len(names)} processes ({', '.join(names) or 'none were running'})"
          + (f"; removed {cluster.dir}" if args.purge else ""))
    return 0


def run_status(args: argparse.Namespace) -> int:
    from kubernetes.client import ApiException

    from scheduler.devcluster import health
    from scheduler.devcluster.podnode import NODE_NAME
    from scheduler.k8s.informer import Api

    cluster = _load(args)
    api = Api(cluster.api_client())
    apiserver_up = health.answers(cluster.health_url("kube-apiserver"))[0]
    sections = [("", health.process_checks(cluster, api if apiserver_up else None))]
    if apiserver_up:
        try:
            sections += [("webhook configurations (what the API server calls):", health.webhook_checks(api)),
                         (f"pods on {NODE_NAME} (podman):", health.node_pod_checks(api))]
        except ApiException as exc:
            sections.append(("", [health.Check("API server", False, f"answers {exc.status} ({exc.reason})")]))
    print(health.render(sections))
    print(f"kubeconfig: {cluster.kubeconfig}")
    checks = [c for _, section in sections for c in section]
    return 0 if checks and all(c.ok for c in checks) else 1


def run_node(args: argparse.Namespace) -> int:
    import signal
    import threading

    from scheduler.devcluster.podnode import PROCESS_NAME, PodmanNode

    cluster = _load(args)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    PodmanNode(cluster.kubeconfig, cluster.dir / PROCESS_NAME, cluster.ports.apiserver).run(stop, args.health_port)
    return 0


def run_helm(args: argparse.Namespace) -> int:
    if not binaries.helm_binary_path().is_file():
        print(f"building helm {binaries.HELM_VERSION} from the Go module proxy (first time: a few minutes) ...",
              file=sys.stderr, flush=True)
    print(binaries.ensure_helm())
    return 0
