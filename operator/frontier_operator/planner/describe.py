"""Short human names for workers and fleets, as they appear in rejections, tables and status.

The forms follow the field's shorthand: `fp8 TP8 EP8 DPattn8 deepep kv=fp8_e4m3 +MTP3 ×4 cap 64`
(a prefill worker with context parallelism: `fp8 TP8 EP8 CP8`).
"""

from __future__ import annotations

from frontier_operator.perf.types import (
    MoeA2ABackend,
    Role,
    RoleDeployment,
    ServingConfig,
    SpeculativeAlgorithm,
    WorkerConfig,
)

# SGLang calls in-checkpoint multi-token prediction NEXTN; people call it MTP.
_SPEC_NAMES = {SpeculativeAlgorithm.NEXTN: "MTP", SpeculativeAlgorithm.EAGLE3: "EAGLE3"}


def describe_layout(worker: WorkerConfig) -> str:
    """Parallel layout only: `TP8 EP8 DPattn8 deepep`."""
    parts = [f"TP{worker.tp}"]
    if worker.pp > 1:
        parts.append(f"PP{worker.pp}")
    if worker.ep > 1:
        parts.append(f"EP{worker.ep}")
    if worker.attention_dp > 1:
        parts.append(f"DPattn{worker.attention_dp}")
    if worker.attention_cp > 1:
        parts.append(f"CP{worker.attention_cp}")
    if worker.moe_a2a_backend is not MoeA2ABackend.NONE:
        parts.append(worker.moe_a2a_backend.value)
    return " ".join(parts)


def describe_speculative(worker: WorkerConfig) -> str | None:
    spec = worker.speculative
    if spec is None:
        return None
    return f"{_SPEC_NAMES.get(spec.algorithm, spec.algorithm.value)}{spec.num_steps}"


def describe_worker(worker: WorkerConfig, *, with_cap: bool = False) -> str:
    parts = [worker.weight_format, describe_layout(worker)]
    if worker.kv_cache_format not in ("bf16", "auto"):
        parts.append(f"kv={worker.kv_cache_format}")
    speculative = describe_speculative(worker)
    if speculative is not None:
        parts.append(f"+{speculative}")
    if with_cap:
        parts.append(f"cap {worker.max_running_requests}")
    return " ".join(parts)


def _describe_role(deployment: RoleDeployment) -> str:
    return f"{describe_worker(deployment.worker, with_cap=True)} ×{deployment.replicas}"


def describe_config(config: ServingConfig) -> str:
    """`fp8 TP8 +MTP3 cap 64 ×4` or `P/D: fp8 TP4 cap 16 ×2 → fp8 TP8 cap 96 ×3`."""
    if not config.disaggregated:
        return " + ".join(_describe_role(role) for role in config.roles)
    prefill = config.role(Role.PREFILL)
    decode = config.role(Role.DECODE)
    if prefill is None or decode is None:
        return " + ".join(_describe_role(role) for role in config.roles)
    return f"P/D: {_describe_role(prefill)} → {_describe_role(decode)}"
