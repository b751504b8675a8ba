"""Calibration coefficients of the performance model: what they mean, their bounds, and (de)serialisation.

The physics (`kernels`, `comm`, `memory`, `queueing`) is fixed; these few numbers per GPU family say how far
real SGLang runs sit from it: achieved fractions of peak bandwidth and FLOP/s, fixed per-layer and per-step
overheads, collective latency. `fitting.fit_calibration` refits them on measured rows; the package ships
the result as ``catalog/data/calibration.yaml``. Bounds keep every coefficient physical (efficiencies at most
1, overheads non-negative), which is what guarantees that no prediction beats the physical floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import yaml

CALIBRATION_FILE = "calibration.yaml"


@dataclass(frozen=True)
class CoefficientSpec:
    name: str
    prior: float
    lower: float
    upper: float
    unit: str
    meaning: str
    # One sigma of log(coefficient) around the prior; None leaves the fit's weak default.
    prior_log_sigma: float | None = None


# Priors: AIConfigurator's empirical system knobs where one exists (published-figures.md §7a: memory
# bandwidth scaling 0.8, 10 µs p2p latency), otherwise round numbers. The prior also regularises the fit so
# that a family with few rows stays near physically sensible values.
COEFFICIENT_SPECS: tuple[CoefficientSpec, ...] = (
    CoefficientSpec(
        "hbm_efficiency",
        0.8,
        0.05,
        1.0,
        "fraction",
        "achieved share of peak HBM bandwidth when streaming weights and KV",
    ),
    CoefficientSpec(
        "gemm_efficiency",
        0.6,
        0.02,
        1.0,
        "fraction",
        "achieved share of dense tensor peak in large GEMMs",
        # A large GEMM cannot beat the peak and rarely runs under half of it: fits under the weak prior put it at
        # 0.43 (sm100), 0.50 (sm103) and 0.69 (sm90). Held there so that the models of a family whose prefill
        # time per-layer MoE and MLA costs can absorb do not decide it alone: without Qwen3-32B, sm90's fit ran
        # it to its bound of 1.0 and its held-out TTFT came out 22 % fast (docs/accuracy.md).
        prior_log_sigma=0.3,
    ),
    CoefficientSpec(
        "attention_efficiency",
        0.4,
        0.02,
        1.0,
        "fraction",
        "achieved share of BF16 peak in prefill attention",
    ),
    CoefficientSpec(
        "decode_attention_efficiency",
        0.4,
        0.02,
        1.0,
        "fraction",
        "achieved share of BF16 peak in decode attention (one query row per request, or a verify pass's drafts)",
    ),
    CoefficientSpec(
        "gemm_half_width",
        128.0,
        0.0,
        8192.0,
        "columns",
        "per-GPU output width at which a GEMM reaches half its large-GEMM rate (thin TP/EP shards waste tiles)",
    ),
    CoefficientSpec(
        "moe_penalty",
        1.5,
        1.0,
        20.0,
        "multiplier",
        "grouped-GEMM time relative to a dense GEMM of the same bytes/FLOPs (routing, permutation, imbalance)",
    ),
    CoefficientSpec(
        "layer_overhead_us",
        20.0,
        0.0,
        500.0,
        "µs",
        "fixed cost per transformer layer per decode forward (launches, norms, small kernels)",
        # A CUDA-graph decode layer runs 10–15 kernels, each boundary costing 1–2 µs of launch gap and tail:
        # 10–30 µs. Held firmly there so that the MoE and MLA models of a family cannot hand their own extra
        # fixed time to every dense layer (without Qwen3-32B, sm90's fit put 51 µs here).
        prior_log_sigma=0.5,
    ),
    CoefficientSpec(
        "moe_layer_overhead_us",
        20.0,
        0.0,
        1000.0,
        "µs",
        "extra fixed cost per MoE layer per decode forward (router, top-k, token permutation kernels)",
    ),
    CoefficientSpec(
        "prefill_layer_overhead_us",
        50.0,
        0.0,
        5000.0,
        "µs",
        "fixed cost per transformer layer per prefill forward",
    ),
    CoefficientSpec(
        "moe_prefill_layer_overhead_us",
        500.0,
        0.0,
        20000.0,
        "µs",
        "extra fixed cost per MoE layer per prefill forward (routing, token permutation, host synchronisation)",
    ),
    CoefficientSpec(
        "mla_prefill_layer_overhead_us",
        200.0,
        0.0,
        20000.0,
        "µs",
        "extra fixed cost per MLA layer per prefill forward (latent up-projection of the prefix, split RoPE path)",
    ),
    CoefficientSpec(
        "step_overhead_ms",
        1.5,
        0.0,
        50.0,
        "ms",
        "fixed cost per scheduler iteration (scheduling, sampling, graph replay)",
        # The fits with a weak prior put it at 1.4–1.9 ms, and the rows barely tell it from the per-request and
        # per-layer costs. Held there so that per-layer costs of the models left in a family cannot move into
        # every forward: without Qwen3-32B, sm90's fit put 3.3 ms here.
        prior_log_sigma=0.5,
    ),
    CoefficientSpec(
        "dp_sync_us",
        20.0,
        0.0,
        1000.0,
        "µs",
        "attention-DP only: per scheduler iteration and rank beyond the first, the host all-gather of every "
        "rank's batch (SGLang's MLP sync)",
    ),
    CoefficientSpec(
        "request_overhead_us",
        10.0,
        0.0,
        500.0,
        "µs",
        "cost per running request per decode step on one attention rank (batch bookkeeping, sampling)",
    ),
    CoefficientSpec(
        "collective_latency_us",
        10.0,
        0.0,
        500.0,
        "µs",
        "latency of one collective (all-reduce, all-gather, all-to-all) inside the scale-up domain",
        # Fits under the weak prior put it at 5.7–8.7 µs, around AIConfigurator's 10 µs. Held there: without
        # Qwen3-32B, whose 64 layers all-reduce twice per forward, sm90's fit (given a firm GEMM efficiency) put
        # 17.9 µs here.
        prior_log_sigma=0.4,
    ),
    CoefficientSpec(
        "nccl_latency_us",
        20.0,
        0.0,
        500.0,
        "µs",
        "latency of one all-reduce that SGLang's custom all-reduce kernel cannot take (a group of more than 8 "
        "GPUs, or one spanning nodes): NCCL's",
    ),
    CoefficientSpec(
        "link_efficiency",
        0.7,
        0.05,
        1.0,
        "fraction",
        "achieved share of NVLink / NIC bandwidth in all-reduces, all-gathers and transfers, and in an all-to-all "
        "across a network",
    ),
    CoefficientSpec(
        "all_to_all_efficiency",
        0.25,
        0.02,
        1.0,
        "fraction",
        "achieved share of NVLink bandwidth in an expert all-to-all (DeepEP dispatch and combine)",
        # The families with many expert-parallel rows fit a quarter of the link under the weak prior (sm100
        # 0.25, sm103 0.23: DeepEP's per-token routing work, not the wire, sets the pace); sm90's three runs of
        # one DEP8 deployment alone put it at 0.037. Held at what the well-measured families say.
        prior_log_sigma=0.5,
    ),
    CoefficientSpec(
        "ttft_overhead_ms",
        30.0,
        0.0,
        2000.0,
        "ms",
        "per-request time outside the GPU queue: HTTP, tokenisation, first detokenisation",
    ),
    CoefficientSpec(
        "wave_sync",
        0.5,
        0.0,
        1.0,
        "fraction",
        "closed-loop benchmarks of aggregated fleets: share of clients arriving in waves when output lengths vary "
        "with CV 0.1",
    ),
    CoefficientSpec(
        "pd_wave_sync",
        0.5,
        0.0,
        1.0,
        "fraction",
        "closed-loop benchmarks of P/D fleets: share of clients arriving in waves when output lengths vary with CV 0.1",
    ),
    CoefficientSpec(
        "wave_breakup",
        2.0,
        0.0,
        10.0,
        "exponent",
        "how fast prefill load breaks waves apart: effective sync = wave_sync × (1 − prefill utilisation)^wave_breakup",
    ),
    CoefficientSpec(
        "pd_handoff_ms",
        20.0,
        0.0,
        2000.0,
        "ms",
        "P/D only: bootstrap and KV-transfer setup per request, beyond the bytes on the wire",
    ),
)
SPEC_BY_NAME = {spec.name: spec for spec in COEFFICIENT_SPECS}


@dataclass(frozen=True)
class Coefficients:
    hbm_efficiency: float
    gemm_efficiency: float
    attention_efficiency: float
    decode_attention_efficiency: float
    gemm_half_width: float
    moe_penalty: float
    layer_overhead_us: float
    moe_layer_overhead_us: float
    prefill_layer_overhead_us: float
    moe_prefill_layer_overhead_us: float
    mla_prefill_layer_overhead_us: float
    step_overhead_ms: float
    dp_sync_us: float
    request_overhead_us: float
    collective_latency_us: float
    nccl_latency_us: float
    link_efficiency: float
    all_to_all_efficiency: float
    ttft_overhead_ms: float
    wave_sync: float
    pd_wave_sync: float
    wave_breakup: float
    pd_handoff_ms: float

    @staticmethod
    def priors() -> Coefficients:
        return Coefficients(**{spec.name: spec.prior for spec in COEFFICIENT_SPECS})

    def as_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}

    @staticmethod
    def from_dict(values: dict[str, Any]) -> Coefficients:
        """Missing names take their prior; values are clamped into their physical bounds."""
        merged = {spec.name: float(values.get(spec.name, spec.prior)) for spec in COEFFICIENT_SPECS}
        return Coefficients(**{name: clamp_to_bounds(name, value) for name, value in merged.items()})


def clamp_to_bounds(name: str, value: float) -> float:
    spec = SPEC_BY_NAME[name]
    if math.isnan(value):
        return spec.prior
    return min(spec.upper, max(spec.lower, value))


@dataclass(frozen=True)
class FamilyFit:
    """Coefficients of one GPU family (keyed by compute architecture) and how well they fit."""

    coefficients: Coefficients
    rows: int
    # Robust one-sigma of log(predicted / measured): a relative error (held-out when `frontier calibrate`
    # ships it, in-sample for quick fits).
    ttft_sigma: float
    tpot_sigma: float
    # The 90th percentile of log(measured / predicted) on held-out rows: how far the model under-predicts
    # nine rows in ten of a model it never saw. The planner's margin covers it. None: not measured (then the
    # margin assumes an unbiased normal error of the sigma above).
    ttft_underprediction_q90: float | None = None
    tpot_underprediction_q90: float | None = None

    @property
    def uncertainty(self) -> float:
        return max(self.ttft_sigma, self.tpot_sigma)


# A family without measurements runs on the priors; we claim no better than ±50 % for it.
UNFITTED_SIGMA = 0.5


@dataclass(frozen=True)
class Calibration:
    families: tuple[tuple[str, FamilyFit], ...]
    # Where the numbers came from: data file digest, row counts, backend filter (reproducibility).
    provenance: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def uncalibrated() -> Calibration:
        return Calibration(families=())

    def family(self, arch: str) -> FamilyFit:
        found = dict(self.families).get(arch)
        if found is not None:
            return found
        return FamilyFit(Coefficients.priors(), rows=0, ttft_sigma=UNFITTED_SIGMA, tpot_sigma=UNFITTED_SIGMA)

    def with_family(self, arch: str, fit: FamilyFit) -> Calibration:
        others = tuple((a, f) for a, f in self.families if a != arch)
        return replace(self, families=tuple(sorted((*others, (arch, fit)))))

    def to_data(self) -> dict[str, Any]:
        return {
            "provenance": dict(self.provenance),
            "families": {
                arch: {
                    "rows": fit.rows,
                    "ttft_sigma": round(fit.ttft_sigma, 6),
                    "tpot_sigma": round(fit.tpot_sigma, 6),
                    **_optional("ttft_underprediction_q90", fit.ttft_underprediction_q90),
                    **_optional("tpot_underprediction_q90", fit.tpot_underprediction_q90),
                    "coefficients": {k: _round_significant(v) for k, v in fit.coefficients.as_dict().items()},
                }
                for arch, fit in self.families
            },
        }

    @staticmethod
    def from_data(data: Any) -> Calibration:
        if not isinstance(data, dict):
            raise ValueError("calibration data must be a mapping")
        families_raw = data.get("families") or {}
        if not isinstance(families_raw, dict):
            raise ValueError("calibration 'families' must be a mapping of GPU arch to coefficients")
        families = []
        for arch, entry in sorted(families_raw.items()):
            families.append(
                (
                    str(arch),
                    FamilyFit(
                        coefficients=Coefficients.from_dict(dict(entry.get("coefficients") or {})),
                        rows=int(entry.get("rows", 0)),
                        ttft_sigma=float(entry.get("ttft_sigma", UNFITTED_SIGMA)),
                        tpot_sigma=float(entry.get("tpot_sigma", UNFITTED_SIGMA)),
                        ttft_underprediction_q90=_float_or_none(entry.get("ttft_underprediction_q90")),
                        tpot_underprediction_q90=_float_or_none(entry.get("tpot_underprediction_q90")),
                    ),
                )
            )
        provenance = data.get("provenance") or {}
        return Calibration(
            families=tuple(families), provenance=tuple(sorted((str(k), str(v)) for k, v in provenance.items()))
        )


def _optional(name: str, value: float | None) -> dict[str, float]:
    return {} if value is None else {name: round(value, 6)}


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _round_significant(value: float, digits: int = 6) -> float:
    """Round for a stable, diff-friendly file; six significant digits is far below the fit's own error."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def render_calibration_yaml(calibration: Calibration, header: str) -> str:
    body = yaml.safe_dump(calibration.to_data(), sort_keys=True, default_flow_style=False, allow_unicode=True)
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + body
