"""`frontier predict` and `frontier calibrate` on small CSVs."""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import pytest

from frontier_operator import cli_perf
from frontier_operator.perf.silicon import SCHEMA_COLUMNS

SILICON = Path(__file__).resolve().parents[3] / "shared" / "data" / "silicon" / "silicon_measurements.csv"


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    cli_perf.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def _slice(tmp_path: Path) -> Path:
    with SILICON.open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["backend"] == "sglang"][::120]
    # A row the model cannot predict: DeepSeek-R1 on a single GB200 does not fit in memory.
    broken = dict(rows[0])
    broken.update(
        model_path="deepseek-ai/DeepSeek-R1",
        system="gb200",
        mode="agg",
        tp_size="1",
        attention_dp_size="1",
        moe_tp_size="1",
        moe_ep_size="1",
        batch_size="4",
    )
    # A model given by Hugging Face id, another by catalog name.
    by_name = dict(rows[1])
    by_name["model_path"] = "Qwen3-32B"
    path = tmp_path / "slice.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(SCHEMA_COLUMNS))
        writer.writeheader()
        writer.writerows([*rows, broken])
    return path


@pytest.mark.skipif(not SILICON.is_file(), reason="shared silicon data not present")
def test_predict_writes_predictions_and_reasons(tmp_path: Path) -> None:
    source = _slice(tmp_path)
    out = tmp_path / "out.csv"
    assert _run(["predict", "--csv", str(source), "-o", str(out)]) == 0
    with out.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == [*SCHEMA_COLUMNS, "pred_ttft_ms", "pred_tpot_ms", "pred_error", "pred_deployment"]
        rows = list(reader)
    assert len(rows) >= 8
    broken = rows[-1]
    assert broken["pred_ttft_ms"] == broken["pred_tpot_ms"] == ""
    assert "weights need" in broken["pred_error"]
    predicted = [row for row in rows[:-1] if not row["pred_error"]]
    assert len(predicted) >= len(rows) - 3
    for row in predicted:
        assert float(row["pred_ttft_ms"]) > 0 and float(row["pred_tpot_ms"]) > 0
        assert row["id"]  # input columns pass through


def test_predict_rejects_bad_input_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["predict", "--csv", str(tmp_path / "missing.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n", encoding="utf-8")
    assert _run(["predict", "--csv", str(bad)]) == 2
    assert "missing column" in capsys.readouterr().err


def test_calibrate_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["calibrate", "--data", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "c.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err
    only_vllm = tmp_path / "vllm.csv"
    with only_vllm.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(SCHEMA_COLUMNS))
        writer.writeheader()
        writer.writerow(dict.fromkeys(SCHEMA_COLUMNS, "") | {"backend": "vllm", "model_path": "x", "mode": "agg"})
    assert _run(["calibrate", "--data", str(only_vllm), "--out", str(tmp_path / "c.yaml")]) == 2
    assert "no usable sglang rows" in capsys.readouterr().err


@pytest.mark.skipif(not SILICON.is_file(), reason="shared silicon data not present")
def test_calibrate_writes_a_loadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SILICON.open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["model_path"] == "Qwen/Qwen3-235B-A22B-FP8"]
    data = tmp_path / "qwen.csv"
    with data.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(SCHEMA_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "calibration.yaml"
    assert _run(["calibrate", "--data", str(data), "--out", str(out), "--max-iterations", "3", "--starts", "1"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "frontier calibrate" in text and "sm90" in text
    # And how well the rows pin each coefficient: 24 aggregated rows of one model say nothing about P/D.
    report = capsys.readouterr().out
    assert "sm90: coefficient, fitted value" in report
    assert re.search(r"pd_handoff_ms +[0-9.]+ +×/÷ [0-9.]+ prior only", report), report
    predicted = tmp_path / "pred.csv"
    assert _run(["predict", "--csv", str(data), "--calibration", str(out), "-o", str(predicted)]) == 0
