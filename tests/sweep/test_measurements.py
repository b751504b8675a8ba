"""Measured points: from the benchmark's JSON, into a compact durable document, into the predictor, out as CSV."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from frontier_operator.api.sweep import MAX_POINTS as MAX_STATUS_POINTS
from frontier_operator.cli import main as frontier
from frontier_operator.perf.silicon import SCHEMA_COLUMNS, parse_row, read_rows
from frontier_operator.perf.types import ServingConfig
from frontier_operator.sim.sweep import twin_measure
from frontier_operator.sweep.choose import plan_sweep
from frontier_operator.sweep.loop import search_candidates
from frontier_operator.sweep.predictor import SweepPredictor
from frontier_operator.sweep.results import (
    BenchmarkResultError,
    comparison_rows,
    parse_benchmark_log,
    parse_benchmark_result,
)
from frontier_operator.sweep.status import status_points
from frontier_operator.sweep.store import (
    CONFIGMAP_KEY,
    MAX_STORED_POINTS,
    decode_points,
    encode_points,
    merge_points,
)
from frontier_operator.sweep.types import Latency, SweepMeasurement
from frontier_operator.sweep.units import measured_unit, unit_key, unit_load
from sweep_support import table_setup


@cache
def measured() -> tuple[SweepMeasurement, ...]:
    setup = table_setup()
    sweep = plan_sweep(
        setup.plan, search_candidates(setup.request, setup.predictor), setup.request, setup.predictor, 200.0
    )
    measure = twin_measure(setup.target, setup.truth, setup.request.workload)
    points = []
    keys = list(dict.fromkeys(p.key for p in sweep.points))
    for key in keys:
        points += measure([p for p in sweep.points if p.key == key])
    return tuple(points)


def test_the_twins_answers_parse_into_measured_points() -> None:
    points = measured()
    assert points
    for m in points:
        assert m.completed > 0 and m.duration_s > 0 and m.gpu_minutes > 0
        assert 0 < m.ttft.p50 <= m.ttft.p90 <= m.ttft.p99
        assert 0 < m.tpot.p50 <= m.tpot.p99
        assert m.output_tokens_per_s > 0
        assert m.predicted.tpot_p50_s > 0


def test_result_lines_are_picked_out_of_a_log() -> None:
    line = json.dumps({"max_concurrency": 8, "completed": 3, "median_ttft_ms": 1.0})
    log = "\n".join(["Namespace(backend='sglang')", line, "{not json", '{"other": 1}', "done"])
    assert parse_benchmark_log(log) == [json.loads(line)]


def test_a_result_without_what_a_point_needs_is_refused() -> None:
    setup = table_setup()
    sweep = plan_sweep(
        setup.plan, search_candidates(setup.request, setup.predictor), setup.request, setup.predictor, 200.0
    )
    point = sweep.points[0]
    with pytest.raises(BenchmarkResultError):
        parse_benchmark_result({"max_concurrency": point.concurrency}, point)
    good = {
        "max_concurrency": point.concurrency,
        "completed": 0,
        "duration": 1.0,
        "median_ttft_ms": 1.0,
        "median_tpot_ms": 1.0,
    }
    with pytest.raises(BenchmarkResultError, match="no request"):
        parse_benchmark_result(good, point)
    with pytest.raises(BenchmarkResultError, match="concurrency"):
        parse_benchmark_result({**good, "completed": 5, "max_concurrency": point.concurrency + 1}, point)


def test_the_store_round_trips_and_stays_small() -> None:
    points = list(measured())
    assert decode_points(encode_points(points)) == decode_points(encode_points(decode_points(encode_points(points))))
    restored = decode_points(encode_points(points))
    for a, b in zip(points, restored, strict=True):
        assert (a.key, a.concurrency, a.layout) == (b.key, b.concurrency, b.layout)
        assert b.tpot.p50 == pytest.approx(a.tpot.p50, rel=1e-3)
        assert b.predicted.tpot_p50_s == pytest.approx(a.predicted.tpot_p50_s, rel=1e-3)
    # Worst case: the most points kept, with the longest keys and descriptions a configuration can have.
    long = replace(points[0], key="k" * 400, group="g" * 200, worker_key="w" * 200, description="d" * 256)
    worst = encode_points([replace(long, concurrency=i + 1) for i in range(MAX_STORED_POINTS * 2)])
    size = len(worst.encode())
    assert len(decode_points(worst)) == MAX_STORED_POINTS
    assert size < 128 * 1024, size  # a ConfigMap holds 1 MiB
    print(f"worst-case sweep document: {size} bytes for {MAX_STORED_POINTS} points")


def test_a_new_run_replaces_the_old_one_of_the_same_point() -> None:
    points = list(measured())
    newer = replace(points[0], measured_at=123.0)
    merged = merge_points(points, [newer])
    assert len(merged) == len(points)
    assert merged[-1] is newer


def test_unreadable_documents_are_refused() -> None:
    for text in ("", "[]", '{"version": 99, "points": []}', '{"version": 1}'):
        with pytest.raises(ValueError):
            decode_points(text)


def test_measurements_override_the_model_at_the_measured_load() -> None:
    setup = table_setup()
    points = measured()
    predictor = SweepPredictor(setup.predictor, points)
    for m in points:
        # The corrected TPOT at the measured point is the measurement (the ratio is taken there).
        factor = math.exp(predictor.log_factor(_unit(m), "tpot", float(m.concurrency)))
        predicted = math.sqrt(m.predicted.tpot_p50_s * m.predicted.tpot_p90_s)
        observed = math.sqrt(m.tpot.p50 * m.tpot.p90)
        assert predicted * factor == pytest.approx(observed, rel=0.05)
    chosen = setup.plan.chosen
    raw = setup.predictor.predict(setup.request.arch, chosen.pool.gpu, chosen.config, setup.request.workload, 1.69)
    assert (
        SweepPredictor(setup.predictor, ()).predict(
            setup.request.arch, chosen.pool.gpu, chosen.config, setup.request.workload, 1.69
        )
        == raw
    )
    assert unit_load(chosen.config, raw) > 0


def test_far_from_any_measurement_only_the_shared_part_remains() -> None:
    m = measured()[0]
    ratio = 0.7
    fake = replace(m, tpot=Latency(1, m.predicted.tpot_p50_s * ratio, m.predicted.tpot_p90_s * ratio, 1))
    predictor = SweepPredictor(table_setup().predictor, (fake,), reach=2.0, fade_doublings=1.0)
    unit = _unit(m)
    assert predictor.log_factor(unit, "tpot", m.concurrency) == pytest.approx(math.log(ratio))
    assert predictor.log_factor(unit, "tpot", m.concurrency * 64) == pytest.approx(0.5 * math.log(ratio))


def _unit(m: SweepMeasurement) -> ServingConfig:
    setup = table_setup()
    for candidate in search_candidates(setup.request, setup.predictor):
        if unit_key(candidate.config) == m.key:
            return measured_unit(candidate.config)
    raise AssertionError(m.key)


def test_comparison_rows_describe_predicted_against_measured() -> None:
    rows = comparison_rows(measured())
    assert len(rows) == len(measured())
    assert all("predicted" in row.describe() and "measured" in row.describe() for row in rows)


def test_export_to_silicon_csv_and_calibrate_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = tmp_path / "configmap.yaml"
    stored = encode_points(list(measured()))
    document.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sweep}\ndata:\n  "
        + CONFIGMAP_KEY
        + ": "
        + json.dumps(stored)
    )
    out = tmp_path / "sweep.csv"
    assert frontier(["sweep", "export", str(document), "-o", str(out)]) == 0
    rows = read_rows(out)
    assert len(rows) == len(measured())
    assert list(rows[0])[: len(SCHEMA_COLUMNS)] == list(SCHEMA_COLUMNS)
    for row, m in zip(rows, measured(), strict=True):
        case = parse_row(row)
        assert case.arch.name == m.model
        assert case.concurrency == m.concurrency
        assert case.measured_tpot_ms == pytest.approx(m.tpot.mean * 1e3, rel=1e-3)  # stored to 4 digits
        assert case.config.roles[0].worker.tp == m.layout[0][2]
    calibration = tmp_path / "calibration.yaml"
    code = frontier(
        ["calibrate", "--data", str(out), "--out", str(calibration), "--max-iterations", "2", "--starts", "1"]
    )
    assert code == 0
    assert calibration.read_text().strip()
    capsys.readouterr()


def test_status_points_carry_predicted_against_measured() -> None:
    points = list(measured())
    statuses = status_points(points * 20)
    assert len(statuses) == MAX_STATUS_POINTS
    first = status_points(points)[0]
    assert first.measured_tpot_ms == pytest.approx(points[0].tpot.p50 * 1e3, rel=1e-3)
    assert first.model_dump(by_alias=True)["measuredTpotMs"] == first.measured_tpot_ms
