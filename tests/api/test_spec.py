"""The API models: defaults, cross-field rules and the messages users see."""

from typing import Any

import pytest

from frontier_operator.api import SpecInvalid, dump_spec, parse_spec, parse_target
from frontier_operator.api.spec import Objective, TuningMode


def minimal_spec(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "model": {"name": "Llama-3.1-8B-Instruct"},
        "slo": {"tpot": {"p50": "20ms"}},
        "workload": {"requestRate": "10/s", "inputTokens": {"mean": "2k"}, "outputTokens": {"mean": 500}},
        "hardware": {"pools": [{"name": "h100", "gpu": "H100", "maxGpus": 8}]},
    }
    spec.update(overrides)
    return spec


def errors_of(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecInvalid) as caught:
        parse_spec(spec)
    return [str(error) for error in caught.value.errors]


def test_a_minimal_spec_gets_documented_defaults() -> None:
    spec = parse_spec(minimal_spec())
    assert spec.objective is Objective.MINIMIZE_COST
    assert spec.tuning.mode is TuningMode.RECOMMEND
    assert spec.tuning.interval == 60 and spec.tuning.cooldown == 600
    assert spec.search.max_quality_loss == pytest.approx(0.01)
    assert spec.workload.prefix_cache_hit_rate == 0
    assert spec.serving.image == "lmsysorg/sglang:v0.5.23-cu130"
    assert spec.hardware.pools[0].price_per_gpu_hour is None  # the catalog price applies


def test_the_spec_round_trips_in_the_users_own_units() -> None:
    written = minimal_spec(slo={"ttft": {"p99": "1500ms"}, "tpot": {"p50": "20ms"}})
    dumped = dump_spec(parse_spec(written))
    assert dumped["slo"] == {"ttft": {"p99": "1500ms"}, "tpot": {"p50": "20ms"}}
    assert dumped["workload"]["inputTokens"] == {"mean": "2k"}
    assert dumped["workload"]["outputTokens"] == {"mean": 500}
    assert parse_spec(dumped) == parse_spec(written)


def test_slo_objectives_list_every_bound() -> None:
    spec = parse_spec(minimal_spec(slo={"ttft": {"p99": "2s"}, "tpot": {"p50": "20ms", "p90": "30ms"}}))
    assert [(metric, percentile, float(bound)) for metric, percentile, bound in spec.slo.objectives()] == [
        ("ttft", 99, 2.0),
        ("tpot", 50, 0.02),
        ("tpot", 90, 0.03),
    ]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"slo": {"tpot": {"p50": "20 ms"}}}, 'spec.slo.tpot.p50: "20 ms" is not a duration; write 20ms'),
        ({"slo": {}}, "spec.slo: no latency objective; set at least one of ttft, tpot, itl, e2e"),
        ({"slo": {"tpot": {}}}, "spec.slo.tpot: no percentile given; add at least one of p50, p90, p95, p99"),
        (
            {"slo": {"tpot": {"p75": "20ms"}}},
            "spec.slo.tpot.p75: is not a known field; remove it or check its spelling",
        ),
        ({"objective": "cheapest"}, "spec.objective: \"cheapest\" is not allowed; use one of 'minimize-cost'"),
        ({"model": {}}, "spec.model.name: is required"),
        ({"hardware": {"pools": []}}, "spec.hardware.pools: has the wrong length"),
        ({"hardware": {"pools": [{"name": "H100!", "gpu": "H100", "maxGpus": 8}]}}, "spec.hardware.pools[0].name:"),
        ({"hardware": {"pools": [{"name": "a", "gpu": "H100", "maxGpus": 0}]}}, "spec.hardware.pools[0].maxGpus: 0 is"),
        ({"search": {"quantizations": ["fp8", "fp8"]}}, "spec.search: quantizations lists a value twice"),
        ({"tuning": {"interval": "15m"}}, "spec.tuning: cooldown 10m is shorter than interval 15m"),
        ({"tuning": {"mode": "yolo"}}, 'spec.tuning.mode: "yolo" is not allowed'),
        ({"model": {"name": "x", "config": {}}}, "spec.model.config: give exactly one of inline and configMapRef"),
        ({"model": {"name": "x", "checkpoints": {"int3": "a/b"}}}, "spec.model.checkpoints.int3 (key):"),
        ({"serving": {"env": [{"name": "1BAD"}]}}, "spec.serving.env[0].name:"),
        (
            {"workload": {"requestRate": 1e307, "inputTokens": {"mean": "2k"}, "outputTokens": {"mean": 500}}},
            "spec.workload: requestRate 1e+307/s is above 1000000/s; split traffic",
        ),
    ],
)
def test_invalid_specs_name_the_field_and_the_fix(overrides: dict[str, Any], expected: str) -> None:
    messages = errors_of(minimal_spec(**overrides))
    assert any(message.startswith(expected) for message in messages), messages


def test_all_problems_are_reported_at_once() -> None:
    spec = minimal_spec(objective="cheapest", slo={"tpot": {"p50": "fast"}})
    assert len(errors_of(spec)) == 2


@pytest.mark.parametrize(
    "hostile",
    [
        None,
        [],
        "spec",
        42,
        {"model": "x" * 1_000_000},
        {"slo": {"tpot": {"p50": "\u202e20ms"}}},
        {"model": {"name": None}},
    ],
)
def test_hostile_input_is_a_structured_error_never_a_crash(hostile: Any) -> None:
    with pytest.raises(SpecInvalid) as caught:
        parse_spec(hostile if not isinstance(hostile, dict) else minimal_spec(**hostile))
    assert caught.value.errors
    assert all(error.path.startswith("spec") for error in caught.value.errors)


def test_documents_need_the_right_identity() -> None:
    document = {"apiVersion": "frontier.dev/v1", "kind": "FrontierTarget", "spec": minimal_spec()}
    with pytest.raises(SpecInvalid) as caught:
        parse_target(document)
    assert [error.path for error in caught.value.errors] == ["apiVersion", "metadata.name"]
