"""A transparent truth for the twin's mechanics tests: step times are simple formulas the tests can reason about."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from frontier_operator.perf.types import (
    LengthDistribution,
    Role,
    RoleDeployment,
    ServingConfig,
    Speculative,
    SpeculativeAlgorithm,
    WorkerConfig,
    Workload,
)
from frontier_operator.sim.timing import PrefillMode, Unavailable


@dataclass(frozen=True)
class LinearTiming:
    """Decode step = base + per_request × batch; prefill = fixed + per_token × new tokens."""

    step_base_s: float = 0.010
    step_per_request_s: float = 0.0002
    prefill_fixed_s: float = 0.010
    prefill_per_token_s: float = 0.00002
    cap: int = 64
    chunk: int = 4096
    kv_tokens: int | None = None
    accept: float = 1.0
    transfer_fixed_s: float = 0.0
    overhead_s: float = 0.0
    noise: float = 0.0
    mode: PrefillMode = PrefillMode.SHARED_GPU
    ttft_cv: float = 0.0
    share: float = 1.0
    sizes: tuple[int, ...] = ()
    ranks: int = 1

    @property
    def prefill_mode(self) -> PrefillMode:
        return self.mode

    @property
    def batch_cap(self) -> int:
        return self.cap

    @property
    def chunk_tokens(self) -> int:
        return self.chunk

    @property
    def attention_ranks(self) -> int:
        return self.ranks

    @property
    def kv_capacity_tokens(self) -> int | None:
        return self.kv_tokens

    @property
    def accept_length(self) -> float:
        return self.accept

    @property
    def speculative(self) -> bool:
        return self.accept > 1.0

    @property
    def first_token_overhead_s(self) -> float:
        return self.overhead_s

    @property
    def noise_cv(self) -> float:
        return self.noise

    @property
    def first_token_cv(self) -> float:
        return self.ttft_cv

    @property
    def unit_share(self) -> float:
        return self.share

    @property
    def graph_sizes(self) -> tuple[int, ...]:
        return self.sizes

    def decode_step_s(self, batch: int, mean_context: float, load: float) -> float:
        return self.step_base_s + self.step_per_request_s * batch

    def prefill_s(
        self, new_tokens: float, prefix_tokens: float, load: float, ranks: int = 1, sequences: int = 1
    ) -> float:
        # Ranks prefill side by side: a forward takes as long as one rank's share.
        return self.prefill_fixed_s + self.prefill_per_token_s * new_tokens

    def transfer_s(self, input_tokens: float) -> float:
        return self.transfer_fixed_s


@dataclass(frozen=True)
class FakeTruth:
    """Every role gets `timing`, with the batch cap taken from the configuration's worker."""

    timing_by_role: dict[Role, LinearTiming] = field(default_factory=dict)
    default: LinearTiming = LinearTiming()
    refuse_gpu: str | None = None

    @property
    def name(self) -> str:
        return "fake"

    def describe(self, config: ServingConfig) -> str:
        return "linear fake"

    def timing(self, config: ServingConfig, role: Role, workload: Workload) -> LinearTiming:
        deployment = config.role(role)
        if deployment is None:
            raise Unavailable(f"no {role.value} role")
        if deployment.worker.gpu == self.refuse_gpu:
            raise Unavailable(f"no truth for {self.refuse_gpu}")
        base = self.timing_by_role.get(role, self.default)
        return replace(base, cap=deployment.worker.max_running_requests)


def worker(cap: int = 64, *, tp: int = 1, gpu: str = "H100", speculative: bool = False) -> WorkerConfig:
    spec = Speculative(SpeculativeAlgorithm.EAGLE3, 3, 1, 4, "draft") if speculative else None
    return WorkerConfig(
        gpu=gpu,
        gpus_per_node=8,
        weight_format="fp8",
        kv_cache_format="bf16",
        tp=tp,
        max_running_requests=cap,
        chunked_prefill_size=4096,
        speculative=spec,
    )


def unified(replicas: int = 1, cap: int = 64, *, gpu: str = "H100", speculative: bool = False) -> ServingConfig:
    deployment = RoleDeployment(Role.UNIFIED, worker(cap, gpu=gpu, speculative=speculative), replicas)
    return ServingConfig(model="Qwen3-32B", roles=(deployment,))


def disaggregated(prefill: int = 1, decode: int = 1, cap: int = 64) -> ServingConfig:
    return ServingConfig(
        model="Qwen3-32B",
        roles=(RoleDeployment(Role.PREFILL, worker(cap), prefill), RoleDeployment(Role.DECODE, worker(cap), decode)),
        transfer_backend="nixl",
    )


def workload(rate: float, *, prompt: float = 1000, output: float = 200, cv: float = 0.0, hit: float = 0.0) -> Workload:
    return Workload(
        request_rate_per_s=rate,
        input_tokens=LengthDistribution(prompt, cv, int(prompt * 4)),
        output_tokens=LengthDistribution(output, cv, int(output * 4)),
        prefix_cache_hit_rate=hit,
    )


def capacity_rate(timing: LinearTiming, prompt: float, output: float) -> float:
    """Requests/s one replica sustains at its batch cap (prefill and decode share the GPU)."""
    busy = timing.prefill_fixed_s + timing.prefill_per_token_s * prompt
    busy += (output - 1) * timing.decode_step_s(timing.cap, 0, 0) / timing.cap
    return 1.0 / busy
