"""Each RPC over a real grpc server on loopback: answers, INVALID_ARGUMENT naming the field,
NOT_FOUND, UNIMPLEMENTED for what the admission cycle would answer, deadlines."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from scheduler.adapter.kinds.workloads import EXPECTED_KINDS
from scheduler.api.convert import place_response_to_json
from scheduler.api.engine import StaticEngine
from scheduler.api.gen.toposched.v1 import placement_pb2 as pb
from scheduler.cli import main
from scheduler.core.assignment import encode_v1beta2
from scheduler.core.placement.types import DomainAssignment, PodSetPlacement

from .conftest import DATA, FLAVOR, HOST, L3, PLAIN_FLAVOR, TOPOLOGY, job, load_items, snapshot

GPU = "nvidia.com/gpu"


def offline_json(capsys: pytest.CaptureFixture[str], workload: str, *extra: str) -> tuple[int, dict[str, Any]]:
    code = main(["place", "--nodes", str(DATA / "nodes.yaml"), "--workload", str(DATA / workload),
                 "--output", "json", *extra])
    doc = json.loads(capsys.readouterr().out)
    for key in ("emptyCluster", "note"):  # the command's word on its inputs, not the placement's
        doc.pop(key)
    return code, doc


def manifest(name: str) -> pb.WorkloadInput:
    return pb.WorkloadInput(manifest=(DATA / name).read_bytes())


def status_of(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    err: Any = info.value
    return err.code(), err.details()


# ---------------------------------------------------------------------------- Place


@pytest.mark.parametrize("workload", ["job-required-l3.yaml", "job-preferred-l3.yaml", "job-required-l3-nofit.yaml"])
def test_place_live_equals_cli(stub: Any, capsys: pytest.CaptureFixture[str], workload: str) -> None:
    _, want = offline_json(capsys, workload, "--solver", "greedy")
    resp = stub.Place(pb.PlaceRequest(workload=manifest(workload), solver=pb.SOLVER_GREEDY), timeout=10)
    assert place_response_to_json(resp) == want
    assert resp.topology == "default" and resp.flavor == "" and resp.time_budget_ms == 100


def test_place_offline_nodes_and_topology_in_request(stub: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, want = offline_json(capsys, "job-required-l3.yaml", "--solver", "greedy", "--topology",
                           str(DATA / "topology.yaml"), "--pods", str(DATA / "pods.yaml"))
    resp = stub.Place(pb.PlaceRequest(
        workload=manifest("job-required-l3.yaml"), nodes=(DATA / "nodes.yaml").read_bytes(),
        pods=(DATA / "pods.yaml").read_bytes(), topology=(DATA / "topology.yaml").read_bytes(),
        solver=pb.SOLVER_GREEDY), timeout=10)
    assert place_response_to_json(resp) == want and resp.topology == "hyperpod"


def test_place_jobset_group_equals_cli(stub: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A JobSet with a leader + workers PodSet group: the same place/v1 document both ways. CP-SAT
    gets a budget it cannot run out of on a loaded machine (else each side keeps whatever it had
    found at its own deadline, and the two may differ)."""
    example = Path(__file__).resolve().parents[3] / "examples" / "jobs" / "jobset-podset-group.yaml"
    code = main(["place", "--nodes", str(DATA / "nodes.yaml"), "--topology", str(DATA / "topology.yaml"),
                 "--workload", str(example), "--output", "json", "--solver", "cpsat", "--time-budget-ms", "10000"])
    want = json.loads(capsys.readouterr().out)
    assert want.pop("emptyCluster") is True and want.pop("note")
    resp = stub.Place(pb.PlaceRequest(
        workload=pb.WorkloadInput(manifest=example.read_bytes()), nodes=(DATA / "nodes.yaml").read_bytes(),
        topology=(DATA / "topology.yaml").read_bytes(), solver=pb.SOLVER_CPSAT, time_budget_ms=10000), timeout=30)
    assert code == 0 and place_response_to_json(resp) == want
    assert want["apiVersion"] == resp.api_version == "toposched.io/place/v1"
    assert [ps["name"] for ps in want["podSets"]] == ["leader", "workers"]


