"""Physical floors: bounds no configuration can beat, checked before the performance model is asked.

They prune hopeless candidates cheaply and let the planner tell a user that an SLO is below what the
hardware can do at all ("p50 TPOT 2 ms is below the 3.1 ms memory-bandwidth floor of any layout"),
which no amount of searching would fix. Each floor is a true lower bound: it leaves out every
overhead, so it may be loose but is never wrong.
"""

from __future__ import annotations

from frontier_operator.catalog.types import GpuSpec, ModelArch, QuantFormat
from frontier_operator.perf.types import WorkerConfig

_BYTES_PER_GB = 1e9
_BYTES_PER_TB = 1e12


def weights_floor_gb_per_gpu(arch: ModelArch, fmt: QuantFormat, gpus: int) -> float:
    """Weight memory per GPU if every parameter took the format's size and the split were perfect.

    MoE-only formats keep attention and shared weights in BF16, so counting every parameter at the
    format's (smaller) size stays a lower bound.
    """
    return arch.total_params * fmt.weight_bytes_per_param / gpus / _BYTES_PER_GB


def step_floor_s(arch: ModelArch, gpu: GpuSpec, fmt: QuantFormat, worker: WorkerConfig) -> float:
    """Shortest possible decode step: the weights one token activates, read once at peak HBM bandwidth.

    Even a batch of one must stream every weight its token touches (all dense weights, the shared and
    the routed experts it selects); the best split spreads that evenly over all GPUs of the instance.
    """
    bytes_read = arch.active_params * fmt.weight_bytes_per_param
    return bytes_read / worker.gpus / (gpu.hbm_bandwidth_tbs * _BYTES_PER_TB)


def per_token_floor_s(arch: ModelArch, gpu: GpuSpec, fmt: QuantFormat, worker: WorkerConfig) -> float:
    """Lower bound on TPOT and ITL: one step per token, or per draft window under speculative decoding."""
    tokens_per_step = worker.speculative.num_draft_tokens if worker.speculative is not None else 1
    return step_floor_s(arch, gpu, fmt, worker) / tokens_per_step
