"""`frontier simulate` as a user runs it: JSON summary, text timeline, invalid input, infeasible targets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from simulate_support import LLAMA_EXAMPLE, llama_document, run_cli

SUMMARY_KEYS = {
    "converged_config",
    "cost_per_mtok",
    "oracle_cost_per_mtok",
    "cost_ratio_vs_oracle",
    "slo_met_fraction",
    "changes",
    "time_to_converge_s",
    "settle_at_s",
}


def test_json_has_one_object_with_a_sane_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli("-f", str(LLAMA_EXAMPLE), "--hours", "1", "--seed", "3", "--mode", "auto", "-o", "json")
    assert code == 0
    data = json.loads(capsys.readouterr().out)  # exactly one JSON document on stdout
    summary = data["summary"]
    assert set(summary) >= SUMMARY_KEYS
    assert summary["cost_per_mtok"] > 0
    assert summary["oracle_cost_per_mtok"] > 0
    assert summary["cost_ratio_vs_oracle"] == pytest.approx(
        summary["cost_per_mtok"] / summary["oracle_cost_per_mtok"], rel=1e-3
    )
    # The oracle is the cheapest fleet that met every SLO among the candidates checked, the plan itself among them
    # (the loop may end under it: an exploration can find a fleet the search never tried, as seed 3's TP2 ×1).
    checks = data["oracle"]["checks"]
    assert data["plan"]["chosen"] in {check["config"] for check in checks}
    cheapest = min((check for check in checks if check["met"]), key=lambda check: check["cost_per_mtok"])
    assert data["oracle"]["config"] == cheapest["config"] == summary["oracle_config"]
    assert 0.0 <= summary["slo_met_fraction"] <= 1.0
    assert summary["slo_windows_counted"] >= 1
    assert summary["changes"] == sum(
        1 for e in data["timeline"] if e["outcome"] == "applied" and e["kind"] not in ("NoAction", "Replan")
    )
    assert data["mode"] == "auto"
    # One tick a minute once the first five-minute window is full.
    assert len(data["timeline"]) == 60 - 4
    assert len(data["windows"]) == 12
    assert data["plan"]["frontier"], "the planner's frontier is part of the result"


def test_text_shows_the_frontier_the_timeline_and_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli("-f", str(LLAMA_EXAMPLE), "--hours", "1", "--seed", "3", "--mode", "auto", "--no-oracle")
    assert code == 0
    out = capsys.readouterr().out
    assert "The planner's frontier" in out
    assert "Chosen: fp8" in out
    assert "Timeline" in out
    assert "  0:30  " in out and "  1:00  " in out  # status lines while it runs
    assert "converged configuration" in out
    assert "SLO met" in out


def test_plot_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "timeline.png"
    code = run_cli(
        "-f", str(LLAMA_EXAMPLE), "--hours", "0.5", "--mode", "auto", "--no-oracle", "-o", "json", "--plot", str(plot)
    )
    assert code == 0
    assert plot.stat().st_size > 10_000
    json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--truth", "nonsense"], "is neither model"),
        (["--traffic", "weekly"], "--traffic 'weekly'"),
        (["--traffic", "missing-trace.csv"], "no such trace file"),
        (["--hours", "0"], "must be positive"),
        (["--truth", "deepseek-r1-h200"], "the table measures DeepSeek-R1, not Llama-3.1-70B-Instruct"),
    ],
)
def test_invalid_input_exits_2_without_a_traceback(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("-f", str(LLAMA_EXAMPLE), *argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_an_invalid_target_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = llama_document()
    document["spec"]["slo"]["tpot"] = {"p50": "fast"}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document))
    assert run_cli("-f", str(path)) == 2
    assert "spec.slo" in capsys.readouterr().err


def test_an_infeasible_target_explains_and_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "impossible.yaml"
    path.write_text(yaml.safe_dump(llama_document(tpot_p50="1ms")))
    assert run_cli("-f", str(path), "--hours", "1") == 3
    captured = capsys.readouterr()
    assert "INFEASIBLE" in captured.out
    assert "nothing to simulate" in captured.err
    assert run_cli("-f", str(path), "-o", "json") == 3
    assert "infeasible" in json.loads(capsys.readouterr().out)
