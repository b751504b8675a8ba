"""Shared by the render tests: golden cases, targets built in code, and a sweep of legal plans of every shape."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from frontier_operator.api import FrontierTarget, load_target_file, parse_target
from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.models import find_model
from frontier_operator.catalog.quantization import (
    execution_mode,
    find_kv_cache_format,
    find_quant_format,
    kv_cache_supported,
)
from frontier_operator.catalog.types import Vendor
from frontier_operator.cli_render import plan_from_dict
from frontier_operator.perf.types import (
    MoeA2ABackend,
    Role,
    RoleDeployment,
    ServingConfig,
    Speculative,
    SpeculativeAlgorithm,
    WorkerConfig,
)
from frontier_operator.render import RenderRequest
from frontier_operator.render.engine_args import LWS_LEADER_ADDRESS, LWS_WORKER_INDEX
from schema_tools import ROOT

GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = ROOT / "examples"


# --------------------------------------------------------------------------------------------- golden


@dataclass(frozen=True)
class GoldenCase:
    name: str
    directory: Path

    @property
    def target_file(self) -> Path:
        """The case's own target.yaml (a variant of an example), else the example of the same name."""
        own = self.directory / "target.yaml"
        return own if own.exists() else EXAMPLES / f"{self.name}.yaml"

    def request(self) -> RenderRequest:
        config, pool = plan_from_dict(json.loads((self.directory / "plan.json").read_text(encoding="utf-8")))
        return RenderRequest(target=load_target_file(self.target_file), config=config, pool_name=pool)


def golden_cases() -> list[GoldenCase]:
    return [GoldenCase(path.parent.name, path.parent) for path in sorted(GOLDEN.glob("*/plan.json"))]


# --------------------------------------------------------------------------------------------- argv


def pod_argvs(argv: list[str], nnodes: int) -> list[list[str]]:
    """The argv each pod of a replica really runs, once Kubernetes substitutes the LeaderWorkerSet variables."""
    if nnodes == 1:
        return [argv]
    return [
        [
            token.replace(LWS_WORKER_INDEX, str(rank)).replace(LWS_LEADER_ADDRESS, "model-0.model.ns.svc")
            for token in argv
        ]
        for rank in range(nnodes)
    ]


# --------------------------------------------------------------------------------------- targets in code


def target_document(
    model: str,
    pool: dict[str, Any],
    *,
    serving: dict[str, Any] | None = None,
    model_extra: dict[str, Any] | None = None,
    name: str = "sweep",
) -> dict[str, Any]:
    return {
        "apiVersion": "frontier.dev/v1alpha1",
        "kind": "FrontierTarget",
        "metadata": {"name": name, "namespace": "serving"},
        "spec": {
            "model": {"name": model, **(model_extra or {})},
            "slo": {"tpot": {"p50": "30ms"}, "ttft": {"p99": "2s"}},
            "workload": {
                "requestRate": "5/s",
                "inputTokens": {"mean": 2000, "max": "8k"},
                "outputTokens": {"mean": 500, "max": "4k"},
            },
            "hardware": {"pools": [pool]},
            "serving": serving or {},
        },
    }


def pool_document(gpu: str, *, rdma: bool, name: str = "pool") -> dict[str, Any]:
    return {"name": name, "gpu": gpu, "maxGpus": 512, "rdma": {"enabled": rdma}}


def make_target(document: dict[str, Any]) -> FrontierTarget:
    return parse_target(document)


def worker(gpu: str, fmt: str, kv: str, tp: int, **fields: Any) -> WorkerConfig:
    defaults: dict[str, Any] = {"gpus_per_node": 8, "max_running_requests": 64, "chunked_prefill_size": 8192}
    return WorkerConfig(gpu=gpu, weight_format=fmt, kv_cache_format=kv, tp=tp, **{**defaults, **fields})


# ---------------------------------------------------------------------------------------------- sweep


@dataclass(frozen=True)
class SweepCase:
    label: str
    request: RenderRequest


# (model, weight format, MoE, has in-checkpoint MTP layers, EAGLE-3 draft); every pair has a checkpoint,
# or a BF16 checkpoint SGLang quantizes on load (gpt-oss fp8, Qwen3-235B mxfp4: `--quantization …`).
_MODELS = (
    ("Llama-3.1-8B-Instruct", "bf16", False, False, "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"),
    ("Llama-3.1-8B-Instruct", "fp8", False, False, "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"),
    ("Llama-3.1-70B-Instruct", "fp8", False, False, None),
    ("Qwen3-32B", "nvfp4", False, False, None),
    ("Qwen3-235B-A22B", "fp8", True, False, None),
    ("DeepSeek-R1", "fp8-block", True, True, None),
    ("DeepSeek-R1", "nvfp4", True, True, None),
    ("gpt-oss-120b", "mxfp4", True, False, None),
    ("gpt-oss-120b", "fp8", True, False, None),
    ("Qwen3-235B-A22B", "mxfp4", True, False, None),
    ("Kimi-K2.5", "w4a16", True, False, None),
    ("GLM-5", "fp8", True, True, None),
)
_GPUS = ("H100", "H200", "B200", "MI300X", "MI355X")
_KV = ("auto", "fp8_e4m3")


