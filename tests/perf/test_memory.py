"""Memory fit: weights + SGLang's reserve + KV pool → the largest batch at a context."""

from __future__ import annotations

import pytest

from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.formats import resolve_formats
from frontier_operator.perf.memory import kv_bytes_per_request
from frontier_operator.perf.model import PerformanceModel
from perf_support import gpu, model, unified, worker, workload


def test_deepseek_r1_fp8_fits_on_eight_h200(priors: PerformanceModel) -> None:
    fit = priors.memory_fit(model("DeepSeek-R1"), gpu("H200"), worker("H200", tp=8, weight_format="fp8-block"), 4096)
    assert fit.fits
    # 671 B parameters in block FP8 over 8 GPUs: about 84 GB (78 GiB) each, embeddings in BF16.
    assert 75 < fit.weights_gb < 85
    assert fit.max_batch_at_context > 16


def test_deepseek_r1_bf16_does_not_fit_on_eight_h100(priors: PerformanceModel) -> None:
    arch, spec = model("DeepSeek-R1"), gpu("H100")
    fit = priors.memory_fit(arch, spec, worker("H100", tp=8, weight_format="bf16"), 4096)
    assert not fit.fits
    assert fit.weights_gb > spec.memory_gb
    config = unified(arch.name, worker("H100", tp=8, weight_format="bf16"))
    with pytest.raises(UnpredictableConfig, match="weights need"):
        priors.predict_at_concurrency(arch, spec, config, workload(rate=1.0), 8)
    with pytest.raises(UnpredictableConfig, match="weights need"):
        priors.predict(arch, spec, config, workload(rate=1.0), 2.0)


def test_shorter_context_admits_a_larger_batch(priors: PerformanceModel) -> None:
    arch, spec = model("Qwen3-32B"), gpu("H100")
    w = worker("H100", tp=2, weight_format="bf16", max_running=100_000)
    long_fit = priors.memory_fit(arch, spec, w, 32768)
    short_fit = priors.memory_fit(arch, spec, w, 2048)
    assert short_fit.max_batch_at_context > 10 * long_fit.max_batch_at_context >= 10
    assert short_fit.kv_pool_gb == long_fit.kv_pool_gb


def test_batch_cap_bounds_the_fit(priors: PerformanceModel) -> None:
    fit = priors.memory_fit(
        model("Llama-3.1-8B-Instruct"), gpu("H200"), worker("H200", tp=1, max_running=32), context_tokens=1024
    )
    assert fit.max_batch_at_context == 32


def test_kv_bytes_per_token_match_the_architecture() -> None:
    llama, deepseek = model("Llama-3.1-8B-Instruct"), model("DeepSeek-R1")
    h200 = gpu("H200")
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 dims x (K and V) x 2 bytes = 128 KiB per token, TP1.
    w = worker("H200", tp=1, kv="bf16")
    assert kv_bytes_per_request(llama, resolve_formats(llama, h200, "fp8", "bf16"), w, 1) == 131072
    # With TP8 each GPU keeps one of the 8 KV heads.
    w8 = worker("H200", tp=8, kv="bf16")
    assert kv_bytes_per_request(llama, resolve_formats(llama, h200, "fp8", "bf16"), w8, 1) == 131072 / 8
    # DeepSeek MLA: one 512 + 64 latent per layer, 61 layers, replicated on every TP rank; FP8 halves it.
    fmt = resolve_formats(deepseek, h200, "fp8-block", "fp8_e4m3")
    assert kv_bytes_per_request(deepseek, fmt, worker("H200", tp=8, kv="fp8_e4m3"), 1) == 576 * 61


def test_reserve_follows_sglang_when_mem_fraction_is_unset(priors: PerformanceModel) -> None:
    """sglang-0.5.23.md §3.2 worked example: H100, TP1, non-MLA reserves about 13.9 GB (our MiB arithmetic)."""
    fit = priors.memory_fit(model("Llama-3.1-8B-Instruct"), gpu("H100"), worker("H100", tp=1, chunk=8192), 2048)
    assert fit.reserved_gb == pytest.approx(13.7, abs=0.3)
