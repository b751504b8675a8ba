"""The model never predicts faster than physics: bytes ÷ peak HBM bandwidth, FLOPs ÷ peak tensor rate."""

from __future__ import annotations

import itertools

import pytest

from frontier_operator.perf.calibration import Calibration
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.model import PerformanceModel
from perf_support import gpu, ideal_calibration, model, unified, worker, workload

# GLM-5 brings DeepSeek Sparse Attention: the core reads the top-k latents, the indexer every key.
MODELS = ("Llama-3.1-8B-Instruct", "Qwen3-32B", "Qwen3-235B-A22B", "DeepSeek-R1", "gpt-oss-120b", "GLM-5")
GPUS = ("H100", "H200", "B200", "GB200")
FORMATS = ("bf16", "fp8", "fp8-block", "nvfp4", "mxfp4")
TPS = (1, 2, 4, 8)
BATCHES = (1, 8, 64, 512)
CONTEXTS = (128, 4096, 65536)


def _models() -> list[PerformanceModel]:
    return [
        PerformanceModel.default(),
        PerformanceModel(Calibration.uncalibrated()),
        # The bounds of the fit allow at most these coefficients; even they must respect the floor.
        PerformanceModel(ideal_calibration()),
    ]


def _configs() -> list[tuple[str, str, str, int]]:
    return list(itertools.product(MODELS, GPUS, FORMATS, TPS))


@pytest.mark.parametrize("perf", _models(), ids=["shipped", "priors", "ideal"])
def test_decode_and_prefill_never_beat_the_floor(perf: PerformanceModel) -> None:
    checked = 0
    for model_name, gpu_name, fmt, tp in _configs():
        arch, spec = model(model_name), gpu(gpu_name)
        w = worker(gpu_name, tp=tp, weight_format=fmt, kv="bf16")
        for batch, context in itertools.product(BATCHES, CONTEXTS):
            try:
                step = perf.decode_step_time(arch, spec, w, batch, context)
                floor = perf.physical_floor(arch, spec, w, batch, context)
                prefill = perf.prefill_time(arch, spec, w, context, requests=1)
                prefill_floor = perf.physical_floor(arch, spec, w, 1, context, new_tokens_per_request=context)
            except UnpredictableConfig:
                continue
            assert step >= floor > 0, (model_name, gpu_name, fmt, tp, batch, context)
            assert prefill >= prefill_floor > 0, (model_name, gpu_name, fmt, tp, context)
            checked += 1
    # The grid must really exercise the model, not skip everything as unpredictable.
    assert checked > 500


def test_tpot_prediction_never_beats_the_per_token_floor() -> None:
    perf = PerformanceModel(ideal_calibration())
    for model_name, gpu_name, fmt, tp in _configs():
        arch, spec = model(model_name), gpu(gpu_name)
        w = worker(gpu_name, tp=tp, weight_format=fmt)
        try:
            prediction = perf.predict(arch, spec, unified(arch.name, w), workload(rate=0.5), 2.0)
            floor = perf.physical_floor(arch, spec, w, max(prediction.mean_batch, 1.0), 2250)
        except UnpredictableConfig:
            continue
        if prediction.tpot.p50 != float("inf"):
            assert prediction.tpot.p50 >= floor, (model_name, gpu_name, fmt, tp)


def test_floor_is_the_bandwidth_bound_for_a_dense_model_at_batch_one() -> None:
    """Hand check: Llama-3.1-8B in FP8 on one H200 reads ~7.5 GB of active weights per token."""
    perf = PerformanceModel(ideal_calibration())
    arch, spec = model("Llama-3.1-8B-Instruct"), gpu("H200")
    floor = perf.physical_floor(arch, spec, worker("H200", tp=1, weight_format="fp8"), 1, 1)
    assert floor == pytest.approx(arch.active_params * 1.0 / 4.8e12, rel=0.01)
