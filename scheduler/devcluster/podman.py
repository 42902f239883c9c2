"""The podman command line, as the podman node uses it (one place for every call).

Every call runs with ``CONTAINERS_CONF`` pointing at a file of the node's own: the OCI runtime
(runc where crun cannot run: a cgroup v1/v2 hybrid host) and the rlimits the containers get
(podman's defaults raise RLIMIT_NOFILE/NPROC above the caller's hard limits, which needs
CAP_SYS_RESOURCE that a container-host root may lack).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from pathlib import Path
from typing import Any

from scheduler.errors import UserError

# The pods' network: podman's default bridge. The host reaches each pod at its own IP, and a
# pod reaches the host at the bridge's gateway.
NETWORK = "podman"
# RLIMIT_NPROC the runtime may set (conmon runs with at most this many).
MAX_NPROC = 32768


class PodmanError(Exception):
    pass


def runtime() -> str:
    """runc on a host whose cgroup v2 hierarchy still has controllers beside v1 (crun refuses
    such hybrid hosts), else podman's default."""
    unified = Path("/sys/fs/cgroup/unified/cgroup.controllers")
    hybrid = unified.is_file() and unified.read_text().strip() != ""
    return "runc" if hybrid and shutil.which("runc") else ""


def write_conf(path: Path) -> Path:
    """The node's containers.conf: rlimits within this process's own hard limits, the runtime."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nofile = 1048576 if nofile == resource.RLIM_INFINITY else min(nofile, 1048576)
    nproc = MAX_NPROC if nproc == resource.RLIM_INFINITY else min(nproc, MAX_NPROC)
    lines = ["[containers]", f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]']
    if runtime():
        lines += ["[engine]", f'runtime = "{runtime()}"']
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


class Podman:
    def __init__(self, conf: Path) -> None:
        binary = shutil.which("podman")
        if binary is None:
            raise UserError("podman is not installed: the podman node runs the chart's pods with it "
                            "(Debian: apt-get install podman runc)")
        self.binary = binary
        self.env = dict(os.environ, CONTAINERS_CONF=str(conf))

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        try:
            out = subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=timeout,
                                 env=self.env, check=False)
        except subprocess.TimeoutExpired as exc:
            raise PodmanError(f"podman {args[0]}: no answer within {timeout:.0f}s") from exc
        if check and out.returncode != 0:
            lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
            raise PodmanError(f"podman {' '.join(args[:2])}: {lines[-1] if lines else 'exit ' + str(out.returncode)}")
        return out.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args) or "null")

    # ---- images ----------------------------------------------------------------------------
    def image_user(self, image: str) -> str | None:
        """The image's configured user ("" for root by default), or None when it is not here."""
        out = subprocess.run([self.binary, "image", "inspect", "--format", "{{.Config.User}}", image],
                             capture_output=True, text=True, timeout=60, env=self.env, check=False)
        return out.stdout.strip() if out.returncode == 0 else None

    def image_id(self, image: str) -> str:
        return self.run("image", "inspect", "--format", "{{.Id}}", image).strip()

    def pull(self, image: str) -> None:
        self.run("pull", "--quiet", image, timeout=600)

    # ---- pods and containers ---------------------------------------------------------------
    def gateway(self) -> tuple[str, str]:
        """The pods' network: its gateway (the host's address as a pod sees it) and subnet."""
        networks = self.json("network", "inspect", NETWORK)
        for subnet in networks[0].get("subnets") or ():
            if subnet.get("gateway") and ":" not in subnet["gateway"]:
                return str(subnet["gateway"]), str(subnet["subnet"])
        raise UserError(f"podman network {NETWORK} has no IPv4 gateway")

    def create_pod(self, name: str, hostname: str, hosts: dict[str, str], labels: dict[str, str]) -> str:
        args = ["pod", "create", "--name", name, "--hostname", hostname, "--network", NETWORK]
        for host, ip in hosts.items():
            args += ["--add-host", f"{host}:{ip}"]
        for key, value in labels.items():
            args += ["--label", f"{key}={value}"]
        pod_id = self.run(*args).strip()
        self.run("pod", "start", name)
        return pod_id

    def pod_ip(self, name: str) -> str:
        infra = self.run("pod", "inspect", "--format", "{{.InfraContainerID}}", name).strip()
        networks = self.json("inspect", "--format", "{{json .NetworkSettings.Networks}}", infra)
        return str(networks[NETWORK]["IPAddress"])

    def remove_pod(self, *names: str) -> None:
        if names:
            self.run("pod", "rm", "--force", "--time", "0", *names, check=False)

    def stop(self, container: str, grace_s: int) -> None:
        """SIGTERM, then SIGKILL after ``grace_s`` (the pod's terminationGracePeriodSeconds)."""
        self.run("stop", "--time", str(max(grace_s, 0)), container, timeout=grace_s + 60, check=False)

    def state(self, container: str) -> dict[str, Any]:
        """``{"Running": bool, "ExitCode": int, "StartedAt": str, "FinishedAt": str, ...}``."""
        found = self.json("inspect", "--format", "{{json .State}}", container)
        return dict(found) if isinstance(found, dict) else {}

    def pods(self, label: str) -> list[str]:
        """Names of the podman pods carrying ``label`` (key=value)."""
        listed = self.json("pod", "ps", "--filter", f"label={label}", "--format", "json") or []
        return [str(p["Name"]) for p in listed]

    def logs(self, container: str, tail: int = 200) -> str:
        out = subprocess.run([self.binary, "logs", "--tail", str(tail), container], capture_output=True, text=True,
                             timeout=60, env=self.env, check=False)
        return out.stdout + out.stderr
