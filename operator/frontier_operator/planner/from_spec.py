"""`FrontierTarget.spec` → `PlanRequest`: resolve names against the catalog and turn units into numbers.

Pure: a ConfigMap-held `config.json` is read by the caller (the handler or the CLI) and passed in as
`model_config`; everything else comes from the spec and the shipped catalog.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from frontier_operator.api.spec import ArrivalPattern, FrontierTargetSpec, LengthSpec
from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.hf_config import model_from_hf_config
from frontier_operator.catalog.models import find_model
from frontier_operator.catalog.quantization import (
    find_kv_cache_format,
    find_quant_format,
    load_kv_cache_formats,
    load_quant_formats,
)
from frontier_operator.catalog.types import KvCacheFormat, ModelArch, QuantFormat
from frontier_operator.perf.types import LengthDistribution, Workload
from frontier_operator.planner.types import (
    Disaggregation,
    GpuPool,
    Objective,
    PlanRequest,
    SearchSpace,
    SloBound,
    SloMetric,
    SpeculativeMode,
)

# Inter-arrival coefficient of variation per arrival pattern (the spec documents "bursty" as CV 2).
ARRIVAL_CV = {ArrivalPattern.POISSON: 1.0, ArrivalPattern.BURSTY: 2.0}
# The spec's default longest request: this many times its p90 (or mean), within the model's context.
DEFAULT_MAX_OVER_P90 = 4
# z-score of the 90th percentile of a normal distribution.
_Z90 = 1.2815515655446004


class SpecResolutionError(ValueError):
    """The spec names something the catalog does not know; `path` says where."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


def lognormal_cv(mean: float, p90: float | None) -> float:
    """Coefficient of variation of the log-normal whose mean and 90th percentile are given.

    Token lengths are right-skewed; a log-normal with median below the mean matches them. Solving
    p90 = mean·exp(z·σ − σ²/2) for σ takes the smaller root; beyond p90 ≈ 2.27 × mean no log-normal fits,
    so σ saturates at z (CV ≈ 2.1), the most skewed shape the two numbers allow.
    """
    if p90 is None or p90 <= mean or mean <= 0:
        return 0.0
    ratio_log = math.log(p90 / mean)
    discriminant = _Z90**2 - 2 * ratio_log
    sigma = _Z90 - math.sqrt(discriminant) if discriminant > 0 else _Z90
    return math.sqrt(math.expm1(sigma**2))


def _lengths(spec: LengthSpec, ceiling: int) -> LengthDistribution:
    top = spec.p90 if spec.p90 is not None else spec.mean
    longest = int(spec.max) if spec.max is not None else max(int(top), min(DEFAULT_MAX_OVER_P90 * int(top), ceiling))
    return LengthDistribution(
        mean=float(spec.mean),
        cv=lognormal_cv(float(spec.mean), None if spec.p90 is None else float(spec.p90)),
        max=longest,
    )


def resolve_model(spec: FrontierTargetSpec, model_config: Mapping[str, Any] | None = None) -> ModelArch:
    """The catalog entry, or the architecture read from an inline / ConfigMap `config.json`."""
    source = spec.model.config
    config = model_config if model_config is not None else (source.inline if source is not None else None)
    if source is not None and config is None:
        raise SpecResolutionError("spec.model.config.configMapRef", "the ConfigMap's config.json was not provided")
    if config is not None:
        arch = model_from_hf_config(config, spec.model.name, spec.model.name if "/" in spec.model.name else "")
    else:
        found = find_model(spec.model.name)
        if found is None:
            raise SpecResolutionError(
                "spec.model.name", f"{spec.model.name!r} is not in the catalog; give its config.json"
            )
        arch = found
    if spec.model.checkpoints:
        # The spec's checkpoints extend (and override) the catalog's. What the catalog knows a checkpoint keeps in
        # BF16 is about that checkpoint: a replaced one is taken as quantized throughout.
        given = {fmt.value: repo for fmt, repo in spec.model.checkpoints.items()}
        merged = dict(arch.checkpoints) | given
        kept = tuple(
            (fmt, groups)
            for fmt, groups in arch.kept_in_bf16
            if given.get(fmt, "").lower() in ("", (arch.checkpoint_for(fmt) or "").lower())
        )
        arch = replace(arch, checkpoints=tuple(merged.items()), kept_in_bf16=kept)
    return arch


