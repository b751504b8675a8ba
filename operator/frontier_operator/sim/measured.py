"""Ground truth (b): a table of real measurements, answering only for the configurations it contains.

Any CSV in the schema of `shared/data/silicon/silicon_measurements.csv` works. Its rows (one backend,
SGLang by default) are read with `perf.silicon.parse_row`, which turns AIConfigurator's encoding into SGLang
configurations, and grouped by *table configuration*: model, GPU system, precision class, aggregated or
P/D, the parallel layout of each role (TP, PP, attention-DP, EP) and, for P/D, the prefill and decode worker
counts of one measured unit. For each configuration and (input, output) length pair the table holds TTFT
and TPOT at the measured concurrencies; repeated runs of one point are merged by their median.

Answers:

* concurrency: TTFT and TPOT are interpolated linearly in log(concurrency) between the measured
  neighbours; outside the measured range the nearest measurement is used and the answer is flagged
  `extrapolated`;
* lengths: the measured (input, output) pair nearest to the workload's means (log distance) is used and
  reported (`LengthMatch`);
* fleets: an aggregated fleet of N replicas is N measured units, each at 1/N of the load; a P/D fleet must be
  a whole multiple of a measured unit (2 prefill + 4 decode workers = 2 units of 1 + 2);
* everything else — another layout, GPU, precision, speculative decoding, a P:D ratio never measured —
  raises `Unavailable` with the reason.

As a `Truth` for the fleet simulation the table is *load-indexed*: a replica carrying `c` requests serves
each at the measured TPOT(c), and a request admitted at load `c` sees the measured TTFT(c) (scaled by its
uncached prompt length against the measured one). The table holds means only; the spread of one request's
TTFT around the mean is an assumption (`first_token_cv`, default 0.25).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.silicon import SiliconCase, parse_row, read_rows
from frontier_operator.perf.types import LengthDistribution, Role, ServingConfig, WorkerConfig, Workload
from frontier_operator.planner.formats import canonical_format_name
from frontier_operator.sim.timing import PrefillMode, Unavailable

# Measured tables carry means only: spread of one request's time to first token around that mean.
DEFAULT_FIRST_TOKEN_CV = 0.25
# Night-to-night spread of a repeated silicon run (shared/data/silicon/SOURCES.md: "about 1–3 %").
DEFAULT_STEP_NOISE_CV = 0.03
# A request's time to first token scales with its uncached prompt, within these bounds of the measured one.
_PROMPT_SCALE_BOUNDS = (0.25, 4.0)

_PRECISION_CLASSES = {
    "fp8": "fp8",
    "fp8-block": "fp8",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
    "bf16": "bf16",
}


def precision_class(weight_format: str) -> str:
    """The silicon CSV's coarse `precision` for a weight format: FP8 and block-FP8 are one class, NVFP4/MXFP4 one."""
    name = canonical_format_name(weight_format)
    return _PRECISION_CLASSES.get(name, name)


