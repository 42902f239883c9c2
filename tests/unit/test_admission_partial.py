"""The webhook checks kueue.x-k8s.io/job-min-parallelism as Kueue v0.17's job webhook does
(validatePartialAdmissionCreate): an integer between 1 and the pod count - 1."""

from __future__ import annotations

from typing import Any

import pytest

from admission.validation import validate_job

PATH = "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"


def job(minimum: str, pods: int = 6) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "annotations": {"kueue.x-k8s.io/job-min-parallelism": minimum},
                         "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"parallelism": pods, "completions": pods, "template": {"spec": {"containers": [
                {"name": "c", "image": "x"}]}}}}


@pytest.mark.parametrize(("minimum", "message"), [
    ("abc", f'{PATH}: Invalid value: "abc": strconv.Atoi: parsing "abc": invalid syntax'),
    ("6", f"{PATH}: Invalid value: 6: should be between 0 and 5"),
    ("0", f"{PATH}: Invalid value: 0: should be between 0 and 5"),
])
def test_a_bad_min_parallelism_is_denied_with_kueues_message(minimum: str, message: str) -> None:
    (error,) = validate_job(job(minimum)).errors
    assert str(error).startswith(message)


def test_a_min_parallelism_below_the_pod_count_is_allowed() -> None:
    assert validate_job(job("2")).errors == []