def _pools(spec: FrontierTargetSpec) -> tuple[GpuPool, ...]:
    pools = []
    for index, pool in enumerate(spec.hardware.pools):
        gpu = find_gpu(pool.gpu)
        if gpu is None:
            raise SpecResolutionError(f"spec.hardware.pools[{index}].gpu", f"{pool.gpu!r} is not in the GPU catalog")
        pools.append(
            GpuPool(
                name=pool.name,
                gpu=gpu,
                gpus_per_node=pool.gpus_per_node or gpu.gpus_per_node,
                price_per_gpu_hour=float(pool.price_per_gpu_hour)
                if pool.price_per_gpu_hour is not None
                else gpu.default_price_per_hour,
                max_gpus=pool.max_gpus,
                rdma=pool.rdma.enabled,
            )
        )
    return tuple(pools)


def _weight_formats(names: list[str]) -> tuple[QuantFormat, ...]:
    formats: list[QuantFormat] = []
    for index, name in enumerate(names):
        fmt = find_quant_format(name)
        if fmt is None:
            raise SpecResolutionError(f"spec.search.quantizations[{index}]", f"{name!r} is not a known weight format")
        if fmt not in formats:
            formats.append(fmt)
    return tuple(formats)


def _kv_formats(names: list[str]) -> tuple[KvCacheFormat, ...]:
    formats: list[KvCacheFormat] = []
    for index, name in enumerate(names):
        fmt = find_kv_cache_format(name)
        if fmt is None:
            raise SpecResolutionError(f"spec.search.kvCacheDtypes[{index}]", f"{name!r} is not a known KV-cache format")
        if fmt not in formats:  # "auto" and "bf16" are one format
            formats.append(fmt)
    return tuple(formats)


def plan_request_from_spec(
    spec: FrontierTargetSpec,
    *,
    model_config: Mapping[str, Any] | None = None,
    calibration_confidence: float = 0.0,
) -> PlanRequest:
    """Everything the planner needs from a validated spec; raises `SpecResolutionError` for unknown names."""
    arch = resolve_model(spec, model_config)
    workload_spec = spec.workload
    output = _lengths(workload_spec.output_tokens, arch.max_context)
    output_room = arch.max_context - (output.max or 0)
    inputs = _lengths(workload_spec.input_tokens, max(output_room, 1))
    workload = Workload(
        request_rate_per_s=float(workload_spec.request_rate),
        input_tokens=inputs,
        output_tokens=output,
        prefix_cache_hit_rate=float(workload_spec.prefix_cache_hit_rate),
        kind=workload_spec.kind.value,
        arrival_cv=ARRIVAL_CV[workload_spec.arrival],
    )
    slos = tuple(
        SloBound(SloMetric(metric), percentile, float(limit)) for metric, percentile, limit in spec.slo.objectives()
    )
    search = spec.search
    allowed = _weight_formats([fmt.value for fmt in search.quantizations])
    allowed_kv = _kv_formats([fmt.value for fmt in search.kv_cache_dtypes])
    draft = spec.model.draft_model
    space = SearchSpace(
        quantizations=allowed,
        kv_cache_formats=allowed_kv,
        max_quality_loss_pct=search.max_quality_loss.percent,
        disaggregation=Disaggregation(search.disaggregation.value),
        speculative=SpeculativeMode(search.speculative.value),
        max_tp=search.parallelism.max_tp,
        max_ep=search.parallelism.max_ep,
        attention_dp=search.parallelism.attention_dp,
        prefill_context_parallel=search.parallelism.prefill_context_parallel,
        multi_node=search.parallelism.multi_node,
        eagle3_draft_model=draft.path if draft is not None else None,
        fallback_quantizations=tuple(fmt for fmt in load_quant_formats().values() if fmt not in allowed),
        fallback_kv_cache_formats=tuple(fmt for fmt in load_kv_cache_formats().values() if fmt not in allowed_kv),
    )
    minimum = spec.slo.min_output_throughput
    return PlanRequest(
        arch=arch,
        workload=workload,
        slos=slos,
        pools=_pools(spec),
        search=space,
        objective=Objective(spec.objective.value),
        min_output_tokens_per_s=float(minimum) if minimum is not None else None,
        calibration_confidence=calibration_confidence,
    )
