"""Resolve a worker's weight and KV-cache format names into the numbers the roofline needs.

A weight format decides two things per GEMM: how many bytes each parameter costs to stream from HBM and
which tensor-core rate the multiply runs at (FP4 on Blackwell, FP8, or BF16 when the GPU only dequantizes
the format inside the kernel). MoE-only formats (MXFP4) touch the routed experts alone; everything else
keeps the model's reference precision.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from frontier_operator.catalog.quantization import (
    execution_mode,
    find_kv_cache_format,
    find_quant_format,
    kv_cache_supported,
)
from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.errors import UnpredictableConfig

# Bytes per parameter of a model's reference release ("native_dtype" in the model catalog), used for the
# weights a MoE-only format leaves alone. Values as in catalog/data/quantization.yaml (bits incl. scales / 8).
_NATIVE_BYTES_PER_PARAM = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int4": 4.16 / 8,
    "mxfp4": 4.25 / 8,
    "nvfp4": 4.5 / 8,
}


@dataclass(frozen=True)
class WorkerFormats:
    """Per-parameter bytes and GEMM rates for the two weight groups, and KV bytes per element."""

    expert_bytes_per_param: float
    expert_compute: str
    dense_bytes_per_param: float
    dense_compute: str
    kv_bytes_per_element: float
    weight_only: bool
    # Module groups the format's checkpoint keeps in BF16 (`ModelArch.kept_in_bf16`): the memory fit counts them
    # at two bytes per parameter; the roofline streams them at the format's (docs/performance-model.md, Formats).
    bf16_modules: tuple[str, ...] = ()


def _peak(gpu: GpuSpec, number_format: str) -> float:
    peak = gpu.tflops(number_format)
    if peak is None or peak <= 0:
        raise UnpredictableConfig(f"{gpu.name} has no {number_format} tensor-core rate in the catalog")
    return peak


@cache
def resolve_formats(arch: ModelArch, gpu: GpuSpec, weight_format: str, kv_cache_format: str) -> WorkerFormats:
    """Raise UnpredictableConfig for unknown names or a format this GPU cannot run under SGLang."""
    quant = find_quant_format(weight_format)
    if quant is None:
        raise UnpredictableConfig(f"unknown weight format {weight_format!r}")
    mode = execution_mode(quant, gpu)
    if mode == "unsupported":
        raise UnpredictableConfig(f"weight format {quant.name} does not run on {gpu.name} ({gpu.arch})")
    kv = find_kv_cache_format(kv_cache_format)
    if kv is None:
        raise UnpredictableConfig(f"unknown KV-cache format {kv_cache_format!r}")
    if not kv_cache_supported(kv, gpu):
        raise UnpredictableConfig(f"KV-cache format {kv.name} does not run on {gpu.name} ({gpu.arch})")

    weight_only = mode == "weight-only"
    kept = _kept_in_bf16(arch, quant.name)
    quant_compute = "bf16" if weight_only else quant.compute_format
    _peak(gpu, quant_compute)
    if quant.moe_only and arch.is_moe:
        native = arch.native_dtype.lower()
        dense_bytes = _NATIVE_BYTES_PER_PARAM.get(native, 2.0)
        # The reference weights run at their own rate where the GPU has one, else at BF16.
        dense_compute = native if native in ("fp8", "fp4") and gpu.tflops(native) else "bf16"
        return WorkerFormats(
            expert_bytes_per_param=quant.weight_bytes_per_param,
            expert_compute=quant_compute,
            dense_bytes_per_param=dense_bytes,
            dense_compute=dense_compute,
            kv_bytes_per_element=kv.bytes_per_element,
            weight_only=weight_only,
            bf16_modules=kept,
        )
    return WorkerFormats(
        expert_bytes_per_param=quant.weight_bytes_per_param,
        expert_compute=quant_compute,
        dense_bytes_per_param=quant.weight_bytes_per_param,
        dense_compute=quant_compute,
        kv_bytes_per_element=kv.bytes_per_element,
        weight_only=weight_only,
        bf16_modules=kept,
    )


def _kept_in_bf16(arch: ModelArch, format_name: str) -> tuple[str, ...]:
    """The module groups the catalog says `arch`'s checkpoint of that format keeps in BF16 (listed under any
    of the format's names)."""
    for listed, groups in arch.kept_in_bf16:
        found = find_quant_format(listed)
        if found is not None and found.name == format_name:
            return groups
    return ()


def peak_tflops(gpu: GpuSpec, number_format: str) -> float:
    return _peak(gpu, number_format)
