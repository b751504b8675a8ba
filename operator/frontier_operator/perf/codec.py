"""ServingConfig ⇄ plain JSON data, for `frontier plan -o json` and `frontier render --plan plan.json`.

Field names are camelCase like the API; reading is strict (unknown or missing keys raise
`ConfigDecodeError` naming the key), so a hand-edited plan file fails loudly rather than silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from frontier_operator.perf.types import (
    MoeA2ABackend,
    Role,
    RoleDeployment,
    ServingConfig,
    Speculative,
    SpeculativeAlgorithm,
    WorkerConfig,
)


class ConfigDecodeError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


def _speculative_to_dict(speculative: Speculative) -> dict[str, Any]:
    return {
        "algorithm": speculative.algorithm.value,
        "numSteps": speculative.num_steps,
        "eagleTopk": speculative.eagle_topk,
        "numDraftTokens": speculative.num_draft_tokens,
        "draftModel": speculative.draft_model,
    }


def worker_to_dict(worker: WorkerConfig) -> dict[str, Any]:
    return {
        "gpu": worker.gpu,
        "gpusPerNode": worker.gpus_per_node,
        "weightFormat": worker.weight_format,
        "kvCacheFormat": worker.kv_cache_format,
        "tp": worker.tp,
        "pp": worker.pp,
        "attentionDp": worker.attention_dp,
        "attentionCp": worker.attention_cp,
        "ep": worker.ep,
        "moeA2aBackend": worker.moe_a2a_backend.value,
        "maxRunningRequests": worker.max_running_requests,
        "chunkedPrefillSize": worker.chunked_prefill_size,
        "speculative": _speculative_to_dict(worker.speculative) if worker.speculative else None,
        "memFractionStatic": worker.mem_fraction_static,
    }


def config_to_dict(config: ServingConfig) -> dict[str, Any]:
    return {
        "model": config.model,
        "transferBackend": config.transfer_backend,
        "roles": [
            {
                "role": deployment.role.value,
                "replicas": deployment.replicas,
                "worker": worker_to_dict(deployment.worker),
            }
            for deployment in config.roles
        ],
    }


class _Reader:
    """Typed access to one JSON object, with the path for error messages."""

    def __init__(self, data: Any, path: str, known: set[str]) -> None:
        if not isinstance(data, Mapping):
            raise ConfigDecodeError(path, "expected an object")
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigDecodeError(f"{path}.{unknown[0]}", "unknown key")
        self.data, self.path = data, path

    def _get(self, key: str, kind: type | tuple[type, ...], optional: bool) -> Any:
        value = self.data.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ConfigDecodeError(f"{self.path}.{key}", f"expected {getattr(kind, '__name__', 'a value')}")
        return value

    def integer(self, key: str, default: int | None = None) -> int:
        """A positive integer; `default` when absent, for keys added after records were first written."""
        if default is not None and self.data.get(key) is None:
            return default
        value: int = self._get(key, int, optional=False)
        if value < 1:
            raise ConfigDecodeError(f"{self.path}.{key}", "must be at least 1")
        return value

    def text(self, key: str) -> str:
        value: str = self._get(key, str, optional=False)
        return value

    def optional_text(self, key: str) -> str | None:
        value: str | None = self._get(key, str, optional=True)
        return value

    def optional_number(self, key: str) -> float | None:
        value: float | None = self._get(key, (int, float), optional=True)
        return value


def _enum(enum_type: type[Any], value: str, path: str) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        raise ConfigDecodeError(path, f"{value!r} is not one of {[e.value for e in enum_type]}") from None


def worker_from_dict(data: Any, path: str = "worker") -> WorkerConfig:
    reader = _Reader(data, path, set(worker_to_dict(_EXAMPLE_WORKER)))
    speculative = None
    if data.get("speculative") is not None:
        spec_path = f"{path}.speculative"
        spec = _Reader(data["speculative"], spec_path, set(_speculative_to_dict(_EXAMPLE_SPECULATIVE)))
        speculative = Speculative(
            algorithm=_enum(SpeculativeAlgorithm, spec.text("algorithm"), f"{spec_path}.algorithm"),
            num_steps=spec.integer("numSteps"),
            eagle_topk=spec.integer("eagleTopk"),
            num_draft_tokens=spec.integer("numDraftTokens"),
            draft_model=spec.optional_text("draftModel"),
        )
    return WorkerConfig(
        gpu=reader.text("gpu"),
        gpus_per_node=reader.integer("gpusPerNode"),
        weight_format=reader.text("weightFormat"),
        kv_cache_format=reader.text("kvCacheFormat"),
        tp=reader.integer("tp"),
        pp=reader.integer("pp"),
        attention_dp=reader.integer("attentionDp"),
        attention_cp=reader.integer("attentionCp", default=1),
        ep=reader.integer("ep"),
        moe_a2a_backend=_enum(MoeA2ABackend, reader.text("moeA2aBackend"), f"{path}.moeA2aBackend"),
        max_running_requests=reader.integer("maxRunningRequests"),
        chunked_prefill_size=reader.integer("chunkedPrefillSize"),
        speculative=speculative,
        mem_fraction_static=reader.optional_number("memFractionStatic"),
    )


def config_from_dict(data: Any, path: str = "config") -> ServingConfig:
    reader = _Reader(data, path, {"model", "transferBackend", "roles"})
    roles_data = data.get("roles")
    if not isinstance(roles_data, list) or not 1 <= len(roles_data) <= 2:
        raise ConfigDecodeError(f"{path}.roles", "expected a list of one or two roles")
    roles = []
    for index, role_data in enumerate(roles_data):
        role_path = f"{path}.roles[{index}]"
        role_reader = _Reader(role_data, role_path, {"role", "replicas", "worker"})
        roles.append(
            RoleDeployment(
                role=_enum(Role, role_reader.text("role"), f"{role_path}.role"),
                worker=worker_from_dict(role_data.get("worker"), f"{role_path}.worker"),
                replicas=role_reader.integer("replicas"),
            )
        )
    return ServingConfig(
        model=reader.text("model"), roles=tuple(roles), transfer_backend=reader.optional_text("transferBackend")
    )


_EXAMPLE_SPECULATIVE = Speculative(SpeculativeAlgorithm.NEXTN, 3, 1, 4)
_EXAMPLE_WORKER = WorkerConfig(
    gpu="H200",
    gpus_per_node=8,
    weight_format="fp8",
    kv_cache_format="auto",
    tp=8,
    max_running_requests=64,
    chunked_prefill_size=8192,
)