def test_place_structured_same_as_manifest(stub: Any) -> None:
    structured = pb.StructuredWorkload(name="s", pod_sets=[pb.PodSet(
        name="main", count=3, requests={"cpu": "8", GPU: "8"}, topology=pb.TopologyRequest(required=L3))])
    a = stub.Place(pb.PlaceRequest(workload=pb.WorkloadInput(structured=structured), solver=pb.SOLVER_GREEDY))
    b = stub.Place(pb.PlaceRequest(workload=manifest("job-required-l3.yaml"), solver=pb.SOLVER_GREEDY))
    assert place_response_to_json(a) == place_response_to_json(b)
    assert a.fits and len(a.pod_sets[0].assignments) == 3


def test_place_no_fit_is_ok_with_kueue_message(stub: Any) -> None:
    resp = stub.Place(pb.PlaceRequest(workload=manifest("job-required-l3-nofit.yaml"), solver=pb.SOLVER_GREEDY))
    assert not resp.fits and not resp.pod_sets
    assert resp.reason == ('topology "default" allows to fit only 4 out of 5 pod(s). '
                           'Total nodes: 16; excluded: resource "nvidia.com/gpu": 3')


def _admitted_workload(host: str, count: int) -> dict[str, Any]:
    ps = PodSetPlacement("main", count, (HOST,), (DomainAssignment((host,), count),))
    template = job()["spec"]["template"]
    return {
        "kind": "Workload", "metadata": {"name": "wl-busy", "namespace": "team-b"},
        "spec": {"podSets": [{"name": "main", "count": count, "template": template}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}],
                   "admission": {"clusterQueue": "cq", "podSetAssignments": [
                       {"name": "main", "flavors": {GPU: "gpu"}, "count": count,
                        "topologyAssignment": encode_v1beta2(ps)}]}},
    }


def test_place_on_flavor_tree_sees_admitted_usage(engine: StaticEngine, stub: Any) -> None:
    first = stub.Place(pb.PlaceRequest(workload=manifest("job-required-l3.yaml"), solver=pb.SOLVER_GREEDY))
    busy = first.pod_sets[0].assignments[0].nodes[0]
    engine.replace(snapshot(flavors=[FLAVOR, PLAIN_FLAVOR], topologies=[TOPOLOGY],
                            workloads=[_admitted_workload(busy, 1)]))
    resp = stub.Place(pb.PlaceRequest(workload=manifest("job-required-l3.yaml"), solver=pb.SOLVER_GREEDY))
    assert resp.flavor == "gpu" and resp.topology == "hyperpod" and resp.fits  # the only TAS flavor
    assert busy not in {n for a in resp.pod_sets[0].assignments for n in a.nodes}
    named = stub.Place(pb.PlaceRequest(workload=manifest("job-required-l3.yaml"), flavor="gpu",
                                       solver=pb.SOLVER_GREEDY))
    assert place_response_to_json(named) == place_response_to_json(resp)


