#!/usr/bin/env python3
"""MultiKueue dispatchers end to end at small scale (issue 43 item 3, second half): the real
Kueue v0.17.0 manager and two toposched workers on local control planes; the same jobs under
each dispatcher, one after the other on the same planes.

The manager's Configuration names toposched's external dispatcher, so Kueue's MultiKueue copies
each job to exactly ``status.nominatedClusterNames``, keeps the first admission and deletes the
other copies. For the ``all-at-once`` and ``incremental`` phases this script writes the
nominations Kueue's own dispatchers would write (``core/kueue/mk_dispatch.py``, Kueue's rules
restated), for ``toposched`` the dispatcher itself runs (``scheduler/api/dispatcher.py``).

Workers, in the MultiKueueConfig's order: ``narrow`` (8 nodes in racks of 2) and ``wide``
(8 nodes in racks of 4). Jobs (one every ``--gap`` s, multi-node ones prefer one layer-3
domain): 4, 2, 4, 2, 2, 1 nodes of 8 GPUs. Figures per dispatcher: multi-node jobs in one
layer-3 domain, time from submission to the manager's ``clusterName`` p50/max, remote copies
per job (the longest nomination list seen). A benchmark: run by hand, never by the test suite.

    python3 scripts/bench/multicluster_e2e.py            # about 10 minutes on a quiet machine
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tests.multicluster.conftest as fixture  # noqa: E402
from scheduler.adapter.mk_dispatch import (  # noqa: E402
    ENDPOINT_ANNOTATION,
    config_clusters,
    manager_workload,
    multikueue_checks,
)
from scheduler.adapter.workloads import topology_assignments  # noqa: E402
from scheduler.api.dispatch_workers import make_worker  # noqa: E402
from scheduler.api.dispatcher import (  # noqa: E402
    ADMISSION_CHECKS,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    Dispatcher,
    write_nominations,
)
from scheduler.core.kueue.mk_dispatch import TOPOSCHED, all_at_once, incremental_round, needs_nomination  # noqa: E402
from scheduler.devcluster.apply import apply_objects, load_documents  # noqa: E402
from scheduler.devcluster.controlplane import free_ports  # noqa: E402
from scheduler.devcluster.multikueue import (  # noqa: E402
    MANAGER_OVERLAY,
    manager_identity,
    register_workers,
    with_admission_check,
)
from scheduler.k8s.informer import JOBS, WORKLOADS, Api  # noqa: E402
from scheduler.sim.outcomes import percentile  # noqa: E402
from tests.e2e.conftest import QUEUES, Stack  # noqa: E402
from tests.multicluster.jobs import NS, batch_job  # noqa: E402

L3 = "topology.k8s.aws/network-node-layer-3"
HOST = "kubernetes.io/hostname"
SHAPES = {"narrow": {"name": "narrow", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 4], "nodesPerDomain": 2},
          "wide": {"name": "wide", "instanceType": "ml.p5.48xlarge", "layers": [1, 1, 2], "nodesPerDomain": 4}}
SIZES = (4, 2, 4, 2, 2, 1)
DISPATCHERS = ("all-at-once", "incremental", "toposched")


def start(base: Path) -> tuple[Stack, dict[str, Stack]]:
    vars(fixture)["MANAGER_OVERLAY"] = {"multiKueue": {**MANAGER_OVERLAY["multiKueue"], "dispatcherName": TOPOSCHED}}
    manager = fixture.start_manager(base / "manager", False)
    ports = dict(zip(SHAPES, free_ports(len(SHAPES)), strict=True))
    workers = {n: fixture.start_toposched_worker(base / n, d, False, ("--grpc-port", str(ports[n])))
               for n, d in SHAPES.items()}
    register_workers(manager.cluster, {n: manager_identity(s.cluster) for n, s in workers.items()})
    apply_objects(manager.kube, with_admission_check(load_documents(QUEUES)))
    for name, port in ports.items():
        manager.api.merge_patch(MULTIKUEUE_CLUSTERS, name, {"metadata": {"annotations": {
            ENDPOINT_ANNOTATION: f"127.0.0.1:{port}"}}})
    return manager, workers


def kueue_pass(api: Api, mode: str, starts: dict[str, float]) -> None:
    """What Kueue's AllAtOnce / Incremental would write this instant."""
    checks = multikueue_checks(api.list(ADMISSION_CHECKS).get("items", []))
    configs = config_clusters(api.list(MULTIKUEUE_CONFIGS).get("items", []))
    for wl in api.list(WORKLOADS, NS).get("items", []):
        mw, check = manager_workload(wl, checks)
        if check is None or not needs_nomination(mw):
            continue
        workers = configs.get(checks[check], ())
        if mode == "all-at-once":
            nominated, changed = all_at_once(workers), set(all_at_once(workers)) != set(mw.nominated)
        else:
            rnd = incremental_round(mw.nominated, workers, starts.get(mw.key), time.time())
            nominated, changed = rnd.nominated, rnd.changed
            if changed and rnd.round_start is not None:
                starts[mw.key] = rnd.round_start
        if changed:
            write_nominations(api, wl, tuple(nominated))  # as Kueue's dispatchers write them


