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

from frontier_operator.sim.measured import ConcurrencyAnswer, LengthMatch, MeasuredTable, MeasuredTruth, TableConfig
from frontier_operator.sim.oracle import OracleCheck, OracleResult, check_config, find_oracle
from frontier_operator.sim.perturbed import Cliff, HiddenFactors, Perturbation, PerturbedModelTruth
from frontier_operator.sim.timing import PrefillMode, ReplicaTiming, Truth, Unavailable

oracle = find_oracle

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
    "oracle",
]
