"""Simulation on a table of real measurements: the search is limited to the table, lengths are matched."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from frontier_operator.api import parse_target
from frontier_operator.api.spec import TuningMode
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.types import Role
from frontier_operator.planner.from_spec import plan_request_from_spec
from frontier_operator.sim.closed_loop import prepare, simulate
from frontier_operator.sim.report import result_to_dict
from frontier_operator.sim.table_search import (
    TableLimitedPredictor,
    TableMismatch,
    limit_request_to_table,
    snap_to_table,
)
from frontier_operator.sim.tables import preset_table
from frontier_operator.tuning.structure import with_replicas
from simulate_support import QWEN_TABLE_TARGET, llama_target

TABLE = "qwen3-32b-h100"


def qwen_target(input_mean: int = 2048, output_mean: int = 512) -> object:
    document = yaml.safe_load(QWEN_TABLE_TARGET.read_text())
    document["spec"]["workload"]["inputTokens"] = {"mean": input_mean, "max": 4096}
    document["spec"]["workload"]["outputTokens"] = {"mean": output_mean, "max": 1024}
    return parse_target(document)


def test_a_table_run_stays_inside_the_table_and_reports_the_matched_lengths() -> None:
    target = qwen_target(input_mean=1800, output_mean=450)
    result = simulate(target, truth_spec=TABLE, hours=1.0, seed=1, mode=TuningMode.AUTO)  # type: ignore[arg-type]
    table = preset_table(TABLE)
    assert result.length_match is not None
    assert result.length_match.measured == (2048, 512)
    assert result.workload.input_tokens.mean == pytest.approx(2048, rel=0.01)
    assert table.answers(result.plan.chosen.config)
    assert table.answers(result.final_config)
    data = result_to_dict(result)
    assert data["summary"]["matched_lengths"]["measured"] == [2048, 512]
    assert "matched to the measured 2048/512" in data["summary"]["matched_lengths"]["text"]
    assert any("limited to the measured GPUs" in note for note in data["search_limits"])
    # The oracle is computed from the table itself: its fleet is one the table answers.
    assert result.oracle is not None and result.oracle.config is not None
    assert table.answers(result.oracle.config)
    assert result.summary.cost_ratio_vs_oracle is not None


def test_the_planner_only_sees_measured_layouts() -> None:
    table = preset_table(TABLE)
    setup = prepare(qwen_target(), truth_spec=TABLE)  # type: ignore[arg-type]
    assert all(p.gpu.name == "H100" for p in setup.request.pools)
    assert {f.name for f in setup.request.search.quantizations} == {"bf16"}
    predictor = setup.predictor
    assert isinstance(predictor, TableLimitedPredictor)
    chosen = setup.plan.chosen.config
    worker = chosen.roles[0].worker
    pool = setup.request.pools[0]
    unmeasured = replace(chosen, roles=(replace(chosen.roles[0], worker=replace(worker, pp=2)),))
    with pytest.raises(UnpredictableConfig):
        predictor.predict(setup.request.arch, pool.gpu, unmeasured, setup.request.workload, 1.0)
    for candidate in [setup.plan.chosen, *(r.candidate for r in setup.plan.runner_ups)]:
        assert table.answers(candidate.config)


def test_a_pd_fleet_snaps_to_whole_measured_units() -> None:
    table = preset_table("deepseek-r1-h200")
    example = next(table.examples[key] for key in table.configs if key.disaggregated and key.layouts[0].ep == 1)
    uneven = with_replicas(with_replicas(example, Role.PREFILL, 1), Role.DECODE, 3)
    assert not table.answers(uneven)
    snapped = snap_to_table(table, uneven)
    assert table.answers(snapped)
    assert (snapped.role(Role.PREFILL).replicas, snapped.role(Role.DECODE).replicas) == (3, 3)  # type: ignore[union-attr]


def test_a_table_of_another_model_is_refused_with_the_reason() -> None:
    request = plan_request_from_spec(llama_target().spec)
    with pytest.raises(TableMismatch, match="measures Qwen3-32B"):
        limit_request_to_table(request, preset_table(TABLE))
