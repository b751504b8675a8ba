"""Sweep objects: rendered as the candidate would serve, unreachable by user traffic, cleaned up by label."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontier_operator.render import RenderRequest, Variant, render_fleet, resolve_layout
from frontier_operator.render.benchmark import (
    LABEL_SWEEP,
    BenchmarkLevel,
    BenchmarkSpec,
    random_lengths,
    render_sweep,
)
from frontier_operator.render.pods import LABEL_ENTRYPOINT
from render_support import golden_cases

SPEC = BenchmarkSpec("abc123", (BenchmarkLevel(8, 200, 120.0), BenchmarkLevel(32, 320, 200.0)), 2048.0, 512.0)


def _pods(objects: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Labels of every pod template the objects would create."""
    labels = []
    for obj in objects:
        spec = obj.get("spec", {})
        if "template" in spec and obj["kind"] != "Job":
            labels.append(spec["template"]["metadata"]["labels"])
        if "leaderWorkerTemplate" in spec:
            template = spec["leaderWorkerTemplate"]
            labels += [
                template["leaderTemplate"]["metadata"]["labels"],
                template["workerTemplate"]["metadata"]["labels"],
            ]
    return labels


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _selector_args(objects: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The router's label-selector discovery selectors (`--selector k=v …`, `--prefill-selector …`)."""
    selectors = []
    for obj in objects:
        if obj["kind"] != "Deployment" or obj["metadata"]["labels"].get("app.kubernetes.io/component") != "router":
            continue
        args = obj["spec"]["template"]["spec"]["containers"][0]["args"]
        current: dict[str, str] | None = None
        for arg in args:
            if arg.endswith("selector"):
                current = {}
                selectors.append(current)
            elif current is not None and "=" in arg and not arg.startswith("--"):
                key, value = arg.split("=", 1)
                current[key] = value
            elif arg.startswith("--"):
                current = None
    return selectors


CASES = golden_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sweep_pods_get_no_user_traffic(case: Any) -> None:
    """The target's Service and the serving router's discovery never select a sweep pod — also when the sweep
    deploys the very configuration that serves."""
    request = case.request()
    serving = render_fleet(request)
    sweep = render_sweep(request, SPEC)
    service = next(
        o for o in serving if o["kind"] == "Service" and o["metadata"]["name"] == case.request().target.metadata["name"]
    )
    sweep_pods = _pods(sweep)
    assert sweep_pods
    for labels in sweep_pods:
        assert LABEL_ENTRYPOINT not in labels
        assert labels["frontier.dev/variant"] == Variant.SWEEP.value
        assert not _selects(service["spec"]["selector"], labels)
        for selector in _selector_args(serving):
            assert not _selects(selector, labels)
    # The serving fleet's own entry pods still match (the fix removed nothing from users' traffic).
    assert any(_selects(service["spec"]["selector"], labels) for labels in _pods(serving))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sweep_renders_the_serving_engines_under_a_revision_of_its_own(case: Any) -> None:
    request = case.request()
    stable = resolve_layout(request)
    sweep = resolve_layout(replace(request, variant=Variant.SWEEP))
    assert sweep.revision != stable.revision
    for a, b in zip(stable.roles, sweep.roles, strict=True):
        assert a.engine.to_argv() == b.engine.to_argv()
    sweep_objects = render_sweep(request, SPEC)
    serving_names = {(o["kind"], o["metadata"]["name"]) for o in render_fleet(request)}
    assert not serving_names & {(o["kind"], o["metadata"]["name"]) for o in sweep_objects}
    kinds = {o["kind"] for o in sweep_objects}
    assert {"Service", "Job"} <= kinds
    assert not kinds & {"PodDisruptionBudget", "PodMonitor"}
    for obj in sweep_objects:
        assert obj["metadata"]["labels"][LABEL_SWEEP] == SPEC.sweep_id


def test_the_benchmark_job_runs_levels_in_order_and_prints_results() -> None:
    request = golden_cases()[0].request()
    job = next(o for o in render_sweep(request, SPEC) if o["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["bench-c8", "bench-c32"]
    assert pod["containers"][0]["command"][0] == "cat"
    assert pod["automountServiceAccountToken"] is False
    assert pod["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 0
    for container in [*pod["initContainers"], *pod["containers"]]:
        resources = container["resources"]
        assert not any("gpu" in key for part in resources.values() for key in part)


@given(
    mean=st.floats(min_value=16, max_value=100_000),
    cv=st.floats(min_value=0.0, max_value=0.5),
)
def test_random_lengths_keep_the_targets_mean_and_spread(mean: float, cv: float) -> None:
    length, ratio = random_lengths(mean, cv)
    assert 0.0 <= ratio <= 1.0
    low = length * ratio
    assert (low + length) / 2 == pytest.approx(mean, rel=0.01, abs=1)
    drawn_cv = (length - low) / math.sqrt(12) / ((low + length) / 2)
    assert drawn_cv == pytest.approx(cv, rel=0.02, abs=0.002)


@given(mean=st.floats(min_value=100, max_value=10_000), cv=st.floats(min_value=0.0, max_value=1.0))
def test_random_lengths_respect_the_hard_maximum(mean: float, cv: float) -> None:
    maximum = round(mean * 1.1)
    length, ratio = random_lengths(mean, cv, maximum)
    assert length <= maximum
    assert 0.0 <= ratio <= 1.0
    assert length * (1 + ratio) / 2 == pytest.approx(mean, rel=0.01, abs=1)


def test_sweep_request_is_forced_to_the_sweep_variant() -> None:
    request = golden_cases()[0].request()
    objects = render_sweep(RenderRequest(request.target, request.config, request.pool_name), SPEC)
    assert all(labels["frontier.dev/variant"] == "sweep" for labels in _pods(objects))
