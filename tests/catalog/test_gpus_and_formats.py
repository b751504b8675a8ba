"""The GPU and number-format catalogs: data sanity, look-ups, where formats run, and quality-loss figures."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from frontier_operator.catalog.data_files import load_data_file
from frontier_operator.catalog.gpus import (
    KNOWN_ARCHS,
    _gpu_from_entry,
    build_name_index,
    find_gpu,
    gpu_names,
    load_gpu_catalog,
)
from frontier_operator.catalog.quantization import (
    _quant_format_from_entry,
    combined_quality_loss_pct,
    execution_mode,
    find_kv_cache_format,
    find_quant_format,
    kv_cache_quality_loss_pct,
    kv_cache_supported,
    load_kv_cache_formats,
    load_quant_formats,
    quality_loss_pct,
)
from frontier_operator.catalog.types import GpuSpec, QuantFormat, Vendor

SILICON_CSV = Path("/work/shared/data/silicon/silicon_measurements.csv")
SILICON_SYSTEMS = {
    "h100_sxm": "H100",
    "h200_sxm": "H200",
    "b200_sxm": "B200",
    "b300_sxm": "B300",
    "gb200": "GB200",
    "gb300": "GB300",
}

# SGLang 0.5.23 `--quantization` and `--kv-cache-dtype` choices (docs/reference/sglang-0.5.23-flags.tsv).
SGLANG_QUANTIZATION_CHOICES = {
    "awq",
    "fp8",
    "mxfp8",
    "gptq",
    "gptq_marlin",
    "awq_marlin",
    "bitsandbytes",
    "gguf",
    "modelopt",
    "modelopt_fp8",
    "modelopt_fp4",
    "nvfp4_online",
    "modelopt_mixed",
    "petit_nvfp4",
    "w8a8_int8",
    "w8a8_fp8",
    "moe_wna16",
    "w4afp8",
    "mxfp4",
    "auto-round",
    "auto-round-int8",
    "compressed-tensors",
    "modelslim",
    "mxfp_w4a8",
    "quark",
    "quark_int4fp8_moe",
    "quark_mxfp4",
    "mlx_q4",
    "mlx_q8",
    "unquant",
    "humming",
}
SGLANG_KV_CACHE_CHOICES = {"auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"}


def gpu(name: str) -> GpuSpec:
    found = find_gpu(name)
    assert found is not None, name
    return found


def fmt(name: str) -> QuantFormat:
    found = find_quant_format(name)
    assert found is not None, name
    return found


# ------------------------------------------------------------------------------------------------ GPUs


def test_catalog_holds_the_required_gpus_in_file_order() -> None:
    assert gpu_names() == list(load_gpu_catalog())
    assert {"H100", "H200", "B200", "B300", "GB200", "GB300", "MI300X", "MI355X"} <= set(gpu_names())


@pytest.mark.parametrize("name", list(load_gpu_catalog()))
def test_every_gpu_has_sane_figures(name: str) -> None:
    spec = load_gpu_catalog()[name]
    assert 40 <= spec.memory_gb <= 400
    assert 1 <= spec.hbm_bandwidth_tbs <= 20
    assert spec.arch in KNOWN_ARCHS
    assert spec.vendor is (Vendor.AMD if spec.arch.startswith("gfx") else Vendor.NVIDIA)
    bf16, fp8, fp4 = spec.tflops("bf16"), spec.tflops("fp8"), spec.tflops("fp4")
    assert bf16 is not None and bf16 > 0
    assert fp8 is not None and fp8 >= bf16
    if fp4 is not None:
        assert fp4 >= fp8
        assert {"mxfp4"} <= spec.native_formats
    assert {"bf16", "fp8"} <= spec.native_formats
    assert spec.scale_up_domain in (8, 72)
    assert spec.scale_up_domain % spec.gpus_per_node == 0
    assert spec.scale_up_bandwidth_gbs > spec.scale_out_bandwidth_gbs > 0
    assert 0.5 < spec.default_price_per_hour < 10
    assert spec.sources and all(source.strip() for source in spec.sources)


def test_published_figures_spot_checks() -> None:
    # Values from /work/shared/data/published-figures.md §7a / §7b.
    h200 = gpu("H200")
    assert (h200.memory_gb, h200.hbm_bandwidth_tbs, h200.tflops("fp8")) == (141, 4.8, 1979)
    assert h200.default_price_per_hour == pytest.approx(1.74)
    assert gpu("B300").tflops("fp4") == 13500
    assert gpu("MI355X").tflops("fp4") == 10066
    assert gpu("MI300X").tflops("fp4") is None
    assert gpu("H100").tflops("fp4") is None


def test_architectures_as_sglang_sees_them() -> None:
    arch = {name: gpu(name).arch for name in gpu_names()}
    assert arch["H100"] == arch["H200"] == "sm90"
    assert arch["B200"] == arch["GB200"] == "sm100"
    assert arch["B300"] == arch["GB300"] == "sm103"
    assert arch["MI300X"] == arch["MI325X"] == "gfx942"
    assert arch["MI355X"] == "gfx950"


def test_nvl72_trays_hold_four_gpus_and_hgx_boards_eight() -> None:
    for name in ("GB200", "GB300"):
        assert (gpu(name).gpus_per_node, gpu(name).scale_up_domain) == (4, 72)
    for name in ("H100", "H200", "B200", "B300", "MI300X", "MI355X"):
        assert (gpu(name).gpus_per_node, gpu(name).scale_up_domain) == (8, 8)


@pytest.mark.parametrize(("system", "expected"), sorted(SILICON_SYSTEMS.items()))
def test_silicon_measurement_system_names_resolve(system: str, expected: str) -> None:
    assert gpu(system).name == expected


def test_every_system_in_the_silicon_csv_resolves() -> None:
    if not SILICON_CSV.exists():
        pytest.skip(f"{SILICON_CSV} is not available here")
    with SILICON_CSV.open(newline="") as handle:
        systems = {row["system"] for row in csv.DictReader(handle)}
    assert systems, "the CSV has no rows"
    assert {system: gpu(system).name for system in systems} == {s: SILICON_SYSTEMS[s] for s in systems}


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("H200", "H200"),
        ("h200", "H200"),
        ("nvidia-h200", "H200"),
        ("H200-SXM", "H200"),
        ("h200 sxm", "H200"),
        (" NVIDIA_H200 ", "H200"),
        ("NVIDIA-H100-80GB-HBM3", "H100"),
        ("MI300X", "MI300X"),
        ("amd-mi300x", "MI300X"),
        ("AMD-Instinct-MI355X", "MI355X"),
        ("GB200-NVL72", "GB200"),
    ],
)
def test_natural_spellings_resolve(spelling: str, expected: str) -> None:
    assert gpu(spelling).name == expected


def test_every_alias_resolves_in_any_letter_case() -> None:
    for spec in load_gpu_catalog().values():
        for spelling in (spec.name, *spec.aliases):
            assert find_gpu(spelling.upper()) is spec
            assert find_gpu(spelling.lower()) is spec


@pytest.mark.parametrize("name", ["A100", "H900", "", "gb", "nvidia"])
def test_unknown_gpu_is_none(name: str) -> None:
    assert find_gpu(name) is None


def test_catalog_is_cached_and_read_only() -> None:
    catalog = load_gpu_catalog()
    assert load_gpu_catalog() is catalog
    with pytest.raises(TypeError):
        catalog["X"] = catalog["H100"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalog["H100"].memory_gb = 1  # type: ignore[misc]


def test_a_spelling_shared_by_two_entries_is_rejected() -> None:
    h100, h200 = gpu("H100"), gpu("H200")
    clash = dataclasses.replace(h200, aliases=("h100-sxm",))
    with pytest.raises(ValueError, match="names both"):
        build_name_index({"H100": h100, "H200": clash}, "GPU")


def _raw_gpu_entry(name: str) -> dict[str, Any]:
    return dict(next(entry for entry in load_data_file("gpus.yaml")["gpus"] if entry["name"] == name))


def test_gpu_loader_rejects_unknown_arch_and_formats() -> None:
    assert _gpu_from_entry(_raw_gpu_entry("H200")) == gpu("H200")
    with pytest.raises(ValueError, match="unknown arch"):
        _gpu_from_entry({**_raw_gpu_entry("H200"), "arch": "sm91"})
    with pytest.raises(ValueError, match="native_formats"):
        _gpu_from_entry({**_raw_gpu_entry("H200"), "native_formats": ["bf16", "int3"]})
    with pytest.raises(ValueError, match="dense_tflops"):
        _gpu_from_entry({**_raw_gpu_entry("H200"), "dense_tflops": {"bf16": 1, "tf32": 1}})


# ------------------------------------------------------------------------------------------------ weight formats


def test_required_weight_formats_exist() -> None:
    assert list(load_quant_formats()) == ["bf16", "fp8", "fp8-block", "mxfp4", "nvfp4", "w4a16"]


@pytest.mark.parametrize("gpu_name", ["B200", "GB200", "B300", "GB300"])
def test_nvfp4_is_native_on_blackwell(gpu_name: str) -> None:
    assert execution_mode(fmt("nvfp4"), gpu(gpu_name)) == "native"


@pytest.mark.parametrize("gpu_name", ["H100", "H200"])
def test_nvfp4_is_weight_only_on_hopper(gpu_name: str) -> None:
    assert execution_mode(fmt("nvfp4"), gpu(gpu_name)) == "weight-only"


@pytest.mark.parametrize("gpu_name", ["MI300X", "MI325X", "MI355X"])
def test_nvfp4_is_unsupported_on_amd(gpu_name: str) -> None:
    assert execution_mode(fmt("nvfp4"), gpu(gpu_name)) == "unsupported"


@pytest.mark.parametrize("gpu_name", ["H100", "H200", "B200", "GB300", "MI300X", "MI355X"])
def test_fp8_is_native_on_hopper_blackwell_and_cdna(gpu_name: str) -> None:
    assert execution_mode(fmt("fp8"), gpu(gpu_name)) == "native"
    assert execution_mode(fmt("fp8-block"), gpu(gpu_name)) == "native"


def test_mxfp4_is_moe_only_native_where_fp4_units_exist() -> None:
    mxfp4 = fmt("mxfp4")
    assert mxfp4.moe_only
    assert not any(f.moe_only for f in load_quant_formats().values() if f.name != "mxfp4")
    assert execution_mode(mxfp4, gpu("B200")) == "native"
    assert execution_mode(mxfp4, gpu("MI355X")) == "native"
    assert execution_mode(mxfp4, gpu("H200")) == "weight-only"
    assert execution_mode(mxfp4, gpu("MI300X")) == "weight-only"


def test_w4a16_is_weight_only_everywhere() -> None:
    w4a16 = fmt("w4a16")
    assert not w4a16.native_archs
    assert {execution_mode(w4a16, spec) for spec in load_gpu_catalog().values()} == {"weight-only"}


def test_bf16_runs_natively_everywhere() -> None:
    assert {execution_mode(fmt("bf16"), spec) for spec in load_gpu_catalog().values()} == {"native"}


def test_execution_mode_reads_the_gpu_arch_only() -> None:
    fake = dataclasses.replace(gpu("H200"), arch="sm120", name="RTX-PRO-6000")
    assert execution_mode(fmt("nvfp4"), fake) == "native"
    assert execution_mode(fmt("fp8-block"), fake) == "unsupported"


def test_native_formats_have_a_compute_rate_and_matching_tensor_cores() -> None:
    for quant in load_quant_formats().values():
        for spec in load_gpu_catalog().values():
            mode = execution_mode(quant, spec)
            if mode == "native":
                assert spec.tflops(quant.compute_format) is not None, (quant.name, spec.name)
            if mode == "weight-only":
                assert spec.tflops("bf16") is not None
    # A GPU whose tensor cores run a block-scaled FP4 format must run that weight format natively, and back.
    for format_name in ("nvfp4", "mxfp4"):
        for spec in load_gpu_catalog().values():
            assert (format_name in spec.native_formats) == (execution_mode(fmt(format_name), spec) == "native")


def test_amd_only_gets_formats_rocm_sglang_can_load() -> None:
    # ROCm accepts awq, fp8, compressed-tensors, w8a8_fp8, petit_nvfp4, quark*, mxfp4, mxfp8, auto-round*
    # (sglang-0.5.23.md §4.1); nvfp4 through petit covers dense linears only, so it stays off.
    rocm_loadable = {"bf16", "fp8", "fp8-block", "mxfp4", "w4a16"}
    for spec in load_gpu_catalog().values():
        if spec.vendor is Vendor.AMD:
            usable = {q.name for q in load_quant_formats().values() if execution_mode(q, spec) != "unsupported"}
            assert usable <= rocm_loadable, spec.name


def test_bytes_per_param_count_scale_overhead_and_are_ordered() -> None:
    size = {name: f.weight_bytes_per_param for name, f in load_quant_formats().items()}
    assert size["bf16"] == 2
    assert size["fp8"] == 1
    assert size["fp8-block"] == pytest.approx(8.002 / 8)
    assert size["nvfp4"] == pytest.approx(4.5 / 8)
    assert size["mxfp4"] == pytest.approx(4.25 / 8)
    assert size["w4a16"] == pytest.approx(0.52)
    assert size["bf16"] > size["fp8-block"] > size["fp8"] > size["nvfp4"] > size["mxfp4"] > 0.5
    assert size["nvfp4"] > size["w4a16"] > 0.5


def test_sglang_is_told_only_valid_quantization_methods() -> None:
    methods = {name: f.sglang_online_method for name, f in load_quant_formats().items()}
    assert methods == {"bf16": None, "fp8": "fp8", "fp8-block": None, "mxfp4": "mxfp4", "nvfp4": None, "w4a16": None}
    assert {m for m in methods.values() if m is not None} <= SGLANG_QUANTIZATION_CHOICES


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("FP8_BLOCK", "fp8-block"),
        ("fp8_block", "fp8-block"),
        ("modelopt_fp4", "nvfp4"),
        ("AWQ", "w4a16"),
        ("gptq", "w4a16"),
        ("bfloat16", "bf16"),
        ("NVFP4", "nvfp4"),
    ],
)
def test_weight_format_aliases(spelling: str, expected: str) -> None:
    assert fmt(spelling).name == expected


@pytest.mark.parametrize("name", ["int3", "fp6", "", "fp16"])
def test_unknown_weight_format_is_none(name: str) -> None:
    assert find_quant_format(name) is None


def test_format_loader_rejects_bad_data() -> None:
    raw = next(e for e in load_data_file("quantization.yaml")["formats"] if e["name"] == "nvfp4")
    assert _quant_format_from_entry(raw) == fmt("nvfp4")
    with pytest.raises(ValueError, match="unknown archs"):
        _quant_format_from_entry({**raw, "native_archs": ["sm100", "hopper"]})
    with pytest.raises(ValueError, match="both native and weight-only"):
        _quant_format_from_entry({**raw, "weight_only_archs": ["sm100"]})
    with pytest.raises(ValueError, match="compute_format"):
        _quant_format_from_entry({**raw, "compute_format": "int4"})
    with pytest.raises(ValueError, match="outside"):
        _quant_format_from_entry({**raw, "typical_quality_loss_pct": -1})


# ------------------------------------------------------------------------------------------------ KV cache


def test_kv_cache_formats() -> None:
    formats = load_kv_cache_formats()
    assert list(formats) == ["bf16", "fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4"]
    sizes = {name: k.bytes_per_element for name, k in formats.items()}
    assert sizes == pytest.approx({"bf16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "mxfp8": 8.25 / 8, "nvfp4": 4.5 / 8})
    assert {k.sglang_value for k in formats.values()} <= SGLANG_KV_CACHE_CHOICES
    assert all(k.sources for k in formats.values())


def test_auto_kv_reads_as_an_explicit_bf16() -> None:
    auto = find_kv_cache_format("auto")
    assert auto is not None
    assert auto.name == "bf16"
    # Never emit "auto": SGLang would silently pick FP8 for checkpoints that declare an FP8 KV cache.
    assert auto.sglang_value == "bf16"


def test_kv_cache_support_per_gpu() -> None:
    def supported(kv_name: str, gpu_name: str) -> bool:
        kv_format = find_kv_cache_format(kv_name)
        assert kv_format is not None
        return kv_cache_supported(kv_format, gpu(gpu_name))

    assert supported("nvfp4", "B200") and supported("nvfp4", "GB300")
    assert not supported("nvfp4", "H200") and not supported("nvfp4", "MI355X")
    assert supported("mxfp8", "B300") and not supported("mxfp8", "H100")
    assert supported("fp8_e4m3", "MI300X") and supported("fp8_e4m3", "H100")
    assert all(supported("bf16", name) for name in gpu_names())


@pytest.mark.parametrize("name", ["fp16", "int8", "fp4_mx_block16", ""])
def test_unknown_kv_cache_format_is_none(name: str) -> None:
    assert find_kv_cache_format(name) is None


# ------------------------------------------------------------------------------------------------ quality loss


def test_default_quality_losses() -> None:
    assert quality_loss_pct("bf16") == 0
    assert quality_loss_pct("fp8") == 0.5
    assert quality_loss_pct("nvfp4") == 1.0
    assert quality_loss_pct("mxfp4") == 2.0
    assert quality_loss_pct("w4a16") == 2.0
    # Fewer bits never cost less by default.
    assert quality_loss_pct("bf16") <= quality_loss_pct("fp8") <= quality_loss_pct("nvfp4") <= quality_loss_pct("mxfp4")


@pytest.mark.parametrize(
    ("format_name", "model", "expected"),
    [
        ("nvfp4", "DeepSeek-R1", 0.5),
        ("nvfp4", "deepseek-ai/DeepSeek-R1", 0.5),
        ("mxfp4", "openai/gpt-oss-120b", 0.0),
        ("mxfp4", "gpt-oss-20b", 0.0),
        ("fp8_block", "deepseek-ai/DeepSeek-V3", 0.0),
        ("awq", "moonshotai/Kimi-K2.5", 0.0),
        ("w4a16", "DeepSeek-R1-0528", 0.2),
        # No measurement for this pair: the format default applies.
        ("mxfp4", "Qwen/Qwen3-235B-A22B", 2.0),
        ("nvfp4", "DeepSeek-R1-0528", 1.0),
        ("fp8-block", None, 0.5),
    ],
)
def test_model_specific_quality_losses(format_name: str, model: str | None, expected: float) -> None:
    assert quality_loss_pct(format_name, model) == pytest.approx(expected)


def test_every_override_has_a_source_and_stays_within_the_default() -> None:
    for quant in load_quant_formats().values():
        assert quant.sources
        assert 0 <= quant.typical_quality_loss_pct <= 5
        for model, loss in quant.quality_loss_by_model:
            assert 0 <= loss <= quant.typical_quality_loss_pct, (quant.name, model)
            assert any(model in source.lower() for source in quant.sources), (quant.name, model)


def test_unknown_format_has_no_quality_figure() -> None:
    with pytest.raises(KeyError):
        quality_loss_pct("int3")
    with pytest.raises(KeyError):
        kv_cache_quality_loss_pct("int3")


def test_kv_and_combined_quality_loss() -> None:
    assert kv_cache_quality_loss_pct("auto") == 0
    assert kv_cache_quality_loss_pct("fp8_e4m3") == 0.5
    assert kv_cache_quality_loss_pct("fp8_e5m2") > kv_cache_quality_loss_pct("fp8_e4m3")
    assert combined_quality_loss_pct("nvfp4", "fp8_e4m3", "DeepSeek-R1") == pytest.approx(1.0)
    assert combined_quality_loss_pct("bf16", "auto") == 0


def test_docs_table_lists_every_entry() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "catalog.md").read_text("utf-8")
    for name in [*gpu_names(), *(f"`{n}`" for n in load_quant_formats()), *(f"`{n}`" for n in load_kv_cache_formats())]:
        assert f"| {name} |" in docs or f"| {name} (" in docs, name
