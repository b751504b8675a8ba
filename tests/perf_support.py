"""Builders shared by the performance-model tests (tests/perf): catalog entries, small serving configurations."""

from __future__ import annotations

from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.models import find_model
from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.calibration import Calibration, Coefficients, FamilyFit
from frontier_operator.perf.silicon import SCHEMA_COLUMNS
from frontier_operator.perf.types import (
    LengthDistribution,
    MoeA2ABackend,
    Role,
    RoleDeployment,
    ServingConfig,
    Speculative,
    WorkerConfig,
    Workload,
)


def model(name: str) -> ModelArch:
    found = find_model(name)
    assert found is not None, name
    return found


def gpu(name: str) -> GpuSpec:
    found = find_gpu(name)
    assert found is not None, name
    return found


def worker(
    gpu_name: str,
    *,
    tp: int,
    weight_format: str = "fp8",
    kv: str = "bf16",
    max_running: int = 256,
    chunk: int = 8192,
    attention_dp: int = 1,
    ep: int = 1,
    speculative: Speculative | None = None,
    pp: int = 1,
) -> WorkerConfig:
    return WorkerConfig(
        gpu=gpu_name,
        gpus_per_node=gpu(gpu_name).gpus_per_node,
        weight_format=weight_format,
        kv_cache_format=kv,
        tp=tp,
        max_running_requests=max_running,
        chunked_prefill_size=chunk,
        pp=pp,
        attention_dp=attention_dp,
        ep=ep,
        moe_a2a_backend=MoeA2ABackend.DEEPEP if attention_dp > 1 and ep > 1 else MoeA2ABackend.NONE,
        speculative=speculative,
    )


def unified(model_name: str, w: WorkerConfig, replicas: int = 1) -> ServingConfig:
    return ServingConfig(model=model_name, roles=(RoleDeployment(Role.UNIFIED, w, replicas),))


def workload(rate: float, input_mean: float = 2000, output_mean: float = 500, kind: str = "chat") -> Workload:
    return Workload(
        request_rate_per_s=rate,
        input_tokens=LengthDistribution(mean=input_mean, cv=0.3),
        output_tokens=LengthDistribution(mean=output_mean, cv=0.3),
        kind=kind,
    )


def ideal_calibration() -> Calibration:
    """Every efficiency at 1 and every overhead at 0: the most optimistic coefficients the bounds allow."""
    values = Coefficients.priors().as_dict()
    for name in values:
        if name.endswith("efficiency"):
            values[name] = 1.0
        elif name.endswith(("_us", "_ms")) or name in ("gemm_half_width", "wave_sync", "pd_wave_sync"):
            values[name] = 0.0
    values["moe_penalty"] = 1.0
    return calibration_of(Coefficients.from_dict(values), "sm90", "sm100", "sm103", "gfx942", "gfx950")


def calibration_of(coefficients: Coefficients, *archs: str) -> Calibration:
    """`coefficients` for every family of `archs`, as a hand-made fit (no rows, no measured error)."""
    fit = FamilyFit(coefficients, rows=0, ttft_sigma=0.0, tpot_sigma=0.0)
    calibration = Calibration.uncalibrated()
    for arch in archs:
        calibration = calibration.with_family(arch, fit)
    return calibration


def silicon_row(**values: str) -> dict[str, str]:
    """A row of the silicon-measurements schema: `values`, every other column empty."""
    return dict.fromkeys(SCHEMA_COLUMNS, "") | values
