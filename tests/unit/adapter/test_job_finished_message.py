"""A finished batch Job's Workload carries the Job condition's own message, as Kueue's
``Job.Finished`` (pkg/controller/jobs/job/job_controller.go at v0.17.0 and v0.19.2) returns
``c.Message``; the MultiKueue conformance scenario compares it with a Kueue worker's."""

from __future__ import annotations

import pytest

from scheduler.adapter.kinds.batch import finish_state


def job(kind: str, message: str) -> dict[str, object]:
    return {"status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True", "message": "early"},
                                      {"type": kind, "status": "True", "message": message}]}}


@pytest.mark.parametrize(("kind", "reason", "message"), [
    ("Complete", "Succeeded", "Reached expected number of succeeded pods"),
    ("Failed", "Failed", "Job has reached the specified backoff limit"),
])
def test_the_job_conditions_message_is_the_workloads(kind: str, reason: str, message: str) -> None:
    state = finish_state(job(kind, message))
    assert (state.finished, state.reason, state.message) == (True, reason, message)


def test_a_running_job_is_not_finished() -> None:
    assert not finish_state({"status": {"conditions": [{"type": "Suspended", "status": "False"}]}}).finished
