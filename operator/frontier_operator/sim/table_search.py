"""A measured truth table bounds the search: the planner may only propose what the table can answer.

A simulation on a table of real measurements is only meaningful for the configurations the table holds:
any other layout is `Unavailable` in the twin. So before planning, the `PlanRequest` is narrowed to the
table and the planner's predictor refuses every other configuration:

* pools: only those whose GPU the table measured;
* weight formats: only those whose precision class (`sim.measured.precision_class`) the table measured for
  the model; speculative decoding off (the silicon CSV has none);
* disaggregation: `never` when the table holds only aggregated configurations, `always` when only P/D;
* everything else — parallel layouts (TP, PP, attention-DP, EP) and P/D pairs — by `TableLimitedPredictor`,
  which raises `UnpredictableConfig` for a structure the table lacks, so the planner rejects it as
  unpredictable and the tuning loop's re-plans stay inside the table too;
* lengths: the workload's input and output lengths become the nearest measured pair
  (`MeasuredTable.matched_workload`), reported as a `LengthMatch`.

A P/D fleet must be a whole number of measured units (2 prefill + 4 decode = 2 units of 1 + 2) while the
planner sizes the two roles independently; `snap_to_table` rounds such a fleet up to the nearest whole
number of units before it is deployed on the twin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.types import Prediction, Role, ServingConfig, Workload
from frontier_operator.planner.types import Disaggregation, PlanRequest, Predictor, PredictorWrapper, SpeculativeMode
from frontier_operator.sim.measured import LengthMatch, MeasuredTable, precision_class
from frontier_operator.sim.tables import TableConfiguration, table_configurations
from frontier_operator.tuning.structure import with_replicas


class TableMismatch(ValueError):  # noqa: N818 - reads as the condition, like `Unavailable`
    """The target cannot be simulated on this table (another model, no common GPU or precision)."""


def _units(table: MeasuredTable) -> set[tuple[int, ...]]:
    return {key.workers for key in table.configs}


def _sized(config: ServingConfig, workers: tuple[int, ...]) -> ServingConfig:
    if config.disaggregated:
        return with_replicas(with_replicas(config, Role.PREFILL, workers[0]), Role.DECODE, workers[1])
    return with_replicas(config, Role.UNIFIED, workers[0])


def answers_structure(table: MeasuredTable, config: ServingConfig) -> bool:
    """`config`'s structure (model, GPU, precision, layouts, aggregated or P/D) was measured, whatever its
    replica counts."""
    if table.answers(config):
        return True
    return any(len(unit) == len(config.roles) and table.answers(_sized(config, unit)) for unit in sorted(_units(table)))


def snap_to_table(table: MeasuredTable, config: ServingConfig) -> ServingConfig:
    """`config` itself when the table answers it, else the smallest whole number of a measured P/D unit that
    covers both of its roles (unchanged when no unit fits: the twin then says why it cannot run it)."""
    if table.answers(config) or not config.disaggregated:
        return config
    prefill, decode = config.role(Role.PREFILL), config.role(Role.DECODE)
    if prefill is None or decode is None:
        return config
    options = []
    for unit in sorted(_units(table)):
        if len(unit) != 2:
            continue
        count = max(math.ceil(prefill.replicas / unit[0]), math.ceil(decode.replicas / unit[1]), 1)
        snapped = _sized(config, (count * unit[0], count * unit[1]))
        if table.answers(snapped):
            options.append(snapped)
    return min(options, key=lambda c: c.total_gpus) if options else config


@dataclass(frozen=True)
class TableLimitedPredictor(PredictorWrapper):
    """The performance model, refusing every configuration whose structure the table did not measure."""

    base: Predictor
    table: MeasuredTable

    def predict(
        self, arch: ModelArch, gpu: GpuSpec, config: ServingConfig, workload: Workload, price_per_gpu_hour: float
    ) -> Prediction:
        if not answers_structure(self.table, config):
            raise UnpredictableConfig(f"the measured table {self.table.source} has no measurements of this layout")
        return self.base.predict(arch, gpu, config, workload, price_per_gpu_hour)


@dataclass(frozen=True)
class TableScope:
    """What a measured table left of the target's search, in words, and the lengths it matched."""

    request: PlanRequest
    lengths: LengthMatch
    notes: tuple[str, ...]
    configurations: tuple[TableConfiguration, ...]


def _gpu_name(name: str) -> str:
    gpu = find_gpu(name)
    return gpu.name if gpu is not None else name


def limit_request_to_table(request: PlanRequest, table: MeasuredTable) -> TableScope:
    """The request narrowed to what `table` answers (see the module docstring); raises `TableMismatch`."""
    model = request.arch.name.lower()
    configurations = tuple(c for c in table_configurations(table) if c.key.model.lower() == model)
    if not configurations:
        measured = sorted({c.key.model for c in table_configurations(table)})
        raise TableMismatch(f"the table measures {', '.join(measured)}, not {request.arch.name}")
    gpus = {_gpu_name(c.key.gpu) for c in configurations}
    pools = tuple(p for p in request.pools if p.gpu.name in gpus)
    if not pools:
        have = ", ".join(p.gpu.name for p in request.pools)
        on = ", ".join(sorted(gpus))
        raise TableMismatch(f"the table measures {request.arch.name} on {on}; the pools have {have}")
    precisions = {c.key.precision for c in configurations if _gpu_name(c.key.gpu) in {p.gpu.name for p in pools}}
    formats = tuple(f for f in request.search.quantizations if precision_class(f.name) in precisions)
    if not formats:
        allowed = ", ".join(f.name for f in request.search.quantizations)
        raise TableMismatch(f"the table measures {', '.join(sorted(precisions))}; the search allows only {allowed}")
    modes = {c.key.disaggregated for c in configurations}
    disaggregation = request.search.disaggregation
    if modes == {False}:
        disaggregation = Disaggregation.NEVER
    elif modes == {True}:
        disaggregation = Disaggregation.ALWAYS
    workload, lengths = table.matched_workload(request.workload)
    search = replace(
        request.search,
        quantizations=formats,
        disaggregation=disaggregation,
        speculative=SpeculativeMode.OFF,
    )
    limited = replace(request, pools=pools, search=search, workload=workload)
    notes = (
        f"pools limited to the measured GPUs: {', '.join(p.name for p in pools)}",
        f"weight formats limited to the measured precisions ({', '.join(sorted(precisions))}): "
        f"{', '.join(f.name for f in formats)}",
        f"disaggregation {disaggregation.value}, speculative decoding off (the table has none)",
        "parallel layouts and P/D pairs limited to the "
        f"{len(configurations)} measured configurations: {'; '.join(c.key.describe() for c in configurations)}",
        lengths.describe(),
    )
    return TableScope(limited, lengths, notes, configurations)
