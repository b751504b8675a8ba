"""Measured tables cut from the shared silicon CSV, and the configurations they answer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from frontier_operator.perf.silicon import read_rows
from frontier_operator.perf.types import LengthDistribution, Role, Workload
from frontier_operator.sim.fleet import FleetSimulation
from frontier_operator.sim.measured import MeasuredTable, MeasuredTruth
from frontier_operator.sim.observe import observe
from frontier_operator.sim.tables import (
    PRESET_CUTS,
    answerable,
    cut_rows,
    default_silicon_csv,
    preset_table,
    table_configurations,
    write_rows,
)

SILICON = default_silicon_csv()
pytestmark = pytest.mark.skipif(not SILICON.exists(), reason=f"{SILICON} is not available")


def test_presets_cut_only_their_rows() -> None:
    rows = read_rows(SILICON)
    for name, cut in PRESET_CUTS.items():
        selected = cut_rows(rows, cut)
        assert selected, name
        assert {r["backend"] for r in selected} == {"sglang"}
        assert {r["model_path"] for r in selected} == {cut.model_path}


def test_written_tables_read_back_the_same(tmp_path: Path) -> None:
    rows = cut_rows(read_rows(SILICON), PRESET_CUTS["deepseek-r1-h200"])
    path = tmp_path / "r1-h200.csv"
    write_rows(rows, path)
    again = MeasuredTable.from_csv(path)
    assert again.configs == preset_table("deepseek-r1-h200").configs
    assert len(read_rows(path)) == len(rows)


def test_configurations_list_what_the_table_answers() -> None:
    table = preset_table("deepseek-r1-h200")
    listed = table_configurations(table)
    assert {c.key.describe() for c in listed} == {
        "H200 fp8 TP8",
        "H200 fp8 P/D 1×[TP8] + 1×[TP8]",
        "H200 fp8 P/D 1×[TP8 EP8] + 1×[TP8 EP8]",
    }
    aggregated = next(c for c in listed if not c.key.disaggregated)
    assert (1024, 1024) in aggregated.lengths and min(aggregated.concurrencies) == 4
    assert "concurrency 4–64" in aggregated.describe()
    bigger = replace(aggregated.example, roles=(replace(aggregated.example.roles[0], replicas=3),))
    wider = replace(
        aggregated.example,
        roles=(replace(aggregated.example.roles[0], worker=replace(aggregated.example.roles[0].worker, tp=4)),),
    )
    assert answerable(table, [aggregated.example, bigger, wider]) == [aggregated.example, bigger]


def test_a_fleet_runs_on_a_measured_table() -> None:
    truth = MeasuredTruth(preset_table("deepseek-r1-h200"))
    config = next(c.example for c in table_configurations(truth.table) if not c.key.disaggregated)
    config = replace(config, roles=(replace(config.roles[0], replicas=2),))
    load = Workload(0.3, LengthDistribution(900, 0.05, 1024), LengthDistribution(900, 0.05, 1024))
    fleet = FleetSimulation(truth, config, load, seed=1)
    fleet.advance(1800)
    group = observe(fleet, 1200).group(Role.UNIFIED)
    assert group is not None and group.tpot is not None and group.ttft is not None
    # About 0.3 × 1024 × 0.012 s ≈ 4 requests in flight per replica: the table's TPOT there is 10–12 ms.
    assert 0.009 < group.tpot.p50 < 0.014
    assert group.kv_usage is None  # a table does not know the KV pool


def test_a_workload_is_matched_to_the_nearest_measured_lengths() -> None:
    table = preset_table("deepseek-r1-h200")
    wanted = Workload(1.0, LengthDistribution(6000, 0.5, 30000), LengthDistribution(800, 0.5, 4000), 0.5)
    matched, lengths = table.matched_workload(wanted)
    assert lengths.measured == (8192, 1024) and not lengths.exact
    # InferenceX drew lengths uniformly on [0.8, 1] × nominal: mean 0.9 × nominal.
    assert matched.input_tokens.mean == pytest.approx(0.9 * 8192)
    assert matched.output_tokens.max == 1024
    assert (matched.request_rate_per_s, matched.prefix_cache_hit_rate) == (1.0, 0.5)
