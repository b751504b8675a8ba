"""The whole sweep loop on the twin: plan → points → rendered Jobs answered by the truth → re-plan."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from frontier_operator.api import parse_target
from frontier_operator.api.errors import SpecInvalid
from frontier_operator.api.units import GpuMinutes
from frontier_operator.cli import main as frontier
from frontier_operator.planner.types import Plan
from frontier_operator.sim.sweep import sweep_before_serving, twin_measure
from frontier_operator.sweep.loop import SweepOutcome, run_sweep
from sweep_support import EXAMPLES, TARGETS, table_setup


@pytest.mark.parametrize("budget", [0.0, 30.0, 150.0])
def test_run_sweep_on_a_measured_table(budget: float) -> None:
    setup = table_setup()
    outcome = run_sweep(
        setup.request,
        setup.predictor,
        budget_gpu_minutes=budget,
        measure=twin_measure(setup.target, setup.truth, setup.request.workload),
    )
    assert isinstance(outcome, SweepOutcome)
    assert isinstance(outcome.final, Plan)
    assert outcome.gpu_minutes <= budget + 1e-9
    assert outcome.swept_points == len(outcome.measurements)
    if budget == 0:
        assert outcome.swept_points == 0 and not outcome.rounds
    else:
        assert outcome.swept_points >= 1
        assert outcome.explanation


def test_the_sweep_predictor_replaces_the_setups_and_plans_again() -> None:
    swept = sweep_before_serving(table_setup(), budget_gpu_minutes=60.0)
    assert swept.outcome.swept_points >= 1
    assert swept.setup.plan is swept.outcome.final
    assert swept.setup.predictor is not table_setup().predictor


def test_frontier_simulate_sweep_reports_gpu_minutes_and_points(capsys: pytest.CaptureFixture[str]) -> None:
    code = frontier(
        [
            "simulate",
            "-f",
            str(TARGETS / "qwen3-32b-h100-table.yaml"),
            "--truth",
            "qwen3-32b-h100",
            "--hours",
            "0.5",
            "--sweep",
            "--sweep-budget",
            "30 GPU-min",
            "--no-oracle",
            "-o",
            "json",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    summary = result["summary"]
    assert 0 < summary["sweep_gpu_minutes"] <= 30
    assert summary["swept_points"] >= 1
    assert result["sweep"]["predicted_vs_measured"]


def test_frontier_sweep_plan_explains_and_renders(capsys: pytest.CaptureFixture[str]) -> None:
    example = str(EXAMPLES / "llama-70b-chat.yaml")
    assert frontier(["sweep", "plan", "-f", example, "--budget", "60 GPU-min"]) == 0
    text = capsys.readouterr().out
    assert "GPU-min" in text and "chosen" in text
    assert frontier(["sweep", "plan", "-f", example, "-o", "yaml"]) == 0
    assert "kind: Job" in capsys.readouterr().out
    assert frontier(["sweep", "plan", "-f", example, "--budget", "30"]) == 2


def test_spec_sweep_defaults_and_units() -> None:
    base = (EXAMPLES / "llama-70b-chat.yaml").read_text()
    target = parse_target(_yaml(base))
    assert float(target.spec.sweep.budget) == 30.0 and not target.spec.sweep.on_create
    data = _yaml(base)
    data["spec"]["sweep"] = {"budget": "2 GPU-h", "onCreate": True, "period": "168h", "concurrency": [4, 16, 64]}
    sweep = parse_target(data).spec.sweep
    assert float(sweep.budget) == 120.0 and sweep.on_create and float(sweep.period or 0) == 168 * 3600
    assert sweep.concurrency == [4, 16, 64]
    for bad in ("30", "30 GPU-minutes", "thirty GPU-min", 30):
        data["spec"]["sweep"] = {"budget": bad}
        with pytest.raises(SpecInvalid):
            parse_target(data)
    assert float(GpuMinutes.parse("30GPU-min")) == 30.0


def _yaml(text: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded
