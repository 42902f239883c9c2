"""PodSet groups across the pod sets of a JobSet / PyTorchJob: Kueue's
``ValidatePodSetGroupingTopology`` rules and messages (a leader + workers group is admitted)."""

from __future__ import annotations

from typing import Any

from admission.validation import validate_job

GROUP, REQUIRED, PREFERRED = ("kueue.x-k8s.io/podset-group-name", "kueue.x-k8s.io/podset-required-topology",
                              "kueue.x-k8s.io/podset-preferred-topology")
RACK = "cloud.com/rack"


def jobset(*rows: tuple[str, int, dict[str, str]]) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
            "spec": {"replicatedJobs": [
                {"name": name, "replicas": 1, "template": {"spec": {"parallelism": pods, "completions": pods,
                 "template": {"metadata": {"annotations": ann}, "spec": {"containers": []}}}}}
                for name, pods, ann in rows]}}


def messages(job: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate_job(job).errors]


def path(i: int) -> str:
    return f"spec.replicatedJobs[{i}].template.spec.template.metadata.annotations"


def test_leader_and_workers_group_is_admitted() -> None:
    ann = {GROUP: "g", REQUIRED: RACK}
    assert messages(jobset(("leader", 1, ann), ("workers", 4, ann))) == []


def test_group_of_one_pod_set() -> None:
    (msg,) = messages(jobset(("leader", 1, {GROUP: "g", REQUIRED: RACK}), ("workers", 4, {REQUIRED: RACK})))
    assert msg.startswith(f'{path(0)}[{GROUP}]: Invalid value: "g": can only define groups of exactly 2 pod sets, '
                          "got: 1 pod set(s)")


def test_group_without_a_single_pod_set() -> None:
    ann = {GROUP: "g", REQUIRED: RACK}
    msgs = messages(jobset(("a", 2, ann), ("b", 3, ann)))
    assert len(msgs) == 2 and all(
        "can only define groups where at least one pod set has only 1 replica, got: 2 replica(s) and 3 replica(s) "
        "in the group" in m for m in msgs)


def test_group_levels_must_agree() -> None:
    msgs = messages(jobset(("leader", 1, {GROUP: "g", REQUIRED: RACK}), ("workers", 4, {GROUP: "g", PREFERRED: RACK})))
    assert msgs[0].startswith(
        f"{path(0)}: Invalid value: must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with "
        f"'{path(1)}' in group 'g'")
    assert msgs[1].startswith(f"{path(1)}: Invalid value: ")
