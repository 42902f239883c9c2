"""``toposched dev up|down|status``: the embedded demo cluster.

``up`` starts the local control plane (real kube-apiserver, etcd, kube-controller-manager,
kube-scheduler; KWOK fake nodes), creates the topology-labelled nodes of a cluster
description, applies HyperPod-style Kueue queues, and starts toposched's own components
that are built. Everything keeps running in the background until ``down``.
"""

from __future__ import annotations

import argparse
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
    up.add_argument("--kueue-config", type=Path, metavar="FILE", default=None,
                    help="Kueue's Configuration file for toposched's controller (fairSharing, waitForPodsReady, "
                    "featureGates, ...; see `toposched controller --help`)")
    add_kueue_version_argument(up)
    up.set_defaults(func=run_up)
    down = dev_sub.add_parser("down", help="stop everything `dev up` started")
    down.add_argument("--dir", type=Path, default=None)
    down.add_argument("--purge", action="store_true", help="also delete the cluster directory (etcd data, certs)")
    down.set_defaults(func=run_down)
    status = dev_sub.add_parser("status", help="show which processes of the demo cluster run")
    status.add_argument("--dir", type=Path, default=None)
    status.set_defaults(func=run_status)


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
    started = time.monotonic()
    print(f"starting the local control plane in {directory} (first run builds Kubernetes: ~5-15 min) ...",
          file=sys.stderr, flush=True)
    cluster = LocalCluster(directory, Ports.fixed(args.port)).start()
    try:
        _create_objects(cluster, nodes, queues)
        _start_job_operators(cluster, jobset=args.jobset, pytorchjob=args.pytorchjob, lws=args.lws,
                             mpijob=args.mpijob)
        components = start_toposched(cluster, StackPorts.after(args.port), kueue_config=(
            args.kueue_config.resolve() if args.kueue_config is not None else None), kueue_version=args.kueue_version)
    except BaseException:
        cluster.stop()
        raise
    _print_up_summary(args, cluster.kubeconfig, description, nodes, components, time.monotonic() - started)
    return 0


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


def _create_objects(cluster: LocalCluster, nodes: list[dict[str, Any]], queues: list[dict[str, Any]]) -> None:
    """Fake nodes (waited until placeable), toposched's namespace, then the Kueue objects."""
    from scheduler.devcluster.apply import apply_objects, create_nodes, wait_nodes_settled

    api = cluster.api_client()
    create_nodes(api, nodes, FAKE_NODE_LABEL)
    # 'up' means placeable: Ready and the node-lifecycle controller's not-ready taint lifted.
    wait_nodes_settled(api, [n["metadata"]["name"] for n in nodes], timeout_s=120)
    # toposched's own namespace (leader-election Lease, webhook certificates), as deploy/ has it.
    apply_objects(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "toposched-system"}}])
    apply_objects(api, queues)


def _start_job_operators(cluster: LocalCluster, *, jobset: bool, pytorchjob: bool, lws: bool = False,
                         mpijob: bool = False) -> None:
    """The optional JobSet, LeaderWorkerSet controllers and Kubeflow training-operator,
    mpi-operator (each built on first use)."""
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


def _print_up_summary(args: argparse.Namespace, kubeconfig: Path, description: Any, nodes: list[dict[str, Any]],
                      components: list[str], took: float) -> None:
    """What is up, where to point kubectl, and what to try next."""
    layers = sorted({k for n in nodes for k in n["metadata"]["labels"] if k.startswith("topology.k8s.aws/")})
    print(f"toposched dev cluster is up ({len(nodes)} fake {description.get('instanceType', 'GPU')} nodes, "
          f"{len(layers)} topology layers) in {took:.0f}s")
    print(f"  kubeconfig: {kubeconfig}")
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
    print("  toposched dev down   # when done")


def _load(args: argparse.Namespace) -> LocalCluster:
    directory = args.dir or default_dir()
    if not (directory / "state.json").exists():
        raise UserError(f"no dev cluster in {directory}: start one with `toposched dev up`", exit_code=1)
    return LocalCluster.load(directory)


def run_down(args: argparse.Namespace) -> int:
    cluster = _load(args)
    names = [n for n, alive in cluster.running().items() if alive]
    cluster.stop(remove_data=args.purge)
    print(f"stopped {len(names)} processes ({', '.join(names) or 'none were running'})"
          + (f"; removed {cluster.dir}" if args.purge else ""))
    return 0


def run_status(args: argparse.Namespace) -> int:
    cluster = _load(args)
    running = cluster.running()
    for name, alive in running.items():
        print(f"{name:28} {'running' if alive else 'stopped'}  pid {cluster.state.processes[name].pid}")
    print(f"kubeconfig: {cluster.kubeconfig}")
    return 0 if running and all(running.values()) else 1
