"""Prefill and decode attention are different kernels, each priced at its own share of the tensor peak."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.steps import Hardware, decode_step_seconds, prefill_forward_seconds
from perf_support import gpu, model, worker

R1 = model("DeepSeek-R1")
H200 = gpu("H200")
TP8 = worker("H200", tp=8, weight_format="fp8-block")


def _hardware(shipped: PerformanceModel, **coefficients: float) -> Hardware:
    hw = shipped.hardware(R1, H200, TP8)
    return Hardware.build(hw.layout, hw.gpu, replace(hw.coefficients, **coefficients))


def test_decode_attention_runs_at_its_own_efficiency(shipped: PerformanceModel) -> None:
    """A verify pass of 4 draft tokens for 64 requests at 8k tokens: absorbed MLA attention is compute-bound
    there, so halving the decode kernel's efficiency slows decode, and leaves a prefill forward as it was."""
    base = _hardware(shipped, decode_attention_efficiency=0.4)
    slow = _hardware(shipped, decode_attention_efficiency=0.2)
    assert decode_step_seconds(slow, 64, 8192, 4.0) > 1.2 * decode_step_seconds(base, 64, 8192, 4.0)
    assert prefill_forward_seconds(slow, 1, 8192, 0.0) == pytest.approx(prefill_forward_seconds(base, 1, 8192, 0.0))


def test_prefill_attention_efficiency_leaves_decode_alone(shipped: PerformanceModel) -> None:
    base = _hardware(shipped, attention_efficiency=0.4)
    slow = _hardware(shipped, attention_efficiency=0.1)
    assert prefill_forward_seconds(slow, 1, 32768, 0.0) > 1.2 * prefill_forward_seconds(base, 1, 32768, 0.0)
    assert decode_step_seconds(slow, 64, 8192, 4.0) == pytest.approx(decode_step_seconds(base, 64, 8192, 4.0))
