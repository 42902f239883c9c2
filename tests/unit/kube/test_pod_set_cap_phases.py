"""The controller under each release's cap on a Workload's pod sets (issue 41, item 1): a JobSet
of 10 replicated jobs gets its Workload under v0.19 (18 pod sets, ``jobframework.MaxPodSets``)
where under v0.17 it is held with one Event (the CRD's MaxItems=8); a pod group with more roles
than the cap is held with Kueue's pod-controller message as one Event."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.adapter.kinds.jobset import JOBSET
from scheduler.core.config import KUEUE_V017, KUEUE_V019, kueue_defaults
from scheduler.core.kueue_names import LABEL_POD_GROUP_NAME
from scheduler.core.workload import LABEL_QUEUE_NAME
from scheduler.k8s.informer import PODS, WORKLOADS
from scheduler.kube.controller import Controller
from scheduler.kube.jobs import resource_of
from scheduler.kube.settings import ControllerSettings
from tests.unit.kube.test_new_kinds_phases import gated_pod
from tests.unit.kube.test_phases import NS, Harness
from tests.unit.test_jobset_integration import jobset


def _harness(release: str) -> Harness:
    h = Harness()
    h.controller = Controller(h.api, h.cache, ControllerSettings(clock=h.clock, config=kueue_defaults(release)),
                              is_leader=lambda: True, events=h.events)
    return h


def _jobset(replicated_jobs: int) -> dict[str, Any]:
    js = jobset(suspend=True)
    one = js["spec"]["replicatedJobs"][0]
    js["spec"]["replicatedJobs"] = [dict(copy.deepcopy(one), name=f"rj{i}") for i in range(replicated_jobs)]
    js["metadata"]["namespace"] = NS
    return js


@pytest.mark.parametrize(("release", "created"), [(KUEUE_V017, False), (KUEUE_V019, True)])
def test_a_jobset_of_ten_replicated_jobs(release: str, created: bool) -> None:
    h = _harness(release)
    h.api.create(resource_of(JOBSET), _jobset(10), NS)
    h.sync()
    h.controller.ensure_workloads()
    h.sync()
    wls = h.api.objects(WORKLOADS, NS)
    assert (len(wls) == 1 and len(wls[0]["spec"]["podSets"]) == 10) is created
    failed = h.events_of("CreatedWorkloadFailed")
    assert bool(failed) is not created
    if failed:
        assert "spec.podSets: Too many: 10: must have at most 8 items" in failed[0]["message"]


# Kueue's pod controller: errMsgIncorrectGroupRoleCount, "pod group can't include more than 8 roles"
# at v0.17.0, fmt.Sprintf(..., jobframework.MaxPodSets) = 18 at v0.19.2 (pod_controller.go).
@pytest.mark.parametrize(("release", "roles", "held"), [(KUEUE_V017, 9, True), (KUEUE_V019, 9, False),
                                                        (KUEUE_V019, 19, True)])
def test_a_pod_group_with_more_roles_than_the_cap(release: str, roles: int, held: bool) -> None:
    h = _harness(release)
    labels = {LABEL_QUEUE_NAME: "lq", LABEL_POD_GROUP_NAME: "grp"}
    for i in range(roles):
        pod = gated_pod(f"g-{i}", labels, {"kueue.x-k8s.io/pod-group-total-count": str(roles)})
        pod["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] = f"role{i:02d}"  # one role per pod
        h.api.create(PODS, pod, NS)
    h.sync()
    h.controller.ensure_workloads()
    h.sync()
    events = h.events_of("ErrWorkloadCompose")
    assert (h.api.objects(WORKLOADS, NS) == []) is held
    if held:
        cap = 8 if release == KUEUE_V017 else 18
        assert [e["message"] for e in events] == [f"pod group can't include more than {cap} roles"]
