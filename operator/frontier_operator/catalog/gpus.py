"""The GPU catalog: accelerators the planner may place SGLang workers on.

Entries live in ``catalog/data/gpus.yaml`` with the source of every figure; this module only turns that
plain data into frozen `GpuSpec` values and answers look-ups by name or alias.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, Protocol

from frontier_operator.catalog.data_files import load_data_file
from frontier_operator.catalog.types import GpuSpec, Vendor

# Compute architectures as SGLang's capability checks name them. Formats and GPUs may only use these,
# so that a typo in a data file fails loudly instead of silently making a format "unsupported".
KNOWN_ARCHS: frozenset[str] = frozenset({"sm80", "sm89", "sm90", "sm100", "sm103", "sm120", "gfx942", "gfx950"})

# Number formats the tensor cores may execute natively (`GpuSpec.native_formats`).
KNOWN_NUMBER_FORMATS: frozenset[str] = frozenset({"bf16", "fp16", "fp8", "mxfp8", "mxfp6", "mxfp4", "nvfp4"})

# Keys of `GpuSpec.dense_tflops`.
TFLOPS_FORMATS: frozenset[str] = frozenset({"bf16", "fp8", "fp4"})


def normalize_name(name: str) -> str:
    """Spelling-insensitive key: case, surrounding blanks, and '_' / ' ' versus '-' do not matter."""
    return "-".join(name.strip().lower().replace("_", "-").split())


def _gpu_from_entry(entry: Mapping[str, Any]) -> GpuSpec:
    name = str(entry["name"])
    arch = str(entry["arch"])
    if arch not in KNOWN_ARCHS:
        raise ValueError(f"GPU {name}: unknown arch {arch!r} (known: {sorted(KNOWN_ARCHS)})")
    tflops = {str(fmt): float(value) for fmt, value in dict(entry["dense_tflops"]).items()}
    unknown_tflops = set(tflops) - TFLOPS_FORMATS
    if unknown_tflops:
        raise ValueError(f"GPU {name}: dense_tflops has unknown formats {sorted(unknown_tflops)}")
    native_formats = frozenset(str(fmt) for fmt in entry["native_formats"])
    unknown_formats = native_formats - KNOWN_NUMBER_FORMATS
    if unknown_formats:
        raise ValueError(f"GPU {name}: native_formats has unknown formats {sorted(unknown_formats)}")
    return GpuSpec(
        name=name,
        vendor=Vendor(str(entry["vendor"])),
        arch=arch,
        memory_gb=float(entry["memory_gb"]),
        hbm_bandwidth_tbs=float(entry["hbm_bandwidth_tbs"]),
        dense_tflops=tuple(tflops.items()),
        scale_up_domain=int(entry["scale_up_domain"]),
        scale_up_bandwidth_gbs=float(entry["scale_up_bandwidth_gbs"]),
        scale_out_bandwidth_gbs=float(entry["scale_out_bandwidth_gbs"]),
        gpus_per_node=int(entry["gpus_per_node"]),
        default_price_per_hour=float(entry["default_price_per_hour"]),
        native_formats=native_formats,
        aliases=tuple(str(alias) for alias in entry.get("aliases", ())),
        sources=tuple(str(source) for source in entry["sources"]),
    )


class _HasAliases(Protocol):
    @property
    def aliases(self) -> tuple[str, ...]: ...


def build_name_index(entries: Mapping[str, _HasAliases], kind: str) -> Mapping[str, str]:
    """Map every normalised name and alias to its canonical name; two entries may not share a spelling."""
    index: dict[str, str] = {}
    for canonical, entry in entries.items():
        for spelling in (canonical, *entry.aliases):
            key = normalize_name(spelling)
            owner = index.setdefault(key, canonical)
            if owner != canonical:
                raise ValueError(f"{kind} spelling {spelling!r} names both {owner} and {canonical}")
    return MappingProxyType(index)


@cache
def load_gpu_catalog() -> Mapping[str, GpuSpec]:
    """All GPUs by canonical name, in data-file order (read once, then shared: the values are immutable)."""
    raw = load_data_file("gpus.yaml")
    gpus: dict[str, GpuSpec] = {}
    for entry in raw["gpus"]:
        gpu = _gpu_from_entry(entry)
        if gpu.name in gpus:
            raise ValueError(f"GPU {gpu.name} is listed twice in gpus.yaml")
        gpus[gpu.name] = gpu
    return MappingProxyType(gpus)


@cache
def _gpu_name_index() -> Mapping[str, str]:
    return build_name_index(load_gpu_catalog(), "GPU")


def find_gpu(name: str) -> GpuSpec | None:
    """The GPU called `name` or one of its aliases (case- and separator-insensitive), else None."""
    canonical = _gpu_name_index().get(normalize_name(name))
    return None if canonical is None else load_gpu_catalog()[canonical]


def gpu_names() -> list[str]:
    """Canonical GPU names in catalog order."""
    return list(load_gpu_catalog())