@pytest.mark.parametrize("request_kwargs, field", [
    ({}, "workload"),
    ({"workload": pb.WorkloadInput(manifest=b"kind: Job\nmetadata: {name: j}\nspec: {}\n")},
     "workload.manifest: spec.template"),
    ({"workload": pb.WorkloadInput(manifest=b"kind: ConfigMap\nmetadata: {name: d}\n")},
     f"workload.manifest: kind: expected {EXPECTED_KINDS}"),
    ({"workload": pb.WorkloadInput(manifest=b"kind: AppWrapper\nmetadata: {name: d}\n")},
     "workload.manifest: kind: AppWrapper is not built in toposched yet (no AppWrapper integration)"),
    ({"workload": pb.WorkloadInput(manifest=b"a: [\n b")}, "workload.manifest: not valid JSON or YAML"),
    ({"workload": pb.WorkloadInput(manifest=b"kind: Job\n\xff")}, "workload.manifest: not UTF-8 text (byte 0xff"),
    ({"workload": pb.WorkloadInput(structured=pb.StructuredWorkload())}, "workload.structured.pod_sets:"),
    ({"workload": pb.WorkloadInput(structured=pb.StructuredWorkload(pod_sets=[pb.PodSet(count=-1)]))},
     "workload.structured.pod_sets[0].count: must be >= 0"),
    ({"workload": pb.WorkloadInput(structured=pb.StructuredWorkload(pod_sets=[
        pb.PodSet(count=1, requests={"cpu": "lots"})]))}, "workload.structured.pod_sets[0].requests[cpu]:"),
    ({"workload": pb.WorkloadInput(structured=pb.StructuredWorkload(pod_sets=[
        pb.PodSet(count=1, topology=pb.TopologyRequest(slice_required=L3))]))},
     "workload.structured.pod_sets[0].topology.slice_size"),
    ({"time_budget_ms": -1}, "time_budget_ms: must be >= 0"),
    ({"solver": 42}, "solver: unknown value 42"),
    ({"nodes": b"kind: Pod\nmetadata: {name: x}\n"}, "nodes: kind: expected Node objects"),
    ({"nodes": (DATA / "nodes.yaml").read_bytes(), "flavor": "gpu"}, "flavor: must be empty"),
    ({"pods": (DATA / "pods.yaml").read_bytes()}, "pods: only read together with nodes"),
    ({"topology": b"kind: Topology\nmetadata: {name: t}\nspec: {levels: []}\n"}, "topology: spec.levels"),
    # the same reader and words as `toposched place` (it said "fits: false", a Kueue no-fit)
    ({"workload": manifest("job-bad-level.yaml"), "nodes": (DATA / "nodes.yaml").read_bytes()},
     'workload: pod set main: level "example.com/rack" is not in Topology "default" (levels: '),
    ({"nodes": b"\0\0\0binary"}, "nodes: not a text file (a NUL byte at offset 0)"),
    ({"nodes": (DATA / "nodes.yaml").read_bytes().replace(b"name: n-a1-1", b"name: n-a1-0")},
     'nodes: items[1] (n-a1-0): metadata.name: Duplicate value: "n-a1-0"'),
])
def test_place_invalid_argument_names_field(stub: Any, request_kwargs: dict[str, Any], field: str) -> None:
    kwargs = {"workload": manifest("job-required-l3.yaml"), **request_kwargs}
    if "workload" in request_kwargs or request_kwargs == {}:
        kwargs = dict(request_kwargs)
        if request_kwargs != {}:
            kwargs["workload"] = request_kwargs["workload"]
    code, details = status_of(lambda: stub.Place(pb.PlaceRequest(**kwargs), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith(field), details


def test_place_unknown_flavor_not_found(engine: StaticEngine, stub: Any) -> None:
    engine.replace(snapshot(flavors=[FLAVOR], topologies=[TOPOLOGY]))
    code, details = status_of(lambda: stub.Place(pb.PlaceRequest(workload=manifest("job-required-l3.yaml"),
                                                                 flavor="nope")))
    assert code == grpc.StatusCode.NOT_FOUND and "'nope'" in details and "TAS flavors: gpu" in details


def test_place_without_live_snapshot_needs_nodes(engine: StaticEngine, stub: Any) -> None:
    engine.replace(None)
    code, details = status_of(lambda: stub.Place(pb.PlaceRequest(workload=manifest("job-required-l3.yaml"))))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "send nodes" in details
    resp = stub.Place(pb.PlaceRequest(workload=manifest("job-required-l3.yaml"),
                                      nodes=(DATA / "nodes.yaml").read_bytes()))
    assert resp.fits


def test_place_budget_capped_by_deadline(stub: Any) -> None:
    req = pb.PlaceRequest(workload=manifest("job-preferred-l3.yaml"), solver=pb.SOLVER_CPSAT, time_budget_ms=20_000)
    start = time.monotonic()
    resp = stub.Place(req, timeout=0.6)
    elapsed = time.monotonic() - start
    assert resp.fits and 0 <= resp.time_budget_ms < 600
    assert elapsed < 2.0


def test_place_expired_deadline(stub: Any) -> None:
    code, _ = status_of(lambda: stub.Place(pb.PlaceRequest(workload=manifest("job-required-l3.yaml")),
                                           timeout=0.0005))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED


# ---------------------------------------------------------------------------- Explain / Simulate


def test_explain_validation_and_not_found(stub: Any) -> None:
    code, details = status_of(lambda: stub.Explain(pb.ExplainRequest(name="x")))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("namespace: required")
    code, details = status_of(lambda: stub.Explain(pb.ExplainRequest(namespace="team-a")))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("name: required")
    code, details = status_of(lambda: stub.Explain(pb.ExplainRequest(namespace="team-a", name="ghost")))
    assert code == grpc.StatusCode.NOT_FOUND and "ghost" in details
    code, details = status_of(lambda: stub.Explain(pb.ExplainRequest(namespace="other", name="req-l3")))
    assert code == grpc.StatusCode.NOT_FOUND


def test_simulate_validation(stub: Any) -> None:
    code, details = status_of(lambda: list(stub.Simulate(pb.SimulateRequest(queues=b"x", trace=b"y"))))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("cluster: required")
    code, details = status_of(lambda: list(stub.Simulate(pb.SimulateRequest(
        cluster=b"c", queues=b"q", trace=b"t", horizon_s=-1))))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("horizon_s")
    code, details = status_of(lambda: list(stub.Simulate(pb.SimulateRequest(cluster=b"c", queues=b"q", trace=b"t"))))
    # the simulator exists (tests/unit/test_simulate.py streams a real run): a non-object cluster is rejected
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("cluster"), details


# ---------------------------------------------------------------------------- GetTopology


def test_get_topology_capacity_and_health(engine: StaticEngine, stub: Any) -> None:
    nodes = load_items(DATA / "nodes.yaml")
    nodes[0]["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"] = "UnschedulablePendingReplacement"
    nodes[1]["spec"] = {"unschedulable": True}
    engine.replace(snapshot(nodes=nodes))
    resp = stub.GetTopology(pb.GetTopologyRequest(), timeout=10)
    assert list(resp.levels) == [f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3)]
    assert resp.totals.nodes == 16 and resp.totals.unhealthy == 1 and resp.totals.unavailable == 1
    roots_gpus = sum(d.allocatable.get(GPU, 0) for d in resp.domains)
    all_gpus = sum(int(n["status"]["allocatable"][GPU]) for n in nodes)
    assert roots_gpus == all_gpus - 16  # the two unplaceable nodes (8 GPUs each) are not capacity
    assert sum(d.unhealthy for d in resp.domains) == 1 and sum(d.unavailable for d in resp.domains) == 1
    rack = resp.domains[0].children[0].children[0]
    assert rack.label == L3 and len(rack.path) == 3
    assert rack.used[GPU] == rack.allocatable[GPU] - rack.free[GPU]
    by_name = {n.name: n for n in resp.nodes}
    assert by_name[nodes[0]["metadata"]["name"]].health == pb.NODE_HEALTH_UNHEALTHY
    assert by_name[nodes[0]["metadata"]["name"]].free == {}
    assert by_name[nodes[2]["metadata"]["name"]].free[GPU] >= 0


def test_get_topology_flavor_and_errors(engine: StaticEngine, stub: Any) -> None:
    host = load_items(DATA / "nodes.yaml")[0]["metadata"]["name"]
    engine.replace(snapshot(flavors=[FLAVOR], topologies=[TOPOLOGY], workloads=[_admitted_workload(host, 1)]))
    resp = stub.GetTopology(pb.GetTopologyRequest(flavor="gpu", omit_nodes=True))
    assert resp.topology == "hyperpod" and resp.flavor == "gpu" and not resp.nodes
    total_free = sum(d.free[GPU] for d in resp.domains)
    total_alloc = sum(d.allocatable[GPU] for d in resp.domains)
    assert total_alloc - total_free >= 8  # the admitted pod's 8 GPUs are used
    code, _ = status_of(lambda: stub.GetTopology(pb.GetTopologyRequest(flavor="nope")))
    assert code == grpc.StatusCode.NOT_FOUND
    code, details = status_of(lambda: stub.GetTopology(pb.GetTopologyRequest(levels=["", L3])))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("levels[0]")
    code, details = status_of(lambda: stub.GetTopology(pb.GetTopologyRequest(levels=["no/such"])))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("levels:")


def test_topology_view_round_trip(stub: Any) -> None:
    from scheduler.api.convert import response_to_view
    from scheduler.core.nodes import node_from_k8s
    from scheduler.topoview import build_view, view_to_dict

    view = build_view([node_from_k8s(n) for n in load_items(DATA / "nodes.yaml")])
    resp = stub.GetTopology(pb.GetTopologyRequest())
    assert view_to_dict(response_to_view(resp)) == view_to_dict(view)
    assert yaml.safe_load(json.dumps(view_to_dict(view)))  # plain data
