"""The real Prometheus server (Debian's ``prometheus`` package) scrapes the running controller on
the local control plane, and PromQL over Prometheus's HTTP API returns the admissions and the
pending workload this test created, under Kueue's metric names.

Prometheus listens on 127.0.0.1 with a temporary data directory and is stopped at the end.
Without the binary (scripts/setup.sh installs it when run as root) the test skips."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.devcluster.controlplane import free_ports
from scheduler.k8s.informer import JOBS
from tests.e2e.conftest import Stack
from tests.e2e.test_hyperpod_flow import L3, NS, running_pods, sample_job

CQ = "hyperpod-ns-team-a-clusterqueue"
# Two layer-3 domains of 4 nodes (8 GPUs each): two 4-pod jobs take one domain each, a third waits.
CLUSTER = {"name": "e2e-metrics", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2], "nodesPerDomain": 4}
METRICS_PORT, PROMETHEUS_PORT = free_ports(2)


@pytest.fixture(scope="module")
def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        pytest.skip("the prometheus binary is not installed (Debian package `prometheus`; scripts/setup.sh "
                    "installs it when run as root)")
    return path


@pytest.fixture(scope="module")
def stack(stack_factory: Any, prometheus_binary: str) -> Stack:
    # /metrics on a port of its own (the default would share the health port).
    return stack_factory(CLUSTER, controller_args=("--metrics-port", str(METRICS_PORT)))


@pytest.fixture(scope="module")
def prometheus(prometheus_binary: str, stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = Path(tmp_path_factory.mktemp("prometheus"))
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [{"job_name": "toposched-controller",
                                  "static_configs": [{"targets": [f"127.0.0.1:{METRICS_PORT}"]}]}]}
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = (directory / "prometheus.log").open("w")
    proc = subprocess.Popen([prometheus_binary, f"--config.file={directory / 'prometheus.yml'}",
                             f"--storage.tsdb.path={directory / 'data'}",
                             f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{PROMETHEUS_PORT}"
    try:
        stack.wait(lambda: _ready(base), 60, f"prometheus ready (log: {directory / 'prometheus.log'})")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def query(base: str, promql: str) -> list[dict[str, Any]]:
    """An instant PromQL query over Prometheus's HTTP API: its result vector."""
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def scalar(base: str, promql: str) -> float | None:
    result = query(base, promql)
    return float(result[0]["value"][1]) if result else None


def test_prometheus_sees_the_admitted_and_pending_workloads(stack: Stack, prometheus: str) -> None:
    assert stack.wait(lambda: scalar(prometheus, 'up{job="toposched-controller"}') == 1, 60, "target up")
    for name in ("metrics-a", "metrics-b", "metrics-waits"):
        stack.api.create(JOBS, sample_job(name, 4, 8, ("kueue.x-k8s.io/podset-required-topology", L3)), NS)
        if name != "metrics-waits":  # the first two hold both domains before the third is queued
            stack.wait(lambda name=name: len(running_pods(stack, name)) == 4, 120, f"4 pods of {name} Running")

    expected = {
        f'sum(kueue_admitted_workloads_total{{cluster_queue="{CQ}"}})': 2,
        f'sum(kueue_quota_reserved_workloads_total{{cluster_queue="{CQ}",priority_class="training-priority"}})': 2,
        f'kueue_admitted_active_workloads{{cluster_queue="{CQ}",replica_role="leader"}}': 2,
        f'sum(kueue_pending_workloads{{cluster_queue="{CQ}"}})': 1,
        f'kueue_cluster_queue_status{{cluster_queue="{CQ}",status="active"}}': 1,
        f'sum(kueue_admission_wait_time_seconds_count{{cluster_queue="{CQ}"}})': 2,
        # both layer-3 domains are taken, so none is wholly free
        f'toposched_free_domains{{level="{L3}"}}': 0,
    }

    def all_match() -> bool:
        return all(scalar(prometheus, promql) == value for promql, value in expected.items())

    try:
        stack.wait(all_match, 60, "PromQL answers")
    except AssertionError as exc:
        got = "; ".join(f"{q} = {scalar(prometheus, q)} (want {v})" for q, v in expected.items())
        raise AssertionError(f"{exc}\n{got}") from None
    spans = scalar(prometheus, f'sum(toposched_admission_domains_spanned_sum{{cluster_queue="{CQ}",level="{L3}"}})')
    assert spans == 2  # each admission spans exactly one layer-3 domain
    assert query(prometheus, "kueue_build_info")
