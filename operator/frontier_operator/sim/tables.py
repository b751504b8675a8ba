"""Measured truth tables cut from the silicon CSV, and what each table can answer.

`frontier simulate --truth table.csv` and the closed-loop and sweep benchmarks run the twin on tables of real
measurements. This module cuts such tables out of `shared/data/silicon/silicon_measurements.csv` (presets
for the SGLang rows that have enough configurations to make a search interesting), writes them back in the
same schema, and lists the configurations a table answers, so that the planner's search can be restricted
to them.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.perf.silicon import SCHEMA_COLUMNS, read_rows
from frontier_operator.perf.types import ServingConfig
from frontier_operator.sim.measured import MeasuredTable, MeasuredTruth, TableConfig

SILICON_CSV_ENV = "FRONTIER_SILICON_CSV"
# The shared data sit beside the repository (../shared/data/silicon/, see its SOURCES.md).
_REPOSITORY = Path(__file__).resolve().parents[3]
_DEFAULT_SILICON_CSV = _REPOSITORY.parent / "shared" / "data" / "silicon" / "silicon_measurements.csv"


def default_silicon_csv() -> Path:
    """`$FRONTIER_SILICON_CSV`, else the shared silicon measurements beside the repository."""
    return Path(os.environ.get(SILICON_CSV_ENV) or _DEFAULT_SILICON_CSV)


@dataclass(frozen=True)
class TableCut:
    """Which rows of the silicon CSV make a measured truth table."""

    name: str
    model_path: str
    systems: tuple[str, ...]
    precisions: tuple[str, ...] = ()
    backend: str = "sglang"
    modes: tuple[str, ...] = ()
    description: str = ""

    def selects(self, row: Mapping[str, str]) -> bool:
        def field(key: str) -> str:
            return (row.get(key) or "").strip().lower()

        gpu = find_gpu(field("system"))
        systems = {s.lower() for s in self.systems}
        system_ok = field("system") in systems or (gpu is not None and gpu.name.lower() in systems)
        return (
            field("backend") == self.backend
            and field("model_path") == self.model_path.lower()
            and system_ok
            and (not self.precisions or field("precision") in self.precisions)
            and (not self.modes or field("mode") in self.modes)
        )


# SGLang rows of the silicon CSV, by model and system (counts as of the shared copy; SOURCES.md).
PRESET_CUTS: dict[str, TableCut] = {
    cut.name: cut
    for cut in (
        TableCut(
            "deepseek-r1-h200",
            "deepseek-ai/DeepSeek-R1",
            ("h200_sxm",),
            ("fp8",),
            description="DeepSeek-R1 FP8 on H200: TP8 aggregated and two P/D layouts",
        ),
        TableCut(
            "deepseek-r1-b200",
            "deepseek-ai/DeepSeek-R1",
            ("b200_sxm",),
            ("fp8", "fp4"),
            description="DeepSeek-R1 FP8 and FP4 on B200: TP4/TP8 with and without EP, aggregated and P/D",
        ),
        TableCut(
            "deepseek-r1-gb200",
            "deepseek-ai/DeepSeek-R1",
            ("gb200",),
            ("fp8", "fp4"),
            description="DeepSeek-R1 FP8 and FP4 on GB200 NVL72: P/D layouts up to wide EP",
        ),
        TableCut(
            "qwen3-32b-h100",
            "Qwen/Qwen3-32B",
            ("h100_sxm",),
            description="Qwen3-32B on H100: BF16 TP1–TP8 aggregated and FP8 P/D ratios",
        ),
    )
}


def cut_rows(rows: Iterable[Mapping[str, str]], cut: TableCut) -> list[dict[str, str]]:
    return [dict(row) for row in rows if cut.selects(row)]


def write_rows(rows: Sequence[Mapping[str, str]], path: Path) -> None:
    """Write rows in the silicon schema (its column order first, any extra columns after)."""
    extra = sorted({key for row in rows for key in row} - set(SCHEMA_COLUMNS))
    columns = [*SCHEMA_COLUMNS, *extra]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({column: row.get(column, "") for column in columns})


def preset_table(name: str, silicon_csv: Path | None = None) -> MeasuredTable:
    """A measured table cut by preset name (see `PRESET_CUTS`)."""
    cut = PRESET_CUTS.get(name)
    if cut is None:
        raise KeyError(f"unknown table preset {name!r} (known: {', '.join(sorted(PRESET_CUTS))})")
    rows = cut_rows(read_rows(silicon_csv or default_silicon_csv()), cut)
    return MeasuredTable.from_rows(rows, backend=cut.backend, source=name)


def preset_truth(name: str, silicon_csv: Path | None = None) -> MeasuredTruth:
    return MeasuredTruth(preset_table(name, silicon_csv))


@dataclass(frozen=True)
class TableConfiguration:
    """One configuration a table answers: an example fleet of one measured unit and what was measured."""

    key: TableConfig
    example: ServingConfig
    lengths: tuple[tuple[int, int], ...]
    concurrencies: tuple[float, ...]

    def describe(self) -> str:
        pairs = ", ".join(f"{i}/{o}" for i, o in self.lengths)
        low, high = min(self.concurrencies), max(self.concurrencies)
        return f"{self.key.describe()} — lengths {pairs}; concurrency {low:g}–{high:g}"


def table_configurations(table: MeasuredTable) -> tuple[TableConfiguration, ...]:
    """Every configuration `table` can answer for, with one measured unit as an example `ServingConfig`."""
    listed = []
    for key in table.configs:
        curves = table.curves[key]
        concurrencies = sorted({c for curve in curves.values() for c in curve.concurrencies})
        listed.append(
            TableConfiguration(
                key=key,
                example=table.examples[key],
                lengths=tuple(sorted(curves)),
                concurrencies=tuple(concurrencies),
            )
        )
    return tuple(listed)


def answerable(table: MeasuredTable, candidates: Iterable[ServingConfig]) -> list[ServingConfig]:
    """The candidates (in order) that `table` can answer for: the search space of a measured-truth run."""
    return [config for config in candidates if table.answers(config)]
