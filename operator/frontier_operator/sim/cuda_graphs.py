"""CUDA-graph batch buckets: SGLang pads every decode batch up to the next captured size.

Decode runs as a replayed CUDA graph captured for a fixed list of batch sizes. A batch of 13 requests replays
the graph captured for 16, so the GEMMs pay for 16 rows; a batch beyond the largest captured size runs eagerly,
without graphs, and pays the kernel launches. Step time is therefore a step function of the batch: one of the
sources of the jagged frontier that a smooth performance model does not see.

Capture lists as SGLang 0.5.23 generates them (`sglang/srt/arg_groups/cuda_graph_hook.py`,
`generate_decode_cuda_graph_batch_sizes`; sglang-0.5.23.md §3.2): 1, 2, 4, 8, 12, steps of 8 to 256, of 16
below 512, of 32 from 512; with speculative decoding denser at small sizes (1–8, steps of 2 to 32, of 4 to 64,
of 8 to 256, of 16 above); always ending at the maximum. The maximum follows the GPU memory tier and TP and is
capped by `--max-running-requests` (per attention-DP rank).
"""

from __future__ import annotations

import bisect
import math
from functools import cache

from frontier_operator.catalog.types import GpuSpec
from frontier_operator.perf.memory import default_cuda_graph_max_bs
from frontier_operator.perf.types import WorkerConfig


@cache
def capture_sizes(max_bs: int, speculative: bool = False) -> tuple[int, ...]:
    """The decode batch sizes SGLang captures graphs for, up to and including `max_bs`."""
    if max_bs < 1:
        return ()
    if speculative:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, max_bs + 1, 16)]
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    kept = [size for size in sizes if size <= max_bs]
    if max_bs not in kept:
        kept.append(max_bs)
    return tuple(kept)


def graph_max_batch(gpu: GpuSpec, worker: WorkerConfig) -> int:
    """Largest per-rank decode batch with a captured graph: the memory-tier default capped by the batch cap."""
    per_rank_cap = max(1, worker.max_running_requests // max(1, worker.attention_dp))
    return max(1, min(default_cuda_graph_max_bs(gpu, worker.tp), per_rank_cap))


def padded_batch(batch: int, sizes: tuple[int, ...]) -> int | None:
    """The captured size a per-rank batch replays (the smallest size ≥ batch); None past the largest (eager)."""
    if batch <= 0:
        return 0
    index = bisect.bisect_left(sizes, batch)
    return sizes[index] if index < len(sizes) else None


def padded_worker_batch(batch: int, attention_dp: int, sizes: tuple[int, ...]) -> tuple[int, bool]:
    """(rows the worker's GEMMs run, whether a graph replays) for `batch` requests spread over the DP ranks."""
    ranks = max(1, attention_dp)
    per_rank = math.ceil(batch / ranks)
    padded = padded_batch(per_rank, sizes)
    if padded is None:
        return per_rank * ranks, False
    return padded * ranks, True
