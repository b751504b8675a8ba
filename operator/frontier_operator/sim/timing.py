"""What a ground truth tells the fleet simulation: how long one replica's iterations really take.

A `Truth` answers, for one role of a serving configuration and a workload, with a `ReplicaTiming`: the true
per-iteration service times the simulated SGLang scheduler runs on. Two kinds of truth exist and they differ
in how prefill shares the GPU:

* `PrefillMode.SHARED_GPU` (a model of the engine): prefill chunks and decode steps alternate on the worker,
  a chunk pauses every running request (SGLang runs a prefill batch first whenever one can be formed), and
  decode steps are priced per padded batch.
* `PrefillMode.LOAD_INDEXED` (a table of measurements): what was measured is the latency seen at a given
  number of requests in flight, so the time to first token and the time per output token are looked up at
  the replica's current load, and prefill does not pause decode a second time (the measured TPOT already
  contains those pauses).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from frontier_operator.perf.types import Role, ServingConfig, Workload


class Unavailable(Exception):  # noqa: N818 - "the truth is unavailable", not an error of the caller
    """The truth has no answer for this configuration (a measured table does not contain it, or the model
    cannot price it); `reason` says why in one sentence."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PrefillMode(StrEnum):
    SHARED_GPU = "shared-gpu"
    LOAD_INDEXED = "load-indexed"


class ReplicaTiming(Protocol):
    """True service times of one replica (one SGLang server of one role). Implementations are immutable."""

    @property
    def prefill_mode(self) -> PrefillMode: ...

    @property
    def batch_cap(self) -> int:
        """`--max-running-requests` of the worker: requests decoding (or prefilled) at once."""
        ...

    @property
    def chunk_tokens(self) -> int:
        """New tokens one prefill iteration processes (`--chunked-prefill-size`); huge when chunking is off."""
        ...

    @property
    def attention_ranks(self) -> int:
        """SHARED_GPU: attention-DP ranks; each prefills its own requests, all in the same forward (1 otherwise)."""
        ...

    @property
    def kv_capacity_tokens(self) -> int | None:
        """Tokens of KV the worker holds; None when the truth does not bound it (a measured table)."""
        ...

    @property
    def accept_length(self) -> float:
        """Mean tokens each running request gains per decode iteration (1 without speculative decoding)."""
        ...

    @property
    def speculative(self) -> bool: ...

    @property
    def first_token_overhead_s(self) -> float:
        """Fixed latency every request pays before its first token (tokenizer, scheduling, detokenizer)."""
        ...

    @property
    def noise_cv(self) -> float:
        """Coefficient of variation of one iteration's duration around its mean (run-to-run jitter)."""
        ...

    @property
    def first_token_cv(self) -> float:
        """LOAD_INDEXED: spread of one request's time to first token around the looked-up mean (0 otherwise)."""
        ...

    @property
    def unit_share(self) -> float:
        """LOAD_INDEXED P/D: the fraction of one measured unit a replica of this role is (1 otherwise)."""
        ...

    @property
    def graph_sizes(self) -> tuple[int, ...]:
        """Captured CUDA-graph batch sizes per rank (empty when the truth does not model them)."""
        ...

    def decode_step_s(self, batch: int, mean_context: float, load: float) -> float:
        """Seconds of one decode iteration of `batch` running requests at `mean_context` tokens each;
        `load` is the number of requests in flight on the replica (used by load-indexed truths)."""
        ...

    def prefill_s(
        self, new_tokens: float, prefix_tokens: float, load: float, ranks: int = 1, sequences: int = 1
    ) -> float:
        """SHARED_GPU: seconds of one prefill iteration computing `new_tokens` after `prefix_tokens` of context
        on each of `ranks` attention-DP ranks at once, in `sequences` prompts (or pieces of prompts) per rank:
        each attends to its own tokens only.
        LOAD_INDEXED: the time from admission to first token of one request with `new_tokens` to compute."""
        ...

    def transfer_s(self, input_tokens: float) -> float:
        """P/D: seconds to move a prefilled request's KV cache to a decode worker (0 when aggregated)."""
        ...


class Truth(Protocol):
    """The ground truth of a simulated fleet: not the planner's model (see `sim.perturbed`, `sim.measured`)."""

    @property
    def name(self) -> str: ...

    def timing(self, config: ServingConfig, role: Role, workload: Workload) -> ReplicaTiming:
        """Timing of one replica of `role` in `config`; raises `Unavailable` when the truth cannot answer."""
        ...

    def describe(self, config: ServingConfig) -> str:
        """One line on what the truth knows about `config` that the planner does not (hidden factors, table)."""
        ...