@dataclass(frozen=True, order=True)
class RoleLayout:
    role: str
    tp: int
    pp: int
    attention_dp: int
    ep: int
    # The silicon CSV has no context-parallel rows: a CP worker never matches a measured one.
    attention_cp: int = 1

    @staticmethod
    def of(role: Role, worker: WorkerConfig) -> RoleLayout:
        return RoleLayout(role.value, worker.tp, worker.pp, worker.attention_dp, worker.ep, worker.attention_cp)

    def describe(self) -> str:
        parts = [f"TP{self.tp}"]
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        if self.attention_dp > 1:
            parts.append(f"DP{self.attention_dp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.attention_cp > 1:
            parts.append(f"CP{self.attention_cp}")
        return " ".join(parts)


@dataclass(frozen=True, order=True)
class TableConfig:
    """One measured configuration; `workers` are per measured unit: (1,) aggregated, (prefill, decode) P/D."""

    model: str
    gpu: str
    precision: str
    disaggregated: bool
    layouts: tuple[RoleLayout, ...]
    workers: tuple[int, ...]

    def describe(self) -> str:
        if not self.disaggregated:
            return f"{self.gpu} {self.precision} {self.layouts[0].describe()}"
        (prefill, decode), (p, d) = self.layouts, self.workers
        return f"{self.gpu} {self.precision} P/D {p}×[{prefill.describe()}] + {d}×[{decode.describe()}]"


def _config_shape(config: ServingConfig) -> tuple[bool, tuple[RoleLayout, ...], tuple[int, ...]]:
    if config.disaggregated:
        prefill, decode = config.role(Role.PREFILL), config.role(Role.DECODE)
        if prefill is None or decode is None:
            raise Unavailable("a P/D configuration needs a prefill and a decode role")
        layouts = (RoleLayout.of(Role.PREFILL, prefill.worker), RoleLayout.of(Role.DECODE, decode.worker))
        return True, layouts, (prefill.replicas, decode.replicas)
    unified = config.role(Role.UNIFIED)
    if unified is None:
        raise Unavailable("the configuration has neither a unified role nor prefill and decode roles")
    return False, (RoleLayout.of(Role.UNIFIED, unified.worker),), (unified.replicas,)


def _main_worker(config: ServingConfig) -> WorkerConfig:
    deployment = config.role(Role.DECODE) or config.role(Role.UNIFIED) or config.roles[0]
    return deployment.worker


def table_config_of_case(case: SiliconCase) -> TableConfig:
    disaggregated, layouts, workers = _config_shape(case.config)
    worker = _main_worker(case.config)
    return TableConfig(
        model=case.arch.name,
        gpu=case.gpu.name,
        precision=precision_class(worker.weight_format),
        disaggregated=disaggregated,
        layouts=layouts,
        workers=workers if disaggregated else (1,),
    )


@dataclass(frozen=True)
class MeasuredPoint:
    concurrency: float
    ttft_s: float
    tpot_s: float
    runs: int
    # Relative spread of TPOT between repeated runs (0 with a single run).
    spread: float


@dataclass(frozen=True)
class MeasuredCurve:
    """TTFT and TPOT of one configuration at one (input, output) pair, by concurrency per measured unit."""

    isl: int
    osl: int
    mean_input: float
    mean_output: float
    points: tuple[MeasuredPoint, ...]
    # Spread of the benchmark's lengths (InferenceX drew them on [0.8, 1] × nominal; see perf.silicon).
    length_cv: float = 0.0

    @property
    def concurrencies(self) -> tuple[float, ...]:
        return tuple(p.concurrency for p in self.points)

    def at(self, concurrency: float) -> tuple[float, float, bool]:
        """(TTFT s, TPOT s, extrapolated) at `concurrency` requests in flight on one unit."""
        points = self.points
        first, last = points[0], points[-1]
        if concurrency <= first.concurrency:
            return first.ttft_s, first.tpot_s, concurrency < first.concurrency * (1 - 1e-9)
        if concurrency >= last.concurrency:
            return last.ttft_s, last.tpot_s, concurrency > last.concurrency * (1 + 1e-9)
        index = bisect.bisect_left(self.concurrencies, concurrency)
        low, high = points[index - 1], points[index]
        weight = math.log(concurrency / low.concurrency) / math.log(high.concurrency / low.concurrency)
        ttft = low.ttft_s + weight * (high.ttft_s - low.ttft_s)
        tpot = low.tpot_s + weight * (high.tpot_s - low.tpot_s)
        return ttft, tpot, False

    def max_request_rate(self, cap: float | None = None) -> float:
        """Highest measured requests/s of one unit (Little: c / (TTFT + (OSL − 1)·TPOT)), up to `cap` in flight."""
        best = 0.0
        for p in self.points:
            if cap is not None and p.concurrency > cap:
                continue
            cycle = p.ttft_s + max(self.mean_output - 1.0, 0.0) * p.tpot_s
            best = max(best, p.concurrency / cycle if cycle > 0 else 0.0)
        return best


@dataclass(frozen=True)
class LengthMatch:
    requested: tuple[float, float]
    measured: tuple[int, int]

    @property
    def exact(self) -> bool:
        return self.distance < 0.05

    @property
    def distance(self) -> float:
        return (
            0.0 if not self.requested[0] or not self.requested[1] else _length_distance(self.requested, self.measured)
        )

    def describe(self) -> str:
        (i, o), (mi, mo) = self.requested, self.measured
        return f"lengths {i:.0f}/{o:.0f} matched to the measured {mi}/{mo}"


def _length_distance(requested: tuple[float, float], measured: tuple[float, float]) -> float:
    return abs(math.log(max(requested[0], 1.0) / measured[0])) + abs(math.log(max(requested[1], 1.0) / measured[1]))


@dataclass(frozen=True)
class ConcurrencyAnswer:
    """The table's answer for a fleet at a number of clients (the benchmark's `--max-concurrency`)."""

    ttft_s: float
    tpot_s: float
    # Requests in flight per measured unit, what the table was indexed with.
    unit_concurrency: float
    units: int
    extrapolated: bool
    lengths: LengthMatch
    table_config: TableConfig


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _merge(samples: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    ttft = _median([s[0] for s in samples])
    tpot = _median([s[1] for s in samples])
    spread = statistics.pstdev([s[1] for s in samples]) / tpot if len(samples) > 1 and tpot > 0 else 0.0
    return ttft, tpot, spread


@dataclass(frozen=True)
class MeasuredTable:
    """Measured curves by table configuration and (input, output) pair, with one example config each."""

    curves: Mapping[TableConfig, Mapping[tuple[int, int], MeasuredCurve]]
    examples: Mapping[TableConfig, ServingConfig]
    source: str = "table"
    skipped_rows: int = 0

    @staticmethod
    def from_rows(
        rows: Iterable[Mapping[str, str]], backend: str | None = "sglang", source: str = "table"
    ) -> MeasuredTable:
        """Rows of the silicon schema; rows of other backends, unparseable rows and rows without TTFT and TPOT
        are skipped (counted in `skipped_rows`)."""
        grouped: dict[TableConfig, dict[tuple[int, int], dict[float, list[tuple[float, float]]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(list))
        )
        means: dict[tuple[TableConfig, tuple[int, int]], tuple[float, float, float]] = {}
        examples: dict[TableConfig, ServingConfig] = {}
        skipped = 0
        for row in rows:
            if backend is not None and (row.get("backend") or "").strip().lower() != backend:
                continue
            try:
                case = parse_row(row)
            except (UnpredictableConfig, Unavailable):
                skipped += 1
                continue
            if not case.measured_ttft_ms or not case.measured_tpot_ms or case.concurrency <= 0:
                skipped += 1
                continue
            key = table_config_of_case(case)
            lengths = (int(case.workload.input_tokens.max or 0), int(case.workload.output_tokens.max or 0))
            grouped[key][lengths][case.concurrency].append((case.measured_ttft_ms / 1e3, case.measured_tpot_ms / 1e3))
            means[(key, lengths)] = (
                case.workload.input_tokens.mean,
                case.workload.output_tokens.mean,
                case.workload.input_tokens.cv,
            )
            examples.setdefault(key, case.config)
        curves: dict[TableConfig, dict[tuple[int, int], MeasuredCurve]] = {}
        for key, by_lengths in grouped.items():
            curves[key] = {}
            for lengths, by_concurrency in by_lengths.items():
                points = []
                for concurrency in sorted(by_concurrency):
                    ttft, tpot, spread = _merge(by_concurrency[concurrency])
                    points.append(MeasuredPoint(concurrency, ttft, tpot, len(by_concurrency[concurrency]), spread))
                mean_in, mean_out, cv = means[(key, lengths)]
                curves[key][lengths] = MeasuredCurve(lengths[0], lengths[1], mean_in, mean_out, tuple(points), cv)
        return MeasuredTable(curves=curves, examples=examples, source=source, skipped_rows=skipped)

    @staticmethod
    def from_csv(path: Path, backend: str | None = "sglang") -> MeasuredTable:
        return MeasuredTable.from_rows(read_rows(path), backend=backend, source=str(path))

    @property
    def configs(self) -> tuple[TableConfig, ...]:
        return tuple(sorted(self.curves))

    def match(self, config: ServingConfig) -> tuple[TableConfig, int]:
        """(table configuration, number of measured units) that `config` is made of; raises `Unavailable`."""
        if any(d.worker.speculative is not None for d in config.roles):
            raise Unavailable("the table has no measurements with speculative decoding")
        disaggregated, layouts, workers = _config_shape(config)
        worker = _main_worker(config)
        precision = precision_class(worker.weight_format)
        same_model = [k for k in self.curves if k.model.lower() == config.model.lower()]
        if not same_model:
            raise Unavailable(f"the table has no measurements of {config.model}")
        same_system = [k for k in same_model if k.gpu == worker.gpu and k.precision == precision]
        if not same_system:
            systems = sorted({f"{k.gpu} {k.precision}" for k in same_model})
            raise Unavailable(f"the table has no {worker.gpu} {precision} measurements (it has {', '.join(systems)})")
        same_layout = [k for k in same_system if k.disaggregated == disaggregated and k.layouts == layouts]
        if not same_layout:
            known = sorted({k.describe() for k in same_system})
            raise Unavailable(f"the table has no measurements of this layout (it has {'; '.join(known)})")
        for key in sorted(same_layout):
            units = _units(workers, key.workers, disaggregated)
            if units:
                return key, units
        ratios = sorted({f"{k.workers[0]}:{k.workers[-1]}" for k in same_layout})
        raise Unavailable(f"P:D {workers[0]}:{workers[-1]} is not a multiple of a measured unit ({', '.join(ratios)})")

    def curve(self, key: TableConfig, workload: Workload) -> tuple[MeasuredCurve, LengthMatch]:
        requested = (workload.input_tokens.mean, workload.output_tokens.mean)
        by_lengths = self.curves[key]
        best = min(
            by_lengths.values(),
            key=lambda c: (_length_distance(requested, (c.mean_input, c.mean_output)), c.isl, c.osl),
        )
        return best, LengthMatch(requested=requested, measured=(best.isl, best.osl))

    def matched_workload(self, workload: Workload) -> tuple[Workload, LengthMatch]:
        """`workload` with its lengths replaced by the measured (input, output) pair nearest to them over the
        whole table (a simulation on a measured truth should run the traffic the table was measured with)."""
        requested = (workload.input_tokens.mean, workload.output_tokens.mean)
        best = min(
            (curve for by_lengths in self.curves.values() for curve in by_lengths.values()),
            key=lambda c: (_length_distance(requested, (c.mean_input, c.mean_output)), c.isl, c.osl),
        )
        matched = replace(
            workload,
            input_tokens=LengthDistribution(best.mean_input, best.length_cv, best.isl),
            output_tokens=LengthDistribution(best.mean_output, best.length_cv, best.osl),
        )
        return matched, LengthMatch(requested=requested, measured=(best.isl, best.osl))

    def answers(self, config: ServingConfig) -> bool:
        try:
            self.match(config)
        except Unavailable:
            return False
        return True


def _units(workers: tuple[int, ...], unit: tuple[int, ...], disaggregated: bool) -> int:
    if not disaggregated:
        return workers[0] if workers[0] >= 1 else 0
    p, d = workers
    up, ud = unit
    if p % up or d % ud or p // up != d // ud or p < up:
        return 0
    return p // up


@dataclass(frozen=True)
class TableTiming:
    """`ReplicaTiming` of one replica under a measured table (LOAD_INDEXED)."""

    curve: MeasuredCurve
    role: Role
    worker: WorkerConfig
    share: float
    noise: float
    ttft_cv: float

    @property
    def prefill_mode(self) -> PrefillMode:
        return PrefillMode.LOAD_INDEXED

    @property
    def batch_cap(self) -> int:
        return max(1, self.worker.max_running_requests)

    @property
    def chunk_tokens(self) -> int:
        return max(1, self.worker.chunked_prefill_size)

    @property
    def attention_ranks(self) -> int:
        # The measured TTFT already holds however the ranks shared the prefill.
        return 1

    @property
    def kv_capacity_tokens(self) -> int | None:
        return None

    @property
    def accept_length(self) -> float:
        return 1.0

    @property
    def speculative(self) -> bool:
        return False

    @property
    def first_token_overhead_s(self) -> float:
        return 0.0

    @property
    def first_token_cv(self) -> float:
        return self.ttft_cv

    @property
    def noise_cv(self) -> float:
        return self.noise

    @property
    def graph_sizes(self) -> tuple[int, ...]:
        return ()

    @property
    def unit_share(self) -> float:
        return self.share

    def decode_step_s(self, batch: int, mean_context: float, load: float) -> float:
        return self.curve.at(max(load, 1.0))[1]

    def prefill_s(
        self, new_tokens: float, prefix_tokens: float, load: float, ranks: int = 1, sequences: int = 1
    ) -> float:
        ttft = self.curve.at(max(load, 1.0))[0]
        low, high = _PROMPT_SCALE_BOUNDS
        scale = min(max(new_tokens / max(self.curve.mean_input, 1.0), low), high)
        return ttft * scale

    def transfer_s(self, input_tokens: float) -> float:
        # The measured TTFT of a P/D unit already contains the KV transfer.
        return 0.0


@dataclass(frozen=True)
class MeasuredTruth:
    """Ground truth from a `MeasuredTable`; answers only for what the table contains."""

    table: MeasuredTable
    first_token_cv: float = DEFAULT_FIRST_TOKEN_CV
    noise_cv: float = DEFAULT_STEP_NOISE_CV

    @property
    def name(self) -> str:
        return f"measured({self.table.source})"

    def describe(self, config: ServingConfig) -> str:
        try:
            key, units = self.table.match(config)
        except Unavailable as error:
            return f"unavailable: {error.reason}"
        return f"{units} measured unit(s) of {key.describe()}"

    def timing(self, config: ServingConfig, role: Role, workload: Workload) -> TableTiming:
        key, _units_count = self.table.match(config)
        deployment = config.role(role)
        if deployment is None:
            raise Unavailable(f"the configuration has no {role.value} role")
        curve, _lengths = self.table.curve(key, workload)
        # A P/D replica is one of the prefill (or decode) workers of a measured unit.
        share = 1.0 / key.workers[0 if role is Role.PREFILL else 1] if key.disaggregated else 1.0
        return TableTiming(
            curve=curve,
            role=role,
            worker=deployment.worker,
            share=share,
            noise=self.noise_cv,
            ttft_cv=self.first_token_cv,
        )

    def lengths(self, config: ServingConfig, workload: Workload) -> LengthMatch:
        key, _units_count = self.table.match(config)
        return self.table.curve(key, workload)[1]

    def at_concurrency(self, config: ServingConfig, workload: Workload, concurrency: float) -> ConcurrencyAnswer:
        """The table's TTFT and TPOT for `concurrency` clients spread evenly over the fleet's measured units."""
        key, units = self.table.match(config)
        curve, lengths = self.table.curve(key, workload)
        per_unit = concurrency / units
        ttft, tpot, extrapolated = curve.at(per_unit)
        return ConcurrencyAnswer(
            ttft_s=ttft,
            tpot_s=tpot,
            unit_concurrency=per_unit,
            units=units,
            extrapolated=extrapolated,
            lengths=lengths,
            table_config=key,
        )