def _runs(fmt: str, kv: str, gpu_name: str) -> bool:
    gpu, quant, kv_format = find_gpu(gpu_name), find_quant_format(fmt), find_kv_cache_format(kv)
    assert gpu is not None and quant is not None and kv_format is not None
    return execution_mode(quant, gpu) != "unsupported" and kv_cache_supported(kv_format, gpu)


def _speculations(mtp: bool, draft: str | None) -> list[Speculative | None]:
    options: list[Speculative | None] = [None]
    if mtp:
        options.append(Speculative(SpeculativeAlgorithm.NEXTN, 3, 1, 4))
    if draft is not None:
        options.append(Speculative(SpeculativeAlgorithm.EAGLE3, 5, 1, 6, draft_model=draft))
    return options


def _sparse_attention_on_cuda(model: str, gpu_name: str) -> bool:
    """Where SGLang runs prefill context parallelism: DeepSeek-Sparse-Attention models on NVIDIA GPUs."""
    arch, gpu = find_model(model), find_gpu(gpu_name)
    assert arch is not None and gpu is not None
    return arch.mla is not None and arch.mla.index_topk > 0 and gpu.vendor is Vendor.NVIDIA


def _shapes(
    gpu: str, fmt: str, kv: str, moe: bool, speculative: Speculative | None, *, prefill_cp: bool = False
) -> Iterator[tuple[str, ServingConfig]]:
    def w(tp: int, **fields: Any) -> WorkerConfig:
        return worker(gpu, fmt, kv, tp, speculative=speculative, **fields)

    def unified(label: str, deployment: WorkerConfig, replicas: int = 1) -> tuple[str, ServingConfig]:
        return label, ServingConfig("m", (RoleDeployment(Role.UNIFIED, deployment, replicas),))

    def pd(label: str, prefill: WorkerConfig, decode: WorkerConfig, backend: str) -> tuple[str, ServingConfig]:
        roles = (RoleDeployment(Role.PREFILL, prefill, 2), RoleDeployment(Role.DECODE, decode, 1))
        return label, ServingConfig("m", roles, transfer_backend=backend)

    yield unified("single", w(8))
    yield unified("replicas", w(4, max_running_requests=128, chunked_prefill_size=4096), replicas=3)
    yield unified("multi-node", w(16, max_running_requests=256))
    if speculative is None:  # SGLang runs speculation under PP only in narrow cases (§2.3)
        yield unified("pipeline", w(8, pp=2, max_running_requests=96), replicas=2)
    if moe:
        yield unified("attn-dp-ep", w(8, attention_dp=8, ep=8, max_running_requests=512))
        wide = w(16, attention_dp=16, ep=16, moe_a2a_backend=MoeA2ABackend.DEEPEP, max_running_requests=1024)
        yield unified("wide-ep-multi-node", wide, replicas=2)
        yield pd("pd-wide-ep", w(8, ep=8, mem_fraction_static=0.8), wide, "mooncake")
    if prefill_cp:
        yield pd("pd-prefill-cp", w(8, ep=8, attention_cp=8), w(8, attention_dp=8, ep=8), "mooncake")
    yield pd("pd", w(8, chunked_prefill_size=16384), w(8, max_running_requests=256), "mooncake")
    yield pd("pd-nixl-multi-node", w(8), w(16, max_running_requests=256), "nixl")


def sweep_cases() -> list[SweepCase]:
    cases = []
    for (model, fmt, moe, mtp, draft), gpu, kv in itertools.product(_MODELS, _GPUS, _KV):
        if not _runs(fmt, kv, gpu):
            continue
        for speculative in _speculations(mtp, draft):
            extra = {"draftModel": {"path": draft}} if draft else None
            prefill_cp = _sparse_attention_on_cuda(model, gpu)
            for label, config in _shapes(gpu, fmt, kv, moe, speculative, prefill_cp=prefill_cp):
                # Plain P/D runs on a pool without RDMA (Mooncake over TCP); the rest have RDMA.
                rdma = label != "pd" and ("pd" in label or "node" in label)
                discovery = "stable-addresses" if label.endswith("replicas") else "label-selector"
                document = target_document(
                    model,
                    pool_document(gpu, rdma=rdma),
                    serving={"router": {"workerDiscovery": discovery}},
                    model_extra=extra,
                )
                spec_label = speculative.algorithm.value if speculative else "no-spec"
                cases.append(
                    SweepCase(
                        f"{model}/{fmt}/{gpu}/{kv}/{spec_label}/{label}",
                        RenderRequest(
                            target=make_target(document), config=replace(config, model=model), pool_name="pool"
                        ),
                    )
                )
    return cases