def l3_domains(worker: Stack, name: str) -> int | None:
    """Layer-3 domains of the worker's admitted Workload (its assignment names hostnames, or
    any levels down to them: each node is mapped to its layer-3 label)."""
    try:
        wl = worker.api.get(WORKLOADS, name, NS)
    except Exception:  # noqa: BLE001 - not there (yet): no figure
        return None
    rack = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(L3) for n in worker.nodes}
    seen: set[str | None] = set()
    for ps in topology_assignments(wl):
        if ps.placement is None or HOST not in ps.placement.levels:
            continue
        idx = ps.placement.levels.index(HOST)
        seen.update(rack.get(d.values[idx]) for d in ps.placement.domains)
    return len(seen) if seen else None


def job(name: str, nodes: int) -> dict[str, Any]:
    """A tenant's batch Job on the manager; a multi-node one prefers one layer-3 domain."""
    obj = batch_job(name, nodes, 8, topology=None)
    if nodes > 1:
        obj["spec"]["template"]["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-preferred-topology": L3}
    return obj


def phase(manager: Stack, workers: dict[str, Stack], mode: str, gap_s: float, timeout_s: float) -> dict[str, Any]:
    api = manager.api
    conns: dict[str, Any] = {}
    dispatcher = Dispatcher(api, lambda ep: make_worker(api, "toposched-system", conns, ep), time.time)
    starts: dict[str, float] = {}
    submitted: dict[str, float] = {}
    admitted: dict[str, tuple[float, str, str]] = {}  # job -> (time, worker, workload name)
    copies: dict[str, int] = {}
    names = [f"{mode[:4]}-{i}-{n}n" for i, n in enumerate(SIZES)]
    deadline = time.time() + timeout_s
    nxt = 0
    while time.time() < deadline and len(admitted) < len(SIZES):
        if nxt < len(SIZES) and (not submitted or time.time() - max(submitted.values()) >= gap_s):
            apply_objects(manager.kube, [job(names[nxt], SIZES[nxt])])
            submitted[names[nxt]] = time.time()
            nxt += 1
        if mode == "toposched":
            dispatcher.run_once()
        else:
            kueue_pass(api, mode, starts)
        for wl in api.list(WORKLOADS, NS).get("items", []):
            owner = next((o["name"] for o in wl["metadata"].get("ownerReferences") or () if o.get("kind") == "Job"),
                         None)
            if owner not in submitted:
                continue
            status = wl.get("status") or {}
            copies[owner] = max(copies.get(owner, 0), len(status.get("nominatedClusterNames") or ()))
            if status.get("clusterName") and owner not in admitted:
                admitted[owner] = (time.time(), status["clusterName"], wl["metadata"]["name"])
        time.sleep(0.5)
    for conn in conns.values():
        conn.close()
    waits = sorted(t - submitted[j] for j, (t, _w, _n) in admitted.items())
    multi = [j for j, n in zip(names, SIZES, strict=True) if n > 1 and j in admitted]
    compact = sum(1 for j in multi if l3_domains(workers[admitted[j][1]], admitted[j][2]) == 1)
    for j in names[:nxt]:
        try:
            api.delete(JOBS, j, NS, propagationPolicy="Background")
        except Exception:  # noqa: BLE001 - already gone
            pass
    for w in workers.values():
        def gone(w: Stack = w) -> bool:
            return not w.api.list(JOBS, NS).get("items")
        w.wait(gone, timeout_s=180, what="remote copies gone")
    return {"admitted": f"{len(admitted)}/{len(SIZES)}", "one_l3": f"{compact}/{len(multi)}",
            "p50_s": round(percentile(waits, 50), 1) if waits else None,
            "max_s": round(waits[-1], 1) if waits else None,
            "copies": round(sum(copies.values()) / len(copies), 2) if copies else None,
            "where": {j: admitted[j][1] for j in admitted}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gap", type=float, default=3.0, help="seconds between submissions (default 3)")
    p.add_argument("--timeout", type=float, default=240.0, help="per dispatcher (default 240 s)")
    p.add_argument("--dispatchers", default=",".join(DISPATCHERS))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mk-e2e-") as tmp:
        manager, workers = start(Path(tmp))
        try:
            for mode in args.dispatchers.split(","):
                print(mode, phase(manager, workers, mode, args.gap, args.timeout), flush=True)
        finally:
            for stack in (manager, *workers.values()):
                stack.cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
