"""What a quantized checkpoint keeps in BF16: NVIDIA's NVFP4 DeepSeek exports leave (some of) the attention and the
MTP layer unquantized, and the memory fit counts those weights at two bytes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frontier_operator.catalog.types import ModelArch
from frontier_operator.perf.formats import resolve_formats
from frontier_operator.perf.kernels import inventory
from frontier_operator.perf.memory import draft_params, weights_per_gpu_bytes
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.types import Speculative, SpeculativeAlgorithm
from perf_support import gpu, model, worker

FP4_BYTES = 4.5 / 8
MTP = Speculative(algorithm=SpeculativeAlgorithm.NEXTN, num_steps=2, eagle_topk=1, num_draft_tokens=3)


def _fully_quantized(arch: ModelArch) -> ModelArch:
    return replace(arch, kept_in_bf16=())


def test_the_catalog_says_which_deepseek_nvfp4_exports_keep_what_in_bf16() -> None:
    # DeepSeek-V3-0324-NVFP4 excludes every self_attn module; the R1-0528 "v2" export and V3.1's also quantize
    # the output projection; all three leave the MTP layer alone.
    assert dict(model("DeepSeek-V3").kept_in_bf16) == {"nvfp4": ("attention", "draft")}
    assert dict(model("DeepSeek-R1").kept_in_bf16) == {"nvfp4": ("attention_inputs", "draft")}
    assert model("DeepSeek-R1").checkpoint_for("nvfp4") == "nvidia/DeepSeek-R1-0528-FP4-v2"
    assert dict(model("DeepSeek-V3.1").kept_in_bf16) == {"nvfp4": ("attention_inputs", "draft")}
    b200 = gpu("B200")
    assert resolve_formats(model("DeepSeek-R1"), b200, "nvfp4", "fp8_e4m3").bf16_modules == (
        "attention_inputs",
        "draft",
    )
    # Other formats of the same model are what they say.
    assert resolve_formats(model("DeepSeek-R1"), b200, "fp8-block", "fp8_e4m3").bf16_modules == ()


def test_attention_inputs_are_the_attention_without_its_output_projection() -> None:
    inv = inventory(model("DeepSeek-R1"))
    # o_proj: 128 heads x 128 value dims -> 7168.
    assert inv.attention_output == 128 * 128 * 7168
    assert inv.attention_in_bf16(("attention",)) == inv.attention
    assert inv.attention_in_bf16(("attention_inputs", "draft")) == pytest.approx(inv.attention - 128 * 128 * 7168)
    assert inv.attention_in_bf16(("draft",)) == 0.0


@pytest.mark.parametrize(("attention_dp", "attention_tp"), [(1, 8), (8, 1)])
def test_bf16_attention_weighs_on_every_gpu_that_holds_it(attention_dp: int, attention_tp: int) -> None:
    arch = model("DeepSeek-V3")
    spec = gpu("B200")
    w = worker("B200", tp=8, weight_format="nvfp4", kv="fp8_e4m3", attention_dp=attention_dp, ep=8)
    as_published = weights_per_gpu_bytes(arch, resolve_formats(arch, spec, "nvfp4", "fp8_e4m3"), w)
    plain = _fully_quantized(arch)
    all_fp4 = weights_per_gpu_bytes(plain, resolve_formats(plain, spec, "nvfp4", "fp8_e4m3"), w)
    extra = arch.num_layers * inventory(arch).attention * (2.0 - FP4_BYTES) / attention_tp
    assert as_published - all_fp4 == pytest.approx(extra)
    # 61 layers of 187 M attention parameters: 16 GB more on each attention-DP rank, a ninth of a B200's memory.
    if attention_tp == 1:
        assert 15e9 < extra < 18e9


def test_a_bf16_mtp_layer_is_counted_at_two_bytes() -> None:
    arch, spec = model("DeepSeek-R1"), gpu("B200")
    w = worker("B200", tp=8, weight_format="nvfp4", kv="fp8_e4m3", speculative=MTP)
    formats = resolve_formats(arch, spec, "nvfp4", "fp8_e4m3")
    with_draft = weights_per_gpu_bytes(arch, formats, w)
    without = weights_per_gpu_bytes(arch, formats, replace(w, speculative=None))
    assert with_draft - without == pytest.approx(draft_params(arch, MTP) * 2.0 / 8)


def test_the_memory_fit_leaves_the_kv_pool_what_the_bf16_weights_do_not_take(priors: PerformanceModel) -> None:
    # DeepSeek-R1's FP4 export on eight B200s with attention-DP: each rank holds every layer's attention input
    # projections, 4.2 B parameters, at two bytes where four and a half bits were counted.
    arch, spec = model("DeepSeek-R1"), gpu("B200")
    w = worker("B200", tp=8, weight_format="nvfp4", kv="fp8_e4m3", attention_dp=8, ep=8, max_running=100_000)
    published = priors.memory_fit(arch, spec, w, 8192)
    quantized = priors.memory_fit(_fully_quantized(arch), spec, w, 8192)
    kept = arch.num_layers * inventory(arch).attention_in_bf16(("attention_inputs",)) * (2.0 - FP4_BYTES)
    assert published.weights_gb - quantized.weights_gb == pytest.approx(kept / 2**30)
    assert quantized.kv_pool_gb - published.kv_pool_gb == pytest.approx(kept / 2**30)
    assert published.max_batch_at_context < quantized.max_batch_at_context


def test_an_eagle3_head_is_its_own_checkpoint_not_the_mtp_layer() -> None:
    arch, spec = model("DeepSeek-R1"), gpu("B200")
    eagle = Speculative(algorithm=SpeculativeAlgorithm.EAGLE3, num_steps=3, eagle_topk=1, num_draft_tokens=4)
    w = worker("B200", tp=8, weight_format="nvfp4", kv="fp8_e4m3", speculative=eagle)
    formats = resolve_formats(arch, spec, "nvfp4", "fp8_e4m3")
    added = weights_per_gpu_bytes(arch, formats, w) - weights_per_gpu_bytes(arch, formats, replace(w, speculative=None))
    assert added == pytest.approx(draft_params(arch, eagle) * FP4_BYTES / 8)
