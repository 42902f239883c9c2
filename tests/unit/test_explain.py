"""toposched explain: the numbers behind the verdict (quota, topology, health, queue), and the CLI's exits."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from scheduler import cli
from scheduler.api.engine import EngineSnapshot
from scheduler.core.fakecluster import generate_nodes
from scheduler.explain import NotFound, explain, to_text

GPU = "nvidia.com/gpu"
L3 = "topology.k8s.aws/network-node-layer-3"
KQ = "kueue.x-k8s.io/v1beta2"
# 1 x 2 x 2 layer domains, 2 nodes each: 8 nodes of 8 GPUs; node 7 reported failed by HyperPod.
CLUSTER = {"name": "explain-8", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 2,
           "nodes": [{"index": 7, "labels": {"sagemaker.amazonaws.com/node-health-status":
                                             "UnschedulablePendingReplacement"}}]}
TOPOLOGY = {"apiVersion": KQ, "kind": "Topology", "metadata": {"name": "hp"},
            "spec": {"levels": [{"nodeLabel": f"topology.k8s.aws/network-node-layer-{i}"} for i in (1, 2, 3)]
                     + [{"nodeLabel": "kubernetes.io/hostname"}]}}
FLAVOR = {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "p5"},
          "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}, "topologyName": "hp"}}


def cq(name: str, gpus: int, borrowing_limit: int | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"name": GPU, "nominalQuota": str(gpus)}
    if borrowing_limit is not None:
        res["borrowingLimit"] = str(borrowing_limit)
    return {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": "shared", "namespaceSelector": {},
                     "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "p5", "resources": [res]}]}]}}


def lq(ns: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": ns},
            "spec": {"clusterQueue": cluster_queue}}


def workload(name: str, pods: int, level: str | None = None, ns: str = "team-a",
             created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    ps: dict[str, Any] = {"name": "main", "count": pods, "template": {"spec": {"containers": [
        {"name": "c", "image": "x", "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}]}}}
    if level:
        ps["topologyRequest"] = {"required": level}
    return {"apiVersion": KQ, "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "creationTimestamp": created},
            "spec": {"queueName": "q", "podSets": [ps]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                       "message": "recorded by the controller", "lastTransitionTime": created}]}}


def snap(*workloads: dict[str, Any], a_gpus: int = 32, limit: int | None = 8) -> EngineSnapshot:
    return EngineSnapshot(nodes=generate_nodes(CLUSTER), flavors=[FLAVOR], topologies=[TOPOLOGY],
                          workloads=list(workloads), cluster_queues=[cq("cq-a", a_gpus, limit), cq("cq-b", 16)],
                          local_queues=[lq("team-a", "cq-a"), lq("team-b", "cq-b")],
                          namespaces=[{"metadata": {"name": "team-a"}}, {"metadata": {"name": "team-b"}}])


def test_quota_shortage_numbers_and_borrowing() -> None:
    # cq-a: nominal 32, borrowingLimit 8, cohort peer cq-b lends 16 unused -> 40 available; 6 x 8 = 48 asked.
    out = explain(snap(workload("big", 6)), "team-a", "big", solver="greedy")
    row = out["quota"]["resources"][0]
    assert (row["flavor"], row["resource"]) == ("p5", GPU)
    assert (row["requested"], row["available"], row["short"], row["nominal"], row["borrowingLimit"]) == (
        "48", "40", "8", "32", "8")
    assert out["quota"]["cohort"] == "shared" and out["quota"]["borrowing"] is False
    assert [m["clusterQueue"] for m in out["quota"]["cohortMembers"]] == ["cq-a", "cq-b"]
    assert out["reasons"][0]["reason"] in ("WaitingForQuota", "ExceedsMaxQuota") and GPU in out["reasons"][0]["message"]
    text = to_text(out)
    assert "requests 48, available 40" in text and "short by 8" in text and "cohort shared" in text
    assert "last recorded by the controller: recorded by the controller" in text


def test_topology_largest_domain_now_and_empty() -> None:
    # 4 pods required in one layer-3 domain; layer-3 domains hold 2 nodes (8 GPUs each): never fits.
    out = explain(snap(workload("wide", 4, L3)), "team-a", "wide", solver="greedy")
    (t,) = out["topology"]
    assert t["level"] == L3 and t["mode"] == "required" and t["pods"] == 4
    assert t["now"]["podsFit"] == 2 and t["empty"]["podsFit"] == 2
    assert t["now"]["domains"] == 4 and t["now"]["domainsThatFit"] == 0
    assert out["reasons"][0]["reason"] == "TopologyPlacementFailed"
    assert "can never fit at this level" in to_text(out)


def test_health_exclusion_counts() -> None:
    out = explain(snap(workload("one", 1)), "team-a", "one", solver="greedy")
    h = out["health"]
    assert h["nodes"] == 8 and h["excluded"] == 1
    (reason,) = h["byReason"]
    assert "UnschedulablePendingReplacement" in reason and h["byReason"][reason] == 1
    assert "Health: 1 of 8 nodes excluded" in to_text(out)


def test_queue_position() -> None:
    first = workload("first", 6, created="2026-01-01T00:00:00Z")
    second = workload("second", 1, created="2026-01-01T00:01:00Z")
    out = explain(snap(first, second), "team-a", "second", solver="greedy")
    assert out["queue"]["position"] == 2 and out["queue"]["ahead"] == 1 and out["queue"]["pending"] == 2
    assert out["reasons"][0]["reason"] == "Admissible"


def test_admitted_and_unknown() -> None:
    with pytest.raises(NotFound):
        explain(snap(), "team-a", "nope")


# ---------------------------------------------------------------------- CLI


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    import scheduler.commands.explain as cmd
    import scheduler.k8s.client as kclient

    monkeypatch.setattr(kclient, "api_client", lambda kubeconfig: object())
    monkeypatch.setattr(cmd, "read_cluster", lambda api: snap(workload("big", 6), workload("wide", 4, L3)))


def test_cli_json_and_text(fake_cluster: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "team-a/big", "--kubeconfig", "k", "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["quota"]["resources"][0]["short"] == "8"
    assert cli.main(["explain", "team-a/wide", "--kubeconfig", "k"]) == 0
    assert "largest network-node-layer-3 domain" in capsys.readouterr().out


def test_cli_unknown_job_exit_1(fake_cluster: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "team-a/nope", "--kubeconfig", "k"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no Job or Workload 'nope' in namespace 'team-a'" in err


@pytest.mark.parametrize("argv", [["explain", "no-slash"], ["explain", "a/b/c"], ["explain", "Team/x"],
                                  ["explain", "a/b", "--server", "x:1", "--kubeconfig", "k"]])
def test_cli_bad_argument_exit_2(fake_cluster: None, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_cli_bad_output_flag_exit_2(fake_cluster: None) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["explain", "a/b", "--output", "xml"])
    assert info.value.code == 2


def test_cli_server_gives_the_same_answer_as_kubeconfig(fake_cluster: None, capsys: pytest.CaptureFixture[str]) -> None:
    from scheduler.api.engine import StaticEngine
    from scheduler.api.server import serve

    assert cli.main(["explain", "team-a/big", "--kubeconfig", "k", "-o", "json"]) == 0
    local = json.loads(capsys.readouterr().out)
    srv = serve(StaticEngine(snap(workload("big", 6), workload("wide", 4, L3))), bind="127.0.0.1", port=0,
                max_workers=2)
    try:
        assert cli.main(["explain", "team-a/big", "--server", f"127.0.0.1:{srv.port}", "-o", "json"]) == 0
        remote = json.loads(capsys.readouterr().out)
        assert cli.main(["explain", "team-a/nope", "--server", f"127.0.0.1:{srv.port}"]) == 1
    finally:
        srv.stop(0.5)
    assert remote["quota"] == local["quota"] and remote["topology"] == local["topology"]
    assert remote["health"] == local["health"] and remote["queue"] == local["queue"]
    assert [r["reason"] for r in remote["reasons"]] == [r["reason"] for r in local["reasons"]]


def _admitted_on(name: str, host: str) -> dict[str, Any]:
    wl = workload(name, 1)
    wl["spec"]["priority"] = 0
    wl["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                    "lastTransitionTime": "2026-01-01T00:00:00Z"},
                                   {"type": "Admitted", "status": "True", "reason": "Admitted",
                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                    "admission": {"clusterQueue": "cq-a", "podSetAssignments": [{
                        "name": "main", "flavors": {GPU: "p5"}, "resourceUsage": {GPU: "8"}, "count": 1,
                        "topologyAssignment": {"levels": ["kubernetes.io/hostname"],
                                               "domains": [{"values": [host], "count": 1}]}}]}}
    return wl


def test_preemption_target_domain_and_victims() -> None:
    # Every healthy node holds a low-priority 1-node workload; "big" (priority 100) needs 2 nodes
    # of one layer-3 domain: explain names the domain its preemptions free and the victims.
    hosts = [n["metadata"]["name"] for n in generate_nodes(CLUSTER)][:7]
    cqa = cq("cq-a", 64, 8)
    cqa["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    big = workload("big", 2, L3)
    big["spec"]["priority"] = 100
    s = EngineSnapshot(nodes=generate_nodes(CLUSTER), flavors=[FLAVOR], topologies=[TOPOLOGY],
                       workloads=[big, *(_admitted_on(f"low{i}", h) for i, h in enumerate(hosts))],
                       cluster_queues=[cqa, cq("cq-b", 16)],
                       local_queues=[lq("team-a", "cq-a"), lq("team-b", "cq-b")],
                       namespaces=[{"metadata": {"name": "team-a"}}, {"metadata": {"name": "team-b"}}])
    out = explain(s, "team-a", "big", solver="greedy")
    target = out["preemptionTarget"]
    assert target["level"] == L3 and target["sticky"] is False and len(target["victims"]) == 2
    labels = {n["metadata"]["name"]: n["metadata"]["labels"][L3] for n in generate_nodes(CLUSTER)}
    victims_hosts = {hosts[int(v.split(" ")[0].split("/low")[1])] for v in target["victims"]}
    assert {labels[h] for h in victims_hosts} == {target["domain"]}
    text = to_text(out)
    assert f"Preemption target: {L3} domain {target['domain']}" in text and "(chosen now)" in text


def test_compact_wait_shows_the_time_left() -> None:
    """toposched.io/compact-* on the pod template: the wait's reason and the time left."""
    wl = workload("compact", 3, ns="team-a")
    ps = wl["spec"]["podSets"][0]
    ps["topologyRequest"] = {"preferred": L3}
    ps["template"]["metadata"] = {"annotations": {"toposched.io/compact-level": L3,
                                                  "toposched.io/compact-wait": "1h"}}
    now = dt.datetime(2026, 1, 1, 0, 10, tzinfo=dt.UTC)  # 10 minutes after creation
    out = explain(snap(wl), "team-a", "compact", solver="greedy", now=now)
    assert out["reasons"][0]["reason"] == "WaitingForCompactPlacement"
    assert out["compactWait"] == {"deadline": "2026-01-01T01:00:00+00:00", "remainingSeconds": 3000}
    assert "3000s of the wait left" in to_text(out)


def test_drained_nodes_are_counted_in_health() -> None:
    s = snap(workload("one", 1))
    nodes = generate_nodes(CLUSTER)
    nodes[0]["metadata"]["labels"]["toposched.io/drain"] = "true"
    drained = EngineSnapshot(nodes=nodes, flavors=[FLAVOR], topologies=[TOPOLOGY], workloads=s.objects.workloads,
                             cluster_queues=s.objects.cluster_queues, local_queues=s.objects.local_queues,
                             namespaces=s.objects.namespaces)
    h = explain(drained, "team-a", "one", solver="greedy")["health"]
    assert h["excluded"] == 2 and h["byReason"]["drained for maintenance (toposched.io/drain)"] == 1
