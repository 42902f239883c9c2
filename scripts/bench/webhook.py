#!/usr/bin/env python3
"""Webhook latency: validate and mutate over HTTPS on loopback vs the same decision in-process.

Serves the real ``admission.server`` (the Go HTTPS front and the Python decider, self-signed CA)
with a synthetic HyperPod cluster view (nodes in a 3-layer tree, a TAS flavor, a ClusterQueue,
a LocalQueue), sends a bounded number of AdmissionReviews per endpoint and prints p50/p99.
The validate request is the expensive case: a Job with podset-required-topology, so every
cluster check runs (queue, level, quota, largest layer-3 domain).

  python scripts/bench/webhook.py                # 2,000 requests per endpoint, 1,000 nodes
  python scripts/bench/webhook.py --nodes 5000 --requests 2000 --concurrency 4
  python scripts/bench/webhook.py --client go --concurrency 16 --h2

``--client go``: the requests come from another process, Go's HTTP client as in the API server
(``scripts/bench/webhookload``, built with the Go toolchain into the cache), so the client's own
TLS and JSON do not share the server's interpreter; ``--client python`` (the default) sends them
from threads of this process with ``http.client``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from admission.certs import CertManager  # noqa: E402
from admission.server import WebhookApp, WebhookServer  # noqa: E402
from admission.sources import SelfSignedSource  # noqa: E402
from scheduler.adapter.kinds.batch import BATCH_JOB  # noqa: E402
from scripts.bench.percentiles import percentile  # noqa: E402

L = [f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3)]
HOST = "kubernetes.io/hostname"


def cluster(app: WebhookApp, nodes: int) -> None:
    v = app.view
    v.nodes = {}
    for i in range(nodes):
        name = f"hyperpod-i-{i:05d}"
        v.nodes[name] = {"metadata": {"name": name, "labels": {
            HOST: name, "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
            L[0]: f"nn-{i // 512}", L[1]: f"nn-{i // 64}", L[2]: f"nn-{i // 16}"}},
            "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    v.topologies = {"hyperpod-default": {"metadata": {"name": "hyperpod-default"},
                                         "spec": {"levels": [{"nodeLabel": lv} for lv in (*L, HOST)]}}}
    v.flavors = {"p5": {"metadata": {"name": "p5"}, "spec": {
        "nodeLabels": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}, "topologyName": "hyperpod-default"}}}
    v.cluster_queues = {"cq": {"metadata": {"name": "cq"}, "spec": {"resourceGroups": [{
        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": "p5", "resources": [
            {"name": "cpu", "nominalQuota": 100000}, {"name": "memory", "nominalQuota": "1000Ti"},
            {"name": "nvidia.com/gpu", "nominalQuota": nodes * 8}]}]}]}}}
    v.local_queues = {"team-a/hyperpod-ns-team-a-localqueue": {
        "metadata": {"name": "hyperpod-ns-team-a-localqueue", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}}


def body(i: int) -> bytes:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": f"train-{i}", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name":
                                                                "hyperpod-ns-team-a-localqueue"}},
        "spec": {"parallelism": 10, "completions": 10, "template": {
            "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": L[2]}},
            "spec": {"containers": [{"name": "c", "image": "pytorch", "resources": {
                "requests": {"nvidia.com/gpu": "1", "cpu": "8", "memory": "64Gi"}}}]}}}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": f"uid-{i}", "kind": {"group": "batch", "version": "v1", "kind": "Job"}, "operation": "CREATE",
        "namespace": "team-a", "object": job}}).encode()


def over_https(port: int, ca: str, path: str, n: int, concurrency: int) -> list[float]:
    ctx = ssl.create_default_context(cadata=ca)
    out: list[float] = []
    lock = threading.Lock()

    def worker(count: int, offset: int) -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
        local = []
        for i in range(count):
            data = body(offset + i)
            t0 = time.perf_counter()
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            answer = json.loads(resp.read())
            local.append((time.perf_counter() - t0) * 1e3)
            assert resp.status == 200 and answer["response"]["allowed"], answer
        conn.close()
        with lock:
            out.extend(local)

    per = n // concurrency
    threads = [threading.Thread(target=worker, args=(per, k * per)) for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def over_go_client(port: int, ca_file: Path, path: str, n: int, concurrency: int, h2: bool,
                   body_file: Path) -> dict[str, float]:
    """p50 / p99 / mean (ms) from ``webhookload`` in its own process."""
    go = shutil.which("go")
    if go is None:
        raise SystemExit("--client go needs the Go toolchain on PATH")
    source = Path(__file__).resolve().parent / "webhookload"
    target = Path(os.environ.get("TOPOSCHED_CACHE", Path.home() / ".cache" / "toposched")) / "bench" / "webhookload"
    if not target.is_file() or target.stat().st_mtime < (source / "main.go").stat().st_mtime:
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([go, "build", "-o", str(target), "."], cwd=source, check=True)
    out = subprocess.run([str(target), f"-url=https://127.0.0.1:{port}{path}", f"-ca={ca_file}", f"-body={body_file}",
                          f"-n={n}", f"-c={concurrency}", f"-h2={'true' if h2 else 'false'}"],
                         capture_output=True, text=True, check=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def in_process(app: WebhookApp, path: str, n: int) -> list[float]:
    out = []
    for i in range(n):
        data = body(i)
        t0 = time.perf_counter()
        _code, answer = app.decide(path, data)
        json.dumps(answer)
        out.append((time.perf_counter() - t0) * 1e3)
        assert answer["response"]["allowed"], answer
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000, help="per endpoint (default 2000)")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=1, help="client connections in parallel")
    ap.add_argument("--client", choices=("python", "go"), default="python",
                    help="python: threads of this process; go: webhookload in its own process")
    ap.add_argument("--h2", action="store_true", help="with --client go: HTTP/2 (one connection, many streams)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        app = WebhookApp(None)
        cluster(app, args.nodes)
        certs = CertManager(Path(tmp), ["localhost"], ["127.0.0.1"])
        server = WebhookServer(app, SelfSignedSource(certs), "127.0.0.1", 0)
        server.start()
        try:
            ca = certs.ca_bundle().decode()
            print(f"webhook bench: {args.requests} requests per endpoint, {args.nodes} nodes, "
                  f"concurrency {args.concurrency}, HTTPS keep-alive on 127.0.0.1:{server.port}")
            print(f"{'endpoint':28} {'mode':10} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
            worst = 0.0
            for path in (BATCH_JOB.validate_path, BATCH_JOB.mutate_path):
                # warm-up (TLS handshake, capacity index build)
                over_https(server.port, ca, path, 20, 1)
                in_process(app, path, 20)
                base = in_process(app, path, args.requests)
                if args.client == "go":
                    ca_file, body_file = Path(tmp) / "ca.pem", Path(tmp) / "body.json"
                    ca_file.write_text(ca)
                    body_file.write_bytes(body(0))
                    got = over_go_client(server.port, ca_file, path, args.requests, args.concurrency, args.h2,
                                         body_file)
                    print(f"{path:28} {'go ' + str(got['proto']):10} {got['p50']:8.3f} {got['p99']:8.3f} "
                          f"{got['mean']:8.3f}")
                    worst = max(worst, got["p99"])
                    continue
                wire = over_https(server.port, ca, path, args.requests, args.concurrency)
                for mode, s in (("in-process", base), ("https", wire)):
                    p50, p99 = percentile(s, 0.5), percentile(s, 0.99)
                    print(f"{path:28} {mode:10} {p50:8.3f} {p99:8.3f} {statistics.fmean(s):8.3f}")
                ratio50 = percentile(wire, 0.5) / percentile(base, 0.5)
                ratio99 = percentile(wire, 0.99) / percentile(base, 0.99)
                print(f"{'':28} {'ratio':10} {ratio50:8.1f} {ratio99:8.1f}")
                worst = max(worst, percentile(wire, 0.99))
            print(f"worst HTTPS p99: {worst:.2f} ms (aim < 10 ms): {'OK' if worst < 10 else 'ABOVE AIM'}")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
