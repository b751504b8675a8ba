"""Shape of the predictions: more batch costs time, longer prompts cost time, TP buys latency."""

from __future__ import annotations

from frontier_operator.perf.model import PerformanceModel
from perf_support import gpu, model, worker

CASES = (
    ("Llama-3.1-8B-Instruct", "H200", "fp8"),
    ("Qwen3-32B", "H100", "bf16"),
    ("Qwen3-235B-A22B", "H200", "fp8"),
    ("DeepSeek-R1", "B200", "fp8-block"),
)


def test_decode_step_grows_with_batch(shipped: PerformanceModel) -> None:
    for name, gpu_name, fmt in CASES:
        arch, spec, w = model(name), gpu(gpu_name), worker(gpu_name, tp=8, weight_format=fmt)
        times = [shipped.decode_step_time(arch, spec, w, batch, 2048) for batch in (1, 4, 16, 64, 256, 1024)]
        assert times == sorted(times), name
        assert times[-1] > 2 * times[0], name


def test_decode_step_grows_with_context(shipped: PerformanceModel) -> None:
    for name, gpu_name, fmt in CASES:
        arch, spec, w = model(name), gpu(gpu_name), worker(gpu_name, tp=8, weight_format=fmt)
        times = [shipped.decode_step_time(arch, spec, w, 64, context) for context in (256, 2048, 16384, 65536)]
        assert times == sorted(times), name
        assert times[-1] > times[0], name


def test_ttft_grows_with_input_length(shipped: PerformanceModel) -> None:
    for name, gpu_name, fmt in CASES:
        arch, spec, w = model(name), gpu(gpu_name), worker(gpu_name, tp=8, weight_format=fmt)
        times = [shipped.prefill_time(arch, spec, w, tokens) for tokens in (128, 1024, 8192, 32768, 131072)]
        assert times == sorted(times), name
        # Past one chunk the prompt runs chunk after chunk: at least linear growth.
        assert times[-1] > 3.5 * times[-2], name


def test_cached_prefix_makes_prefill_cheaper(shipped: PerformanceModel) -> None:
    arch, spec, w = model("Qwen3-32B"), gpu("H100"), worker("H100", tp=4, weight_format="fp8")
    cold = shipped.prefill_time(arch, spec, w, 16384)
    warm = shipped.prefill_time(arch, spec, w, 16384, cached_tokens=12288)
    assert warm < 0.5 * cold


def test_tensor_parallelism_reduces_step_time_at_low_batch(shipped: PerformanceModel) -> None:
    for name, gpu_name, fmt in (("Qwen3-32B", "H100", "bf16"), ("Llama-3.1-70B-Instruct", "H200", "fp8")):
        arch, spec = model(name), gpu(gpu_name)
        times = [
            shipped.decode_step_time(arch, spec, worker(gpu_name, tp=tp, weight_format=fmt), 1, 2048)
            for tp in (2, 4, 8)
        ]
        assert times[0] > times[1] > times[2], name
