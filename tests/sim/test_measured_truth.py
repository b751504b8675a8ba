"""The measured truth answers from its table, interpolates in concurrency, and refuses everything else."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from frontier_operator.perf.types import LengthDistribution, Role, RoleDeployment, ServingConfig, Speculative, Workload
from frontier_operator.perf.types import SpeculativeAlgorithm as Algorithm
from frontier_operator.sim.measured import MeasuredTable, MeasuredTruth, precision_class
from frontier_operator.sim.tables import write_rows
from frontier_operator.sim.timing import PrefillMode, Unavailable
from perf_support import silicon_row

# (concurrency, TTFT ms, TPOT ms) of an invented Qwen3-32B TP2 aggregated run, 2048/256 tokens.
TP2 = ((4, 200.0, 10.0), (16, 300.0, 14.0), (16, 320.0, 15.0), (16, 310.0, 13.0), (64, 900.0, 30.0))


def _row(**values: object) -> dict[str, str]:
    qwen_h100 = {"backend": "sglang", "model_path": "Qwen/Qwen3-32B", "system": "h100_sxm", "precision": "bf16"}
    return silicon_row(**(qwen_h100 | {key: str(value) for key, value in values.items()}))


def _rows() -> list[dict[str, str]]:
    rows = [
        _row(
            id=f"tp2-c{c}-{i}",
            mode="agg",
            isl=2048,
            osl=256,
            batch_size=c,
            tp_size=2,
            silicon_ttft_ms=t,
            silicon_tpot_ms=p,
        )
        for i, (c, t, p) in enumerate(TP2)
    ]
    rows.append(
        _row(
            id="tp2-short",
            mode="agg",
            isl=1024,
            osl=128,
            batch_size=16,
            tp_size=2,
            silicon_ttft_ms=150,
            silicon_tpot_ms=12,
        )
    )
    rows.append(
        _row(
            id="pd",
            mode="disagg",
            isl=2048,
            osl=256,
            precision="fp8",
            prefill_tp_size=1,
            prefill_num_workers=1,
            decode_tp_size=2,
            decode_num_workers=2,
            decode_batch_size=16,
            silicon_ttft_ms=400,
            silicon_tpot_ms=11,
        )
    )
    rows.append(
        _row(
            id="vllm",
            backend="vllm",
            mode="agg",
            isl=2048,
            osl=256,
            batch_size=4,
            tp_size=4,
            silicon_ttft_ms=1,
            silicon_tpot_ms=1,
        )
    )
    return rows


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> MeasuredTable:
    path = tmp_path_factory.mktemp("table") / "measured.csv"
    write_rows(_rows(), path)
    return MeasuredTable.from_csv(path)


def _workload(prompt: float = 2048, output: float = 256) -> Workload:
    return Workload(0.0, LengthDistribution(prompt, 0.0, int(prompt)), LengthDistribution(output, 0.0, int(output)))


def _config(table: MeasuredTable, *, disaggregated: bool = False) -> ServingConfig:
    key = next(k for k in table.configs if k.disaggregated == disaggregated)
    return table.examples[key]


def test_only_the_chosen_backend_is_read(table: MeasuredTable) -> None:
    assert {k.describe() for k in table.configs} == {"H100 bf16 TP2", "H100 fp8 P/D 1×[TP1] + 2×[TP2]"}


def test_measured_concurrencies_reproduce_the_rows_and_repeats_merge_by_median(table: MeasuredTable) -> None:
    truth = MeasuredTruth(table)
    config = _config(table)
    for concurrency, ttft, tpot in ((4, 200.0, 10.0), (16, 310.0, 14.0), (64, 900.0, 30.0)):
        answer = truth.at_concurrency(config, _workload(), concurrency)
        assert answer.ttft_s * 1e3 == pytest.approx(ttft)
        assert answer.tpot_s * 1e3 == pytest.approx(tpot)
        assert not answer.extrapolated
    point = table.curves[table.configs[0]][(2048, 256)].points[1]
    assert point.runs == 3 and point.spread > 0


def test_interpolation_is_linear_in_log_concurrency(table: MeasuredTable) -> None:
    truth = MeasuredTruth(table)
    answer = truth.at_concurrency(_config(table), _workload(), 8)  # halfway between 4 and 16 on a log axis
    assert answer.tpot_s * 1e3 == pytest.approx((10.0 + 14.0) / 2)
    assert answer.ttft_s * 1e3 == pytest.approx((200.0 + 310.0) / 2)


def test_extrapolation_is_clamped_and_flagged(table: MeasuredTable) -> None:
    truth = MeasuredTruth(table)
    high = truth.at_concurrency(_config(table), _workload(), 256)
    low = truth.at_concurrency(_config(table), _workload(), 1)
    assert high.extrapolated and high.tpot_s * 1e3 == pytest.approx(30.0)
    assert low.extrapolated and low.tpot_s * 1e3 == pytest.approx(10.0)


def test_replicas_split_the_concurrency(table: MeasuredTable) -> None:
    truth = MeasuredTruth(table)
    config = _config(table)
    three = replace(config, roles=(replace(config.roles[0], replicas=4),))
    answer = truth.at_concurrency(three, _workload(), 64)
    assert answer.units == 4 and answer.unit_concurrency == 16
    assert answer.tpot_s * 1e3 == pytest.approx(14.0)


def test_lengths_match_the_nearest_measured_pair_and_say_so(table: MeasuredTable) -> None:
    truth = MeasuredTruth(table)
    near_short = truth.at_concurrency(_config(table), _workload(900, 150), 16)
    assert near_short.lengths.measured == (1024, 128)
    assert not near_short.lengths.exact
    assert "1024/128" in near_short.lengths.describe()
    assert truth.at_concurrency(_config(table), _workload(), 16).lengths.exact


def test_pd_fleets_must_be_whole_measured_units(table: MeasuredTable) -> None:
    truth = MeasuredTruth(table)
    pd = _config(table, disaggregated=True)
    doubled = replace(pd, roles=tuple(replace(d, replicas=d.replicas * 2) for d in pd.roles))
    assert truth.at_concurrency(doubled, _workload(), 32).units == 2
    uneven = replace(pd, roles=tuple(replace(d, replicas=1) for d in pd.roles))
    with pytest.raises(Unavailable, match="P:D 1:1"):
        truth.at_concurrency(uneven, _workload(), 16)


def test_configurations_outside_the_table_are_unavailable(table: MeasuredTable) -> None:
    truth = MeasuredTruth(table)
    config = _config(table)
    worker = config.roles[0].worker
    other_tp = replace(config, roles=(replace(config.roles[0], worker=replace(worker, tp=4)),))
    other_gpu = replace(config, roles=(replace(config.roles[0], worker=replace(worker, gpu="H200")),))
    speculative = replace(
        config,
        roles=(replace(config.roles[0], worker=replace(worker, speculative=Speculative(Algorithm.EAGLE3, 3, 1, 4))),),
    )
    other_model = replace(config, model="DeepSeek-R1")
    for unknown, reason in (
        (other_tp, "layout"),
        (other_gpu, "H200"),
        (speculative, "speculative"),
        (other_model, "DeepSeek-R1"),
    ):
        with pytest.raises(Unavailable, match=reason):
            truth.timing(unknown, Role.UNIFIED, _workload())
        assert not table.answers(unknown)
    assert table.answers(config)


def test_table_timing_is_load_indexed(table: MeasuredTable) -> None:
    timing = MeasuredTruth(table).timing(_config(table), Role.UNIFIED, _workload())
    assert timing.prefill_mode is PrefillMode.LOAD_INDEXED
    assert timing.decode_step_s(1, 0, 16.0) == pytest.approx(0.014)
    assert timing.decode_step_s(64, 0, 4.0) == pytest.approx(0.010)  # indexed by load, not by batch
    assert timing.prefill_s(2048, 0, 16.0) == pytest.approx(0.310)
    # A prompt half served from cache computes half the tokens: half the time to first token.
    assert timing.prefill_s(1024, 1024, 16.0) == pytest.approx(0.155)
    assert timing.kv_capacity_tokens is None and timing.transfer_s(2048) == 0.0


def test_precision_classes_group_fp8_variants() -> None:
    assert precision_class("fp8_block") == precision_class("fp8") == "fp8"
    assert precision_class("nvfp4") == "fp4"
    assert precision_class("bf16") == "bf16"


def test_rows_without_measurements_are_skipped(tmp_path: Path) -> None:
    rows = [*_rows(), _row(id="empty", mode="agg", isl=2048, osl=256, batch_size=8, tp_size=2)]
    path = tmp_path / "t.csv"
    write_rows(rows, path)
    table = MeasuredTable.from_csv(path)
    assert table.skipped_rows == 1
    assert not math.isnan(table.curves[table.configs[0]][(2048, 256)].points[0].ttft_s)


def test_role_of_a_pd_unit_is_a_share_of_it(table: MeasuredTable) -> None:
    truth = MeasuredTruth(table)
    pd = _config(table, disaggregated=True)
    assert truth.timing(pd, Role.PREFILL, _workload()).unit_share == 1.0
    assert truth.timing(pd, Role.DECODE, _workload()).unit_share == 0.5
    pd_like = ServingConfig(model=pd.model, roles=(RoleDeployment(Role.UNIFIED, pd.roles[0].worker, 1),))
    assert not table.answers(pd_like)
