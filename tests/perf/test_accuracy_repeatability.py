"""bench/accuracy.py's views of the file itself: how far repeated measurements of one setup disagree, and what one
measured load of a deployment makes of the model's predictions at the others."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.silicon import parse_row
from perf_support import silicon_row

BENCH = Path(__file__).resolve().parents[2] / "bench" / "accuracy.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("accuracy_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def _row(model: str, ttft_ms: str, tpot_ms: str, batch: str = "16", isl: str = "1024") -> dict[str, str]:
    return silicon_row(
        backend="sglang",
        model_path=model,
        system="h200_sxm",
        precision="fp8",
        mode="agg",
        isl=isl,
        osl="1024",
        batch_size=batch,
        tp_size="8",
        silicon_ttft_ms=ttft_ms,
        silicon_tpot_ms=tpot_ms,
    )


def test_repeats_are_replayed_by_the_other_runs_and_twins_are_not_repeats() -> None:
    accuracy = _bench()

    def outcome(row: dict[str, str], ttft_ape: float, tpot_ape: float) -> object:
        case = parse_row(row)
        row_record = accuracy.Row(0, row["model_path"], "h200_sxm", "agg", case, None)
        return accuracy.Outcome(row_record, ttft_ape, tpot_ape, None)

    outcomes = [
        # One setup run twice (200 and 250 ms), and the first run filed again under DeepSeek-V3's name.
        outcome(_row("deepseek-ai/DeepSeek-R1", "200", "10"), 0.1, 0.05),
        outcome(_row("deepseek-ai/DeepSeek-V3", "200.0000001", "10"), 0.1, 0.05),
        outcome(_row("deepseek-ai/DeepSeek-R1", "250", "12.5"), 0.3, 0.15),
        # Measured once: not a repeat.
        outcome(_row("deepseek-ai/DeepSeek-R1", "400", "20", batch="64"), 0.9, 0.9),
    ]
    view = accuracy.repeatability(outcomes)
    assert view["setups_measured_more_than_once"] == 1
    assert view["rows"] == 3
    # 200 replayed by 250 (+25 %, twice), 250 replayed by 200 (−20 %): median 25 %; the model's median is 10 %.
    assert view["replay_median_ttft_ape"] == pytest.approx(0.25)
    assert view["replay_median_tpot_ape"] == pytest.approx(0.25)
    assert view["model_median_ttft_ape"] == pytest.approx(0.1)
    assert view["model_median_tpot_ape"] == pytest.approx(0.05)


class _SplitModel:
    """Predicts a fixed TTFT and TPOT whatever the row: a model that moves time between the first token and
    the others."""

    def __init__(self, ttft_s: float, tpot_s: float) -> None:
        self.ttft_s, self.tpot_s = ttft_s, tpot_s

    def predict_at_concurrency(self, *_: object, **__: object) -> object:
        return self


def test_end_to_end_error_tells_a_wrong_split_from_wrong_work() -> None:
    accuracy = _bench()
    row = _row("deepseek-ai/DeepSeek-R1", "200", "10")
    case = parse_row(row)
    steps = case.workload.output_tokens.mean - 1
    record = accuracy.Row(0, row["model_path"], "h200_sxm", "agg", case, None)
    # The first token 200 ms late and every later one 200/steps ms early: the request ends on time.
    (split,) = accuracy.evaluate(_SplitModel(0.4, (10 - 200 / steps) / 1e3), [record])
    assert split.ttft_ape == pytest.approx(1.0)
    assert split.tpot_ape == pytest.approx(20 / steps)
    assert split.e2e_ape == pytest.approx(0.0, abs=1e-9)
    # Which way each metric leans: the first token twice as long, the others short.
    assert split.ttft_log_error == pytest.approx(math.log(2.0))
    assert split.tpot_log_error == pytest.approx(math.log(1 - 20 / steps))
    # Every token 10 % slow: the request is 10 % late.
    (slow,) = accuracy.evaluate(_SplitModel(0.22, 0.011), [record])
    assert slow.e2e_ape == pytest.approx(0.1)
    summary = accuracy.summarise([split, slow])
    assert summary["median_e2e_ape"] == pytest.approx(0.05)
    assert summary["median_tpot_log_error"] == pytest.approx((math.log(1 - 20 / steps) + math.log(1.1)) / 2)


def test_one_measured_load_corrects_the_model_at_the_nearest_other_load() -> None:
    accuracy = _bench()

    def outcome(ttft_ms: str, batch: str, ttft_log_error: float, isl: str = "1024") -> object:
        row = _row("deepseek-ai/DeepSeek-R1", ttft_ms, "10", batch=batch, isl=isl)
        record = accuracy.Row(0, row["model_path"], "h200_sxm", "agg", parse_row(row), None)
        return accuracy.Outcome(record, abs(math.exp(ttft_log_error) - 1), None, None, None, ttft_log_error, None)

    shipped = PerformanceModel.default().calibration
    view = accuracy.after_one_measured_load(
        [
            # One deployment measured at 4, 8 and 16 clients; the model slow by e^0.1, e^0.3, e^0.3.
            outcome("100", "4", 0.1),
            outcome("200", "8", 0.3),
            outcome("400", "16", 0.3),
            # Another deployment (longer prompts), measured at one load only: nothing to correct it with.
            outcome("900", "4", 0.5, isl="8192"),
        ],
        shipped,
    )
    ttft = view["ttft"]
    assert ttft["rows"] == 3
    assert ttft["model_median_ape"] == pytest.approx(math.exp(0.3) - 1)
    # 4 clients corrected by 8's ratio (e^-0.2 off), 8 by the mean of 4's and 16's (e^0.1 off), 16 by 8's (exact).
    assert ttft["corrected_median_ape"] == pytest.approx(math.exp(0.1) - 1)
    assert ttft["corrected_p90_ape"] == pytest.approx(0.2 * (math.exp(0.1) - 1) + 0.8 * (1 - math.exp(-0.2)))
    # Replaying the nearest measurement instead: 200 for 100 (+100 %), √(100·400) for 200 (exact), 200 for 400.
    assert ttft["replay_median_ape"] == pytest.approx(0.5)
    # What the corrected predictions still under-predict, log(measured / corrected): 0.2, -0.1 and 0; against
    # what the planner's margin keeps at full confidence of the family's cold held-out 90th percentile.
    (family,) = ttft["per_family"].items()
    cold = shipped.family("sm90").ttft_underprediction_q90
    assert family == (
        "sm90",
        {
            "rows": 3,
            "corrected_underprediction_q90": pytest.approx(0.16),
            "margin_keeps_at_full_confidence": pytest.approx(0.25 * cold),
        },
    )
    # No row has a signed TPOT error: nothing to report, rather than a zero.
    assert view["tpot"] == {
        "rows": 0,
        "model_median_ape": None,
        "corrected_median_ape": None,
        "corrected_p90_ape": None,
        "replay_median_ape": None,
        "per_family": {},
    }
