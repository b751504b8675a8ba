"""A Job's state from its status, as the sweep adapters read it (pure)."""

from __future__ import annotations

import pytest

from frontier_operator.adapters.sweep_jobs import JobState, job_state


@pytest.mark.parametrize(
    ("status", "state"),
    [
        (None, JobState.RUNNING),
        ({}, JobState.RUNNING),
        ({"active": 1}, JobState.RUNNING),
        ({"succeeded": 1}, JobState.SUCCEEDED),
        ({"failed": 1}, JobState.FAILED),
        ({"conditions": [{"type": "Complete", "status": "True"}]}, JobState.SUCCEEDED),
        ({"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}, JobState.FAILED),
        ({"conditions": [{"type": "Complete", "status": "False"}], "active": 1}, JobState.RUNNING),
        # A condition decides over counts (a Job that failed after a pod had succeeded is still Failed).
        ({"succeeded": 1, "conditions": [{"type": "Failed", "status": "True"}]}, JobState.FAILED),
    ],
)
def test_job_state(status: dict[str, object] | None, state: JobState) -> None:
    job = {"metadata": {"name": "j"}, "status": status}
    assert job_state(job) is state


def test_a_missing_job_is_missing() -> None:
    assert job_state(None) is JobState.MISSING
