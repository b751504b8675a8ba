"""Ground truths of the digital twin, in one place: the protocol, both implementations and the oracle.

* `Truth` / `ReplicaTiming` / `Unavailable` (`sim.timing`): what a truth answers and how it refuses.
* `PerturbedModelTruth` (`sim.perturbed`): the performance model bent by hidden, seeded factors, cliffs,
  CUDA-graph padding and jitter.
* `MeasuredTruth` (`sim.measured`): a table of real measurements in the silicon CSV schema, answering only
  for the configurations it contains; `sim.tables` cuts such tables from the shared CSV.
* `oracle` (`sim.oracle.find_oracle`): the cheapest candidate fleet the truth lets meet every SLO, found by
  simulation.
"""

from __future__ import annotations

from pathlib import Path

from frontier_operator.catalog.types import ModelArch
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.sim.measured import ConcurrencyAnswer, LengthMatch, MeasuredTable, MeasuredTruth, TableConfig
from frontier_operator.sim.oracle import OracleCheck, OracleResult, check_config, find_oracle
from frontier_operator.sim.perturbed import Cliff, HiddenFactors, Perturbation, PerturbedModelTruth
from frontier_operator.sim.tables import PRESET_CUTS, preset_truth
from frontier_operator.sim.timing import PrefillMode, ReplicaTiming, Truth, Unavailable

oracle = find_oracle

MODEL_TRUTHS = ("model", "model-perturbed", "model-exact")


def load_truth(
    spec: str,
    arch: ModelArch,
    *,
    seed: int = 0,
    model: PerformanceModel | None = None,
    backend: str = "sglang",
) -> Truth:
    """A truth from a `--truth` value: `model` (perturbed, seeded), `model-exact` (the model with only CUDA-graph
    padding), a table preset (`sim.tables.PRESET_CUTS`), or the path of a CSV in the silicon schema."""
    if spec in MODEL_TRUTHS:
        perturbation = Perturbation.none(seed) if spec == "model-exact" else Perturbation(seed=seed)
        return PerturbedModelTruth(model or PerformanceModel.default(), arch, perturbation)
    if spec in PRESET_CUTS:
        return preset_truth(spec)
    path = Path(spec)
    if not path.exists():
        presets = ", ".join(sorted(PRESET_CUTS))
        raise ValueError(f"--truth {spec!r} is neither {', '.join(MODEL_TRUTHS)}, a preset ({presets}) nor a CSV file")
    return MeasuredTruth(MeasuredTable.from_csv(path, backend=backend))


__all__ = [
    "Cliff",
    "ConcurrencyAnswer",
    "HiddenFactors",
    "LengthMatch",
    "MeasuredTable",
    "MeasuredTruth",
    "OracleCheck",
    "OracleResult",
    "Perturbation",
    "PerturbedModelTruth",
    "PrefillMode",
    "ReplicaTiming",
    "TableConfig",
    "Truth",
    "Unavailable",
    "check_config",
    "find_oracle",
    "load_truth",
    "oracle",
]
