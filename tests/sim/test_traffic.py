"""Request streams: open-loop patterns keep their mean rate, traces replay, closed-loop clients bound concurrency."""

from __future__ import annotations

import itertools
import random
import statistics
from pathlib import Path

import pytest

from frontier_operator.catalog.models import find_model
from frontier_operator.perf.types import LengthDistribution, Workload
from frontier_operator.sim.perturbed import PerturbedModelTruth
from frontier_operator.sim.tables import default_silicon_csv
from frontier_operator.sim.traffic import (
    ClosedLoopSource,
    OpenLoopSource,
    TraceSource,
    TrafficKind,
    TrafficPattern,
    sample_cached,
    sample_length,
    source_from_spec,
    traffic_pattern,
)
from frontier_operator.sim.truth import MeasuredTruth, load_truth

WORKLOAD = Workload(5.0, LengthDistribution(1000, 0.5, 8000), LengthDistribution(200, 1.0, 4000), 0.4)


def _arrivals(source: OpenLoopSource, until: float) -> list[float]:
    times = []
    while source.peek_time() <= until:
        times.append(source.pop().time)
    return times


@pytest.mark.parametrize("kind", list(TrafficKind))
def test_every_pattern_keeps_the_mean_rate(kind: TrafficKind) -> None:
    pattern = TrafficPattern(kind, period_s=3600, step_at_s=1800, step_factor=1.0)
    times = _arrivals(OpenLoopSource(WORKLOAD, pattern, seed=1), 7200)
    assert len(times) / 7200 == pytest.approx(5.0, rel=0.05)


def test_bursts_and_steps_change_the_rate_where_they_should() -> None:
    bursty = TrafficPattern(TrafficKind.BURSTY, burst_every_s=600, burst_length_s=60, burst_factor=4)
    assert bursty.factor(30) == pytest.approx(4 * bursty.factor(300))
    step = traffic_pattern("step", duration_s=3000)
    assert (step.factor(500), step.factor(1500), step.factor(2500)) == (1.0, 1.5, 1.0)
    times = _arrivals(OpenLoopSource(WORKLOAD, step, seed=2), 3000)
    middle = sum(1 for t in times if 1000 <= t < 2000)
    assert middle / 1000 == pytest.approx(7.5, rel=0.1)


def test_burstier_arrivals_have_more_variable_gaps() -> None:
    def gap_cv(arrival_cv: float) -> float:
        workload = Workload(5.0, WORKLOAD.input_tokens, WORKLOAD.output_tokens, arrival_cv=arrival_cv)
        times = _arrivals(OpenLoopSource(workload, seed=3), 4000)
        gaps = [b - a for a, b in itertools.pairwise(times)]
        return statistics.pstdev(gaps) / statistics.fmean(gaps)

    assert gap_cv(1.0) == pytest.approx(1.0, abs=0.08)
    assert gap_cv(3.0) == pytest.approx(3.0, rel=0.2)


def test_lengths_and_cache_hits_follow_the_workload() -> None:
    rng = random.Random(4)
    lengths = [sample_length(rng, WORKLOAD.input_tokens) for _ in range(20000)]
    assert statistics.fmean(lengths) == pytest.approx(1000, rel=0.03)
    assert max(lengths) <= 8000 and min(lengths) >= 1
    hits = [sample_cached(rng, 1000, 0.4) for _ in range(20000)]
    assert statistics.fmean(hits) / 1000 == pytest.approx(0.4, abs=0.02)
    assert max(hits) <= 999


def test_traces_replay_from_their_first_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("timestamp_ms,input_length,output_length\n5000,100,10\n6500,200,20\n5500,300,30\n")
    source = source_from_spec(str(path), WORKLOAD)
    assert isinstance(source, TraceSource)
    replayed = [source.pop() for _ in range(3)]
    assert [(r.time, r.input_tokens) for r in replayed] == [(0.0, 100), (0.5, 300), (1.5, 200)]
    with pytest.raises(ValueError, match="unknown traffic"):
        source_from_spec("weekly", WORKLOAD)


def test_closed_loop_clients_keep_their_concurrency() -> None:
    source = ClosedLoopSource(10, lambda rng: (100, 10, 0), max_concurrency=4)
    sent = [source.pop() for _ in range(4)]
    assert all(r.time == 0.0 for r in sent) and source.peek_time() == float("inf")
    source.on_complete(2.5)
    assert source.peek_time() == 2.5
    assert source.pop().time == 2.5 and not source.done


def test_truths_load_from_their_command_line_names() -> None:
    arch = find_model("Qwen3-32B")
    assert arch is not None
    assert isinstance(load_truth("model", arch, seed=3), PerturbedModelTruth)
    exact = load_truth("model-exact", arch)
    assert isinstance(exact, PerturbedModelTruth) and exact.perturbation.noise_cv == 0
    with pytest.raises(ValueError, match="neither"):
        load_truth("/no/such/table.csv", arch)
    if default_silicon_csv().exists():
        assert isinstance(load_truth("qwen3-32b-h100", arch), MeasuredTruth)
