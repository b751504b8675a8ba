"""Ground truth (a): the planner's performance model, bent by hidden multipliers and made jagged.

The planner predicts with `PerformanceModel`; a twin whose truth were that same model would only ever confirm
the planner. This truth starts from the model's step times and then:

* multiplies them by hidden, seeded factors per GPU, per number format on that GPU, per parallel layout and
  for speculative acceptance (a layout can be secretly slower, a format faster than predicted);
* hides *cliffs*: with a small probability a layout is much slower than its neighbours (a bad kernel, an
  all-to-all that does not overlap), and tests or benchmarks can pin a cliff on a given configuration;
* pads every decode batch to the next captured CUDA-graph size and runs batches past the largest captured
  size eagerly (`sim.cuda_graphs`), which makes step time a step function of the batch;
* adds run-to-run jitter (`noise_cv`).

The factors are drawn from (seed, configuration) with `sim.hidden`, so a configuration keeps its truth for a
whole simulation and across runs whatever order the planner asks in, and `hidden_factors` reveals them for
reports ("the truth was 25 % slower on TP8 EP8").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.formats import resolve_formats
from frontier_operator.perf.memory import kv_bytes_per_request
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.speculative import accept_length
from frontier_operator.perf.steps import Hardware, decode_step_seconds
from frontier_operator.perf.types import Role, ServingConfig, WorkerConfig, Workload
from frontier_operator.sim.cuda_graphs import capture_sizes, graph_max_batch, padded_worker_batch
from frontier_operator.sim.hidden import lognormal_factor, unit_draw
from frontier_operator.sim.timing import PrefillMode, Unavailable

# A prefill iteration without chunking still has to be bounded by something; no prompt is this long.
_UNCHUNKED = 10**9


@dataclass(frozen=True)
class Cliff:
    """A pinned surprise: configurations matching every given field are `factor` × slower (< 1: faster)."""

    factor: float
    reason: str
    decode: bool = True
    prefill: bool = False
    gpu: str | None = None
    weight_format: str | None = None
    tp: int | None = None
    ep: int | None = None
    attention_dp: int | None = None
    speculative: bool | None = None
    role: Role | None = None

    def matches(self, worker: WorkerConfig, role: Role) -> bool:
        checks: tuple[tuple[Any, Any], ...] = (
            (self.gpu, worker.gpu),
            (self.weight_format, worker.weight_format),
            (self.tp, worker.tp),
            (self.ep, worker.ep),
            (self.attention_dp, worker.attention_dp),
            (self.speculative, worker.speculative is not None),
            (self.role, role),
        )
        return all(wanted is None or wanted == actual for wanted, actual in checks)


@dataclass(frozen=True)
class Perturbation:
    """How far the hidden truth may stray from the model. Sigmas are of log-normal factors (0.1 ≈ ±10 %)."""

    seed: int = 0
    gpu_sigma: float = 0.08
    format_sigma: float = 0.12
    layout_sigma: float = 0.10
    prefill_sigma: float = 0.12
    accept_sigma: float = 0.10
    transfer_sigma: float = 0.30
    # Chance that a (GPU, format, layout) hides a cliff, and how much slower its decode is then.
    cliff_probability: float = 0.15
    cliff_factor: float = 1.25
    # Decode batches beyond the largest captured CUDA graph run eagerly: kernel launches are paid again.
    eager_penalty: float = 1.10
    noise_cv: float = 0.03
    cliffs: tuple[Cliff, ...] = ()

    @staticmethod
    def none(seed: int = 0) -> Perturbation:
        """No hidden factors and no noise: the model itself, with only CUDA-graph padding added."""
        return Perturbation(
            seed=seed,
            gpu_sigma=0.0,
            format_sigma=0.0,
            layout_sigma=0.0,
            prefill_sigma=0.0,
            accept_sigma=0.0,
            transfer_sigma=0.0,
            cliff_probability=0.0,
            eager_penalty=1.0,
            noise_cv=0.0,
        )


@dataclass(frozen=True)
class HiddenFactors:
    """What the truth multiplies the model by for one worker of one role, and why."""

    decode: float
    prefill: float
    accept: float
    transfer: float
    notes: tuple[str, ...]


def hidden_factors(perturbation: Perturbation, worker: WorkerConfig, role: Role, kind: str) -> HiddenFactors:
    seed = perturbation.seed
    layout: tuple[str | int, ...] = (
        worker.gpu,
        worker.tp,
        worker.pp,
        worker.attention_dp,
        worker.ep,
        worker.moe_a2a_backend.value,
    )
    if worker.attention_cp > 1:  # appended only then, so the factors of every other layout stay as they were
        layout += (f"cp{worker.attention_cp}",)
    gpu = lognormal_factor(seed, perturbation.gpu_sigma, "gpu", worker.gpu)
    fmt = lognormal_factor(seed, perturbation.format_sigma, "format", worker.gpu, worker.weight_format)
    lay = lognormal_factor(seed, perturbation.layout_sigma, "layout", *layout)
    decode = gpu * fmt * lay
    prefill = lognormal_factor(seed, perturbation.prefill_sigma, "prefill", worker.gpu, worker.weight_format, worker.tp)
    notes: list[str] = []
    if unit_draw(seed, "cliff", worker.weight_format, *layout) < perturbation.cliff_probability:
        decode *= perturbation.cliff_factor
        notes.append(f"hidden cliff: decode ×{perturbation.cliff_factor:.2f}")
    for cliff in perturbation.cliffs:
        if cliff.matches(worker, role):
            if cliff.decode:
                decode *= cliff.factor
            if cliff.prefill:
                prefill *= cliff.factor
            notes.append(f"{cliff.reason} (×{cliff.factor:.2f})")
    accept = 1.0
    spec = worker.speculative
    if spec is not None:
        accept = lognormal_factor(
            seed, perturbation.accept_sigma, "accept", spec.algorithm.value, spec.num_steps, spec.eagle_topk, kind
        )
    transfer = lognormal_factor(seed, perturbation.transfer_sigma, "transfer", worker.gpu)
    return HiddenFactors(decode=decode, prefill=prefill, accept=accept, transfer=transfer, notes=tuple(notes))


def _log_grid(value: float, per_octave: int) -> tuple[float, float, float]:
    """(lower node, upper node, weight of the upper) of `value` on a grid of `per_octave` nodes per doubling,
    with 0 and 1 as the first nodes: prefill costs are memoised on the nodes and interpolated between them."""
    if value <= 1.0:
        return 0.0, 1.0, max(0.0, value)
    exponent = math.log2(value) * per_octave
    low = 2.0 ** (math.floor(exponent) / per_octave)
    high = 2.0 ** (math.ceil(exponent) / per_octave)
    if high <= low:
        return low, low, 0.0
    return low, high, (value - low) / (high - low)


@dataclass(frozen=True)
class ModelTiming:
    """`ReplicaTiming` of one worker under the perturbed model (SHARED_GPU: prefill pauses decode)."""

    model: PerformanceModel
    arch: ModelArch
    gpu: GpuSpec
    worker: WorkerConfig
    hardware: Hardware
    factors: HiddenFactors
    kind: str
    reference_context: float
    eager_penalty: float
    noise: float
    kv_tokens: int
    model_accept: float
    overhead_s: float
    transfer_per_token_s: float
    transfer_fixed_s: float
    sizes: tuple[int, ...]
    _decode_memo: dict[int, tuple[float, float]] = field(default_factory=dict, compare=False, repr=False)
    _prefill_memo: dict[tuple[float, float, int, int], float] = field(default_factory=dict, compare=False, repr=False)

    @property
    def prefill_mode(self) -> PrefillMode:
        return PrefillMode.SHARED_GPU

    @property
    def batch_cap(self) -> int:
        return max(1, self.worker.max_running_requests)

    @property
    def chunk_tokens(self) -> int:
        chunk = self.worker.chunked_prefill_size
        return chunk if chunk > 0 else _UNCHUNKED

    @property
    def attention_ranks(self) -> int:
        return max(1, self.worker.attention_dp)

    @property
    def kv_capacity_tokens(self) -> int | None:
        return self.kv_tokens

    @property
    def accept_length(self) -> float:
        spec = self.worker.speculative
        if spec is None:
            return 1.0
        ceiling = float(min(spec.num_draft_tokens, spec.num_steps + 1))
        return max(1.0, min(self.model_accept * self.factors.accept, ceiling))

    @property
    def speculative(self) -> bool:
        return self.worker.speculative is not None

    @property
    def first_token_overhead_s(self) -> float:
        return self.overhead_s

    @property
    def noise_cv(self) -> float:
        return self.noise

    @property
    def first_token_cv(self) -> float:
        return 0.0

    @property
    def unit_share(self) -> float:
        return 1.0

    @property
    def graph_sizes(self) -> tuple[int, ...]:
        return self.sizes

    def _padded_line(self, rows: int) -> tuple[float, float]:
        """(intercept, slope per context token) of one iteration at `rows` GEMM rows: step time is linear in
        the KV it reads, so two model evaluations per padded size price every context."""
        memo = self._decode_memo.get(rows)
        if memo is not None:
            return memo
        low, high = 1.0, max(2.0, self.reference_context)
        if self.worker.speculative is None:
            at_low = decode_step_seconds(self.hardware, rows, low)
            at_high = decode_step_seconds(self.hardware, rows, high)
        else:
            # The model prices speculative decoding per output token; one iteration yields `model_accept`.
            def iteration(context: float) -> float:
                token = self.model.decode_token_time(self.arch, self.gpu, self.worker, rows, context, kind=self.kind)
                return token * self.model_accept

            at_low, at_high = iteration(low), iteration(high)
        slope = max(0.0, (at_high - at_low) / (high - low))
        line = (at_low - slope * low, slope)
        self._decode_memo[rows] = line
        return line

    def decode_step_s(self, batch: int, mean_context: float, load: float) -> float:
        if batch <= 0:
            return 0.0
        rows, graphed = padded_worker_batch(batch, self.worker.attention_dp, self.sizes)
        intercept, slope = self._padded_line(rows)
        # Padded rows cost GEMM work but read no KV: the attention term follows the real requests only.
        seconds = intercept + slope * mean_context * batch / rows
        if not graphed:
            seconds *= self.eager_penalty
        return seconds * self.factors.decode

    def _prefill_node(self, new: float, prefix: float, ranks: int, sequences: int) -> float:
        key = (new, prefix, ranks, sequences)
        seconds = self._prefill_memo.get(key)
        if seconds is None:
            # One forward of `sequences` prompts of `new` tokens on each busy rank, each attending to its own tokens
            # (priced as one sequence of their total, two 8k prompts of DeepSeek-R1 NVFP4 on 4×B200 took 0.47 s
            # where the model's forward takes 0.33 s). The engine never gives a rank more than a chunk.
            seconds = self.model.prefill_forward_time(
                self.arch, self.gpu, self.worker, sequences=sequences, new_tokens=new, prefix_tokens=prefix, ranks=ranks
            )
            self._prefill_memo[key] = seconds
        return seconds

    def prefill_s(
        self, new_tokens: float, prefix_tokens: float, load: float, ranks: int = 1, sequences: int = 1
    ) -> float:
        if new_tokens <= 0:
            return 0.0
        # Bilinear on a log grid (8 nodes per doubling of a sequence's new tokens, 2 per doubling of prefix): within
        # about 1 % of the model, with a few hundred model evaluations per simulation instead of one per chunk.
        sequences = max(1, sequences)
        n_low, n_high, n_weight = _log_grid(new_tokens / sequences, 8)
        p_low, p_high, p_weight = _log_grid(prefix_tokens, 2)

        def node(new: float, prefix: float) -> float:
            return self._prefill_node(new, prefix, ranks, sequences)

        low = node(n_low, p_low) * (1 - p_weight) + node(n_low, p_high) * p_weight
        if n_weight <= 0:
            seconds = low
        else:
            high = node(n_high, p_low) * (1 - p_weight) + node(n_high, p_high) * p_weight
            seconds = low * (1 - n_weight) + high * n_weight
        return seconds * self.factors.prefill

    def transfer_s(self, input_tokens: float) -> float:
        return (self.transfer_fixed_s + self.transfer_per_token_s * input_tokens) * self.factors.transfer


@dataclass(frozen=True)
class PerturbedModelTruth:
    """Ground truth = `PerformanceModel` × hidden factors, with CUDA-graph padding, cliffs and jitter."""

    model: PerformanceModel
    arch: ModelArch
    perturbation: Perturbation = Perturbation()
    _timings: dict[tuple[Any, ...], ModelTiming] = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return f"model-perturbed(seed={self.perturbation.seed})"

    def factors(self, worker: WorkerConfig, role: Role, kind: str = "chat") -> HiddenFactors:
        return hidden_factors(self.perturbation, worker, role, kind)

    def describe(self, config: ServingConfig) -> str:
        parts = []
        for deployment in config.roles:
            f = self.factors(deployment.worker, deployment.role)
            notes = f"; {', '.join(f.notes)}" if f.notes else ""
            factors = f"decode ×{f.decode:.2f}, prefill ×{f.prefill:.2f}, accept ×{f.accept:.2f}"
            parts.append(f"{deployment.role.value}: {factors}{notes}")
        return " | ".join(parts)

    def timing(self, config: ServingConfig, role: Role, workload: Workload) -> ModelTiming:
        deployment = config.role(role)
        if deployment is None:
            raise Unavailable(f"the configuration has no {role.value} role")
        worker = deployment.worker
        context = workload.input_tokens.mean + workload.output_tokens.mean / 2.0
        key = (worker, role, workload.kind, round(context), config.disaggregated)
        cached = self._timings.get(key)
        if cached is not None:
            return cached
        gpu = find_gpu(worker.gpu)
        if gpu is None:
            raise Unavailable(f"GPU {worker.gpu!r} is not in the catalog")
        try:
            timing = self._build(gpu=gpu, worker=worker, role=role, workload=workload, context=context, config=config)
        except UnpredictableConfig as error:
            raise Unavailable(error.reason) from error
        self._timings[key] = timing
        return timing

    def _build(
        self,
        *,
        gpu: GpuSpec,
        worker: WorkerConfig,
        role: Role,
        workload: Workload,
        context: float,
        config: ServingConfig,
    ) -> ModelTiming:
        model, arch = self.model, self.arch
        hardware = model.hardware(arch, gpu, worker)
        full_context = max(1, math.ceil(workload.input_tokens.mean + workload.output_tokens.mean))
        fit = model.memory_fit(arch, gpu, worker, full_context, role=role)
        if not fit.fits:
            raise Unavailable(f"the KV pool of {worker.gpu} TP{worker.tp} holds no request of {full_context} tokens")
        coefficients = model.coefficients(gpu)
        per_token_s = fixed_s = 0.0
        if config.disaggregated and role is Role.PREFILL:
            formats = resolve_formats(arch, gpu, worker.weight_format, worker.kv_cache_format)
            link = gpu.scale_out_bandwidth_gbs * 1e9 * coefficients.link_efficiency
            sample = 1024.0
            per_token_s = kv_bytes_per_request(arch, formats, worker, sample) / sample / link
            fixed_s = coefficients.pd_handoff_ms * 1e-3
        spec = worker.speculative
        factors = self.factors(worker, role, workload.kind)
        return ModelTiming(
            model=model,
            arch=arch,
            gpu=gpu,
            worker=worker,
            hardware=hardware,
            factors=factors,
            kind=workload.kind,
            reference_context=max(256.0, context),
            eager_penalty=self.perturbation.eager_penalty,
            noise=self.perturbation.noise_cv,
            kv_tokens=max(1, fit.kv_tokens * max(1, worker.attention_dp)),
            model_accept=accept_length(spec, workload.kind) if spec is not None else 1.0,
            overhead_s=coefficients.ttft_overhead_ms * 1e-3,
            transfer_per_token_s=per_token_s,
            transfer_fixed_s=fixed_s,
            sizes=capture_sizes(graph_max_batch(gpu, worker), speculative=spec is not None),
        )
