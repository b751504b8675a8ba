"""Every benchmark argv a sweep Job carries is one SGLang 0.5.23's own benchmark client accepts.

The parser is SGLang's (`sglang_bench_parser`: `cli_main`'s parser taken from `sglang/benchmark/serving.py`),
with full flag names only. Each parsed run is also checked for what the sweep means it to do (random ids, a
closed loop at the point's concurrency, the target's mean lengths), and the twin's reading of the same argv
(`sim.bench.parse_benchmark_argv`) must agree with SGLang's on every flag the twin uses.
"""

from __future__ import annotations

import time
from dataclasses import fields
from typing import Any

import pytest

from frontier_operator.render.benchmark import BENCHMARK_MODULE, RESULTS_FILE, benchmark_argvs
from frontier_operator.sim.bench import BenchmarkArgs
from frontier_operator.sim.bench import parse_benchmark_argv as twin_parse
from frontier_operator.sweep.jobs import render_deployment, sweep_deployments
from sweep_support import planned_examples, sweep_of

pytest.importorskip("sglang.benchmark.goodput", reason="SGLang 0.5.23 is not installed; make test installs it")
sglang_parser = pytest.importorskip("sglang_bench_parser")

BUDGETS = (30.0, 400.0)


def _jobs() -> list[tuple[str, dict[str, Any], Any]]:
    jobs = []
    for case in planned_examples():
        for budget in BUDGETS:
            sweep = sweep_of(case.name, budget)
            for deployment in sweep_deployments(
                sweep, case.request.workload, target_name=case.name, started_at=time.time()
            ):
                for obj in render_deployment(case.target, deployment):
                    if obj["kind"] == "Job":
                        jobs.append((f"{case.name}/{budget:g}/{deployment.spec.sweep_id}", obj, deployment))
    return jobs


JOBS = _jobs()


def test_there_are_jobs_to_check() -> None:
    assert len(JOBS) >= len(planned_examples())


@pytest.mark.parametrize(("label", "job", "deployment"), JOBS, ids=[label for label, _, _ in JOBS])
def test_every_benchmark_argv_parses_with_sglangs_parser(label: str, job: dict[str, Any], deployment: Any) -> None:
    argvs = benchmark_argvs(job)
    assert len(argvs) == len(deployment.points)
    for argv, point in zip(argvs, deployment.points, strict=True):
        assert argv[:3] == ["python3", "-m", BENCHMARK_MODULE]
        args = sglang_parser.parse_benchmark_argv(argv[3:])
        assert args.backend == "sglang"
        assert args.dataset_name == "random-ids"
        assert args.max_concurrency == point.concurrency
        assert args.num_prompts == point.num_prompts >= args.max_concurrency
        assert args.request_rate == float("inf")
        assert args.output_file == RESULTS_FILE
        assert 0.0 <= args.random_range_ratio <= 1.0
        # random-ids draws uniformly on [N·r, N]: the mean is the target's (up to rounding).
        mean_in = args.random_input_len * (1 + args.random_range_ratio) / 2
        assert mean_in == pytest.approx(point.input_tokens, rel=0.02, abs=2)
        mean_out = args.random_output_len * (1 + args.random_range_ratio) / 2
        assert mean_out == pytest.approx(point.output_tokens, rel=0.02, abs=2)


@pytest.mark.parametrize(("label", "job", "deployment"), JOBS[:6], ids=[label for label, _, _ in JOBS[:6]])
def test_the_twin_reads_the_argv_as_sglang_does(label: str, job: dict[str, Any], deployment: Any) -> None:
    for argv in benchmark_argvs(job):
        real = sglang_parser.parse_benchmark_argv(argv[3:])
        twin = twin_parse(argv)
        for field in fields(BenchmarkArgs):
            assert getattr(twin, field.name) == getattr(real, field.name), field.name


def test_the_parser_refuses_what_sglang_refuses() -> None:
    with pytest.raises(sglang_parser.BenchmarkArgvError):
        sglang_parser.parse_benchmark_argv(["--dataset-name", "random-ids", "--backend", "sglang-fast"])
    with pytest.raises(sglang_parser.BenchmarkArgvError):
        sglang_parser.parse_benchmark_argv(["--max-conc", "4"])  # abbreviations are not ours to use
    with pytest.raises(sglang_parser.BenchmarkArgvError):
        sglang_parser.parse_benchmark_argv(["--rust-worker-threads", "2"])  # a post-parse rule of cli_main
