"""Weight and KV-cache number formats: sizes, where they run, how SGLang is told, and what they cost in quality.

Entries live in ``catalog/data/quantization.yaml`` with their sources. The quality-loss figures feed
``spec.search.maxQualityLoss``: the planner drops every configuration whose format loses more than the budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from frontier_operator.catalog.data_files import load_data_file
from frontier_operator.catalog.gpus import KNOWN_ARCHS, TFLOPS_FORMATS, build_name_index, normalize_name
from frontier_operator.catalog.types import GpuSpec, KvCacheFormat, QuantFormat

ExecutionMode = Literal["native", "weight-only", "unsupported"]

_Format = TypeVar("_Format", QuantFormat, KvCacheFormat)

_BITS_PER_BYTE = 8


def normalize_model_name(model_name: str) -> str:
    """Key for per-model overrides: "deepseek-ai/DeepSeek-R1" and "deepseek-r1" are the same model."""
    return normalize_name(model_name.rsplit("/", 1)[-1])


def _archs(entry: Mapping[str, Any], key: str, owner: str) -> frozenset[str]:
    archs = frozenset(str(arch) for arch in entry[key])
    unknown = archs - KNOWN_ARCHS
    if unknown:
        raise ValueError(f"{owner}: {key} has unknown archs {sorted(unknown)} (known: {sorted(KNOWN_ARCHS)})")
    return archs


def _loss(value: Any, owner: str) -> float:
    loss = float(value)
    if not 0.0 <= loss <= 100.0:
        raise ValueError(f"{owner}: quality loss {loss} % is outside 0-100")
    return loss


def _quant_format_from_entry(entry: Mapping[str, Any]) -> QuantFormat:
    name = str(entry["name"])
    owner = f"quantization format {name}"
    native_archs = _archs(entry, "native_archs", owner)
    weight_only_archs = _archs(entry, "weight_only_archs", owner)
    if native_archs & weight_only_archs:
        raise ValueError(f"{owner}: archs {sorted(native_archs & weight_only_archs)} are both native and weight-only")
    compute_format = str(entry["compute_format"])
    if compute_format not in TFLOPS_FORMATS:
        raise ValueError(f"{owner}: compute_format {compute_format!r} is not one of {sorted(TFLOPS_FORMATS)}")
    overrides: dict[str, float] = {}
    override_sources: list[str] = []
    for override in entry.get("model_overrides", ()):
        loss = _loss(override["quality_loss_pct"], owner)
        for model in override["models"]:
            overrides[normalize_model_name(str(model))] = loss
        override_sources.append(f"{', '.join(override['models'])}: {override['source']}")
    online = entry["sglang_online_method"]
    return QuantFormat(
        name=name,
        description=str(entry["description"]),
        weight_bytes_per_param=float(entry["weight_bits_per_param"]) / _BITS_PER_BYTE,
        compute_format=compute_format,
        native_archs=native_archs,
        weight_only_archs=weight_only_archs,
        sglang_online_method=None if online is None else str(online),
        moe_only=bool(entry["moe_only"]),
        typical_quality_loss_pct=_loss(entry["typical_quality_loss_pct"], owner),
        sources=tuple(str(source) for source in entry["sources"]) + tuple(override_sources),
        aliases=tuple(str(alias) for alias in entry.get("aliases", ())),
        quality_loss_by_model=tuple(overrides.items()),
    )


def _kv_format_from_entry(entry: Mapping[str, Any]) -> KvCacheFormat:
    name = str(entry["name"])
    owner = f"KV-cache format {name}"
    return KvCacheFormat(
        name=name,
        sglang_value=str(entry["sglang_value"]),
        bytes_per_element=float(entry["bytes_per_element"]),
        native_archs=_archs(entry, "native_archs", owner),
        typical_quality_loss_pct=_loss(entry["typical_quality_loss_pct"], owner),
        sources=tuple(str(source) for source in entry["sources"]),
        aliases=tuple(str(alias) for alias in entry.get("aliases", ())),
    )


@cache
def _raw() -> Mapping[str, Any]:
    raw: Mapping[str, Any] = load_data_file("quantization.yaml")
    return raw


def _by_name(entries: Iterable[_Format], kind: str) -> Mapping[str, _Format]:
    by_name: dict[str, _Format] = {}
    for entry in entries:
        if entry.name in by_name:
            raise ValueError(f"{kind} {entry.name} is listed twice in quantization.yaml")
        by_name[entry.name] = entry
    return MappingProxyType(by_name)


@cache
def load_quant_formats() -> Mapping[str, QuantFormat]:
    """Weight formats by canonical name, in data-file order."""
    return _by_name((_quant_format_from_entry(entry) for entry in _raw()["formats"]), "quantization format")


@cache
def load_kv_cache_formats() -> Mapping[str, KvCacheFormat]:
    """KV-cache formats by canonical name, in data-file order."""
    return _by_name((_kv_format_from_entry(entry) for entry in _raw()["kv_cache_formats"]), "KV-cache format")


@cache
def _quant_name_index() -> Mapping[str, str]:
    return build_name_index(load_quant_formats(), "quantization format")


@cache
def _kv_name_index() -> Mapping[str, str]:
    return build_name_index(load_kv_cache_formats(), "KV-cache format")


def find_quant_format(name: str) -> QuantFormat | None:
    """The weight format called `name` or one of its aliases ("fp8_block", "awq", ...), else None."""
    canonical = _quant_name_index().get(normalize_name(name))
    return None if canonical is None else load_quant_formats()[canonical]


def find_kv_cache_format(name: str) -> KvCacheFormat | None:
    """The KV-cache format called `name` or one of its aliases ("auto" reads as bf16), else None."""
    canonical = _kv_name_index().get(normalize_name(name))
    return None if canonical is None else load_kv_cache_formats()[canonical]


def quality_loss_pct(format_name: str, model_name: str | None = None) -> float:
    """Expected accuracy loss (%) of serving `model_name` with weight format `format_name`.

    A measured per-model figure wins over the format's default. Raises KeyError for an unknown format,
    because guessing a loss for a format we know nothing about would defeat the quality budget.
    """
    fmt = find_quant_format(format_name)
    if fmt is None:
        raise KeyError(f"unknown quantization format {format_name!r}")
    if model_name is not None:
        measured = dict(fmt.quality_loss_by_model).get(normalize_model_name(model_name))
        if measured is not None:
            return measured
    return fmt.typical_quality_loss_pct


def kv_cache_quality_loss_pct(kv_format_name: str) -> float:
    """Expected accuracy loss (%) of a KV-cache format. Raises KeyError for an unknown format."""
    kv_format = find_kv_cache_format(kv_format_name)
    if kv_format is None:
        raise KeyError(f"unknown KV-cache format {kv_format_name!r}")
    return kv_format.typical_quality_loss_pct


def combined_quality_loss_pct(weight_format: str, kv_format: str, model_name: str | None = None) -> float:
    """Weight plus KV-cache loss: a deliberately pessimistic sum, compared against ``maxQualityLoss``.

    Published figures rarely isolate the two (NVIDIA's DeepSeek-R1 NVFP4 numbers include an FP8 KV cache),
    so adding them may count a KV loss twice; over-stating is the safe side for a quality budget.
    """
    return quality_loss_pct(weight_format, model_name) + kv_cache_quality_loss_pct(kv_format)


def execution_mode(fmt: QuantFormat, gpu: GpuSpec) -> ExecutionMode:
    """How `gpu` runs weight format `fmt` under SGLang: natively, dequantized to BF16 in the kernel, or not at all."""
    if gpu.arch in fmt.native_archs:
        return "native"
    if gpu.arch in fmt.weight_only_archs:
        return "weight-only"
    return "unsupported"


def kv_cache_supported(kv_format: KvCacheFormat, gpu: GpuSpec) -> bool:
    """Whether SGLang accepts this ``--kv-cache-dtype`` on `gpu`."""
    return gpu.arch in kv_format.native_archs
