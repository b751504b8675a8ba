"""Targets and truths for the `frontier simulate` tests.

* `llama_target`: the Llama-3.1-70B chat example (one H100 node), optionally with a tighter TPOT bound and
  a larger pool.
* `slow_decode`: the performance model itself with a pinned decode cliff on every worker — a truth whose
  decode is `factor` × slower than the model the plan was made with, plus the twin's usual 3 % jitter.
* `QWEN_TABLE_TARGET`: the benchmark's target for the `qwen3-32b-h100` measured table.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from frontier_operator import cli_simulate
from frontier_operator.api import parse_target
from frontier_operator.api.v1alpha1 import FrontierTarget
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.sim.closed_loop import Setup
from frontier_operator.sim.perturbed import Cliff, Perturbation, PerturbedModelTruth

REPOSITORY = Path(__file__).resolve().parents[1]
LLAMA_EXAMPLE = REPOSITORY / "examples" / "llama-70b-chat.yaml"
QWEN_TABLE_TARGET = REPOSITORY / "bench" / "targets" / "qwen3-32b-h100-table.yaml"


def llama_document(*, tpot_p50: str | None = None, max_gpus: int | None = None) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(LLAMA_EXAMPLE.read_text())
    spec = document["spec"]
    if tpot_p50 is not None:
        spec["slo"]["tpot"] = {"p50": tpot_p50}
    if max_gpus is not None:
        spec["hardware"]["pools"][0]["maxGpus"] = max_gpus
        spec["search"]["parallelism"]["multiNode"] = True
    return document


def llama_target(*, tpot_p50: str | None = None, max_gpus: int | None = None) -> FrontierTarget:
    return parse_target(llama_document(tpot_p50=tpot_p50, max_gpus=max_gpus))


def slow_decode(setup: Setup, factor: float, seed: int = 1) -> Setup:
    """`setup` with a truth whose decode is `factor` × slower than the model everywhere."""
    cliff = Cliff(factor, "decode kernels slower than the model assumes")
    perturbation = replace(Perturbation.none(seed), noise_cv=0.03, cliffs=(cliff,))
    truth = PerturbedModelTruth(PerformanceModel.default(), setup.request.arch, perturbation)
    return replace(setup, truth=truth, truth_spec=f"model with decode ×{factor}")


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="frontier")
    commands = parser.add_subparsers(dest="command", required=True)
    cli_simulate.register(commands)
    args = parser.parse_args(["simulate", *argv])
    code: int = args.func(args)
    return code
