"""From a plan and a target to the fleet's layout: per role the engine arguments, pods per replica and GPUs per pod.

Everything the Kubernetes builders need is decided here, and everything that would make a broken
manifest is refused here with a `RenderError`: the builders downstream cannot fail.
"""

from __future__ import annotations

from dataclasses import dataclass

from frontier_operator.api.spec import (
    FrontierTargetSpec,
    GpuPool,
    KvTransferBackend,
    ServingSpec,
    WeightFormat,
    WorkerDiscovery,
)
from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.models import find_model
from frontier_operator.catalog.quantization import (
    execution_mode,
    find_kv_cache_format,
    find_quant_format,
    kv_cache_supported,
)
from frontier_operator.catalog.types import GpuSpec, ModelArch, QuantFormat, Vendor
from frontier_operator.perf.types import MoeA2ABackend, Role, RoleDeployment, ServingConfig, WorkerConfig
from frontier_operator.planner.formats import default_page_size
from frontier_operator.render.engine_args import (
    DisaggregationArgs,
    EngineArgs,
    MultiNodeArgs,
    SpeculativeArgs,
    check_extra_args,
)
from frontier_operator.render.errors import RenderError, RenderErrorReason
from frontier_operator.render.names import label_value, object_name, revision_hash
from frontier_operator.render.request import RenderRequest, Variant
from frontier_operator.render.traffic import routed

# A quantized checkpoint is needed unless SGLang can quantize BF16 weights on load (§4.1).
_ONLINE_SOURCE_FORMAT = "bf16"
# `mooncake_tcp` is SGLang's Mooncake over TCP, for pools without RDMA (sglang-0.5.23.md §6.1).
_TCP_FALLBACK = {KvTransferBackend.MOONCAKE.value: "mooncake_tcp"}
_ROLE_ORDER = (Role.PREFILL, Role.DECODE, Role.UNIFIED)


@dataclass(frozen=True)
class RoleLayout:
    role: Role
    replicas: int
    worker: WorkerConfig
    engine: EngineArgs
    nnodes: int
    gpus_per_pod: int
    # A LeaderWorkerSet rather than a Deployment: the replica spans nodes, or the router needs stable addresses.
    uses_leader_worker_set: bool
    workload_name: str

    @property
    def pods_per_replica(self) -> int:
        return self.nnodes


@dataclass(frozen=True)
class FleetLayout:
    target_name: str
    namespace: str
    revision: str
    variant: Variant
    roles: tuple[RoleLayout, ...]
    gpu: GpuSpec
    pool: GpuPool
    spec: FrontierTargetSpec
    image: str
    has_router: bool

    @property
    def serving(self) -> ServingSpec:
        return self.spec.serving

    @property
    def disaggregated(self) -> bool:
        return any(role.role is Role.PREFILL for role in self.roles)

    @property
    def rdma(self) -> bool:
        """RDMA devices go to pods that move KV caches or collectives between nodes."""
        return self.pool.rdma.enabled and (self.disaggregated or any(r.nnodes > 1 for r in self.roles))

    @property
    def target_label(self) -> str:
        return label_value(self.target_name)

    def name(self, *parts: str) -> str:
        return object_name(self.target_name, self.revision, *parts)


def resolve_layout(request: RenderRequest) -> FleetLayout:
    target, config = request.target, request.config
    spec = target.spec
    name = str(target.metadata.get("name", ""))
    namespace = str(target.metadata.get("namespace") or "default")
    pool = _pool(spec, request.pool_name)
    gpu = _gpu(pool)
    arch = _check_model(spec, config)
    deployments = _roles_in_order(config)
    disaggregated = deployments[0].role is not Role.UNIFIED
    transfer_backend = _transfer_backend(config, spec, pool) if disaggregated else None
    extra_args = check_extra_args(spec.serving.extra_args)
    page_size = default_page_size(gpu) if disaggregated else None

    engines = {
        deployment.role: _engine_args(
            deployment,
            spec=spec,
            arch=arch,
            gpu=gpu,
            pool=pool,
            transfer_backend=transfer_backend,
            page_size=page_size,
            extra_args=extra_args,
            model=config.model,
        )
        for deployment in deployments
    }
    if disaggregated:
        _check_roles_agree(engines[Role.PREFILL], engines[Role.DECODE])
    image = spec.serving.rocm_image if gpu.vendor is Vendor.AMD else spec.serving.image
    revision = revision_hash(
        image,
        {role.value: engine.to_argv() for role, engine in engines.items()},
        sweep=request.variant is Variant.SWEEP,
    )
    has_router = routed(config)
    stable_addresses = has_router and spec.serving.router.worker_discovery is WorkerDiscovery.STABLE_ADDRESSES

    roles = []
    for deployment in deployments:
        worker = deployment.worker
        nnodes = _nodes(worker, pool, gpu)
        roles.append(
            RoleLayout(
                role=deployment.role,
                replicas=deployment.replicas,
                worker=worker,
                engine=engines[deployment.role],
                nnodes=nnodes,
                gpus_per_pod=worker.gpus // nnodes,
                uses_leader_worker_set=nnodes > 1 or stable_addresses,
                workload_name=object_name(name, revision, deployment.role.value),
            )
        )
    return FleetLayout(
        target_name=name,
        namespace=namespace,
        revision=revision,
        variant=request.variant,
        roles=tuple(roles),
        gpu=gpu,
        pool=pool,
        spec=spec,
        image=image,
        has_router=has_router,
    )


# ------------------------------------------------------------------------------------------ look-ups


def _pool(spec: FrontierTargetSpec, pool_name: str) -> GpuPool:
    for pool in spec.hardware.pools:
        if pool.name == pool_name:
            return pool
    known = ", ".join(pool.name for pool in spec.hardware.pools)
    raise RenderError(RenderErrorReason.POOL_NOT_FOUND, f"the plan names pool {pool_name!r}; the target has {known}")


def _gpu(pool: GpuPool) -> GpuSpec:
    gpu = find_gpu(pool.gpu)
    if gpu is None:
        raise RenderError(RenderErrorReason.UNKNOWN_GPU, f"pool {pool.name}: {pool.gpu!r} is not in the GPU catalog")
    return gpu


def _check_model(spec: FrontierTargetSpec, config: ServingConfig) -> ModelArch | None:
    arch = find_model(spec.model.name)
    same = config.model == spec.model.name or (arch is not None and find_model(config.model) is arch)
    if not same:
        raise RenderError(
            RenderErrorReason.MODEL_MISMATCH,
            f"the plan is for {config.model!r} but the target serves {spec.model.name!r}",
        )
    served = spec.model.served_model_name or spec.model.name
    if ":" in served:
        # SGLang reserves the colon for `model:adapter` (LoRA) and refuses such a name at startup.
        raise RenderError(
            RenderErrorReason.MODEL_MISMATCH,
            f"served model name {served!r} contains ':'; set spec.model.servedModelName without a colon",
        )
    return arch


def _roles_in_order(config: ServingConfig) -> list[RoleDeployment]:
    roles = sorted(config.roles, key=lambda deployment: _ROLE_ORDER.index(deployment.role))
    kinds = [deployment.role for deployment in roles]
    if kinds not in ([Role.UNIFIED], [Role.PREFILL, Role.DECODE]):
        raise RenderError(
            RenderErrorReason.ROLES_INCOMPLETE,
            f"roles {[kind.value for kind in kinds]}: expected one unified role, or one prefill and one decode role",
        )
    return roles


def _transfer_backend(config: ServingConfig, spec: FrontierTargetSpec, pool: GpuPool) -> str:
    backend = config.transfer_backend or spec.serving.kv_transfer_backend.value
    if backend not in {choice.value for choice in KvTransferBackend}:
        raise RenderError(
            RenderErrorReason.TRANSFER_BACKEND_UNKNOWN,
            f"transfer backend {backend!r}: expected one of {', '.join(c.value for c in KvTransferBackend)}",
        )
    return backend if pool.rdma.enabled else _TCP_FALLBACK.get(backend, backend)


# --------------------------------------------------------------------------------------- per worker


def _nodes(worker: WorkerConfig, pool: GpuPool, gpu: GpuSpec) -> int:
    node_gpus = pool.gpus_per_node or gpu.gpus_per_node
    if worker.gpus_per_node > node_gpus:
        raise RenderError(
            RenderErrorReason.GPUS_EXCEED_NODE,
            f"the plan puts {worker.gpus_per_node} GPUs on a node; pool {pool.name} nodes have {node_gpus}",
        )
    nnodes = worker.nnodes
    if worker.gpus % nnodes:
        raise RenderError(
            RenderErrorReason.NODES_UNEVEN,
            f"TP {worker.tp} x PP {worker.pp} = {worker.gpus} GPUs do not split evenly over {nnodes} nodes",
        )
    return nnodes


def _engine_args(
    deployment: RoleDeployment,
    *,
    spec: FrontierTargetSpec,
    arch: ModelArch | None,
    gpu: GpuSpec,
    pool: GpuPool,
    transfer_backend: str | None,
    page_size: int | None,
    extra_args: tuple[str, ...],
    model: str,
) -> EngineArgs:
    worker = deployment.worker
    _check_gpu(worker, gpu, pool)
    _check_parallelism(worker)
    fmt = find_quant_format(worker.weight_format)
    if fmt is None:
        raise RenderError(RenderErrorReason.UNKNOWN_FORMAT, f"weight format {worker.weight_format!r} is not known")
    if execution_mode(fmt, gpu) == "unsupported":
        raise RenderError(
            RenderErrorReason.FORMAT_UNSUPPORTED_ON_GPU,
            f"{fmt.name} weights do not run on {gpu.name} ({gpu.arch}) with SGLang",
        )
    kv_dtype = _kv_cache_dtype(worker.kv_cache_format, gpu)
    model_path, quantization = _checkpoint(spec, arch, fmt, model)
    _check_page_alignment(worker, deployment.role, page_size if page_size is not None else default_page_size(gpu))
    nnodes = _nodes(worker, pool, gpu)
    return EngineArgs(
        model_path=model_path,
        served_model_name=spec.model.served_model_name or spec.model.name,
        tp_size=worker.tp,
        pp_size=worker.pp,
        attn_dp_size=worker.attention_dp,
        attn_cp_size=worker.attention_cp,
        ep_size=worker.ep,
        moe_a2a_backend=None if worker.moe_a2a_backend is MoeA2ABackend.NONE else worker.moe_a2a_backend.value,
        max_running_requests=worker.max_running_requests,
        chunked_prefill_size=worker.chunked_prefill_size,
        mem_fraction_static=worker.mem_fraction_static,
        quantization=quantization,
        kv_cache_dtype=kv_dtype,
        page_size=page_size,
        speculative=_speculative(worker, spec),
        disaggregation=(
            DisaggregationArgs(mode=deployment.role.value, transfer_backend=transfer_backend)
            if transfer_backend is not None
            else None
        ),
        multi_node=MultiNodeArgs(nnodes=nnodes) if nnodes > 1 else None,
        extra_args=extra_args,
    )


def _check_gpu(worker: WorkerConfig, gpu: GpuSpec, pool: GpuPool) -> None:
    planned = find_gpu(worker.gpu)
    if planned is None or planned.name != gpu.name:
        raise RenderError(
            RenderErrorReason.GPU_NOT_IN_POOL,
            f"the plan runs on {worker.gpu!r} but pool {pool.name} has {gpu.name}",
        )


def _check_parallelism(worker: WorkerConfig) -> None:
    # SGLang's own topology rules (sglang-0.5.23.md §2.3); the planner should never break them.
    problems = []
    if worker.tp % worker.attention_dp:
        problems.append(f"attention DP {worker.attention_dp} does not divide TP {worker.tp}")
    if worker.tp % (worker.attention_dp * worker.attention_cp):
        problems.append(
            f"attention DP {worker.attention_dp} × context parallelism {worker.attention_cp} does not divide "
            f"TP {worker.tp}"
        )
    if worker.ep > 1 and worker.tp % worker.ep:
        problems.append(f"EP {worker.ep} does not divide TP {worker.tp}")
    if worker.speculative is not None and worker.pp > 1:
        problems.append("speculative decoding with pipeline parallelism (SGLang allows it only in narrow cases)")
    if worker.max_running_requests < worker.attention_dp:
        problems.append(
            f"batch cap {worker.max_running_requests} leaves no request for some of the {worker.attention_dp} "
            "attention-DP ranks"
        )
    if problems:
        raise RenderError(RenderErrorReason.PARALLELISM_INVALID, "; ".join(problems))


def _check_page_alignment(worker: WorkerConfig, role: Role, page_size: int) -> None:
    # SGLang asserts chunked_prefill_size % page_size == 0 except on PD decode (validation_hook).
    if role is not Role.DECODE and worker.chunked_prefill_size % page_size:
        raise RenderError(
            RenderErrorReason.CHUNK_NOT_PAGE_ALIGNED,
            f"chunked prefill {worker.chunked_prefill_size} is not a multiple of the KV page size {page_size}",
        )


def _kv_cache_dtype(kv_format: str, gpu: GpuSpec) -> str:
    # "auto" stays auto: SGLang then follows the checkpoint (FP8 KV when it was calibrated for it).
    if kv_format == "auto":
        return "auto"
    kv = find_kv_cache_format(kv_format)
    if kv is None:
        raise RenderError(RenderErrorReason.UNKNOWN_FORMAT, f"KV-cache format {kv_format!r} is not known")
    if not kv_cache_supported(kv, gpu):
        raise RenderError(
            RenderErrorReason.KV_FORMAT_UNSUPPORTED_ON_GPU,
            f"a {kv.name} KV cache does not run on {gpu.name} ({gpu.arch})",
        )
    return kv.sglang_value


def _checkpoint(
    spec: FrontierTargetSpec, arch: ModelArch | None, fmt: QuantFormat, model: str
) -> tuple[str, str | None]:
    """The repository to load and the `--quantization` value (None: the checkpoint is already `fmt`)."""
    direct = _checkpoint_in(spec, arch, fmt.name)
    if direct is not None:
        return direct, None
    if fmt.sglang_online_method is not None:
        source = _checkpoint_in(spec, arch, _ONLINE_SOURCE_FORMAT)
        if source is not None:
            return source, fmt.sglang_online_method
    raise RenderError(
        RenderErrorReason.NO_CHECKPOINT,
        f"no {fmt.name} checkpoint of {model} is known and SGLang cannot quantize to {fmt.name} on load; "
        f"add one under spec.model.checkpoints",
    )


def _checkpoint_in(spec: FrontierTargetSpec, arch: ModelArch | None, format_name: str) -> str | None:
    """A checkpoint whose weights are in `format_name`: the spec's own list first, then the catalog."""
    for listed, repository in spec.model.checkpoints.items():
        if _canonical(WeightFormat(listed).value) == format_name:
            return repository
    if arch is None:
        # A model outside the catalog: its name is the Hugging Face repository of the reference weights,
        # taken as BF16 (the `config.json` the spec carries does not tell the weight format).
        return spec.model.name if format_name == _ONLINE_SOURCE_FORMAT and not spec.model.checkpoints else None
    for catalog_format, repository in arch.checkpoints:
        if _canonical(catalog_format) == format_name:
            return repository
    # DeepSeek-style FP8 releases are block-quantized (`weight_block_size` [128, 128] in config.json).
    if format_name == "fp8-block" and _canonical(arch.native_dtype) == "fp8":
        return arch.hf_id
    return None


def _canonical(format_name: str) -> str:
    fmt = find_quant_format(format_name)
    return fmt.name if fmt is not None else format_name


def _speculative(worker: WorkerConfig, spec: FrontierTargetSpec) -> SpeculativeArgs | None:
    speculative = worker.speculative
    if speculative is None:
        return None
    draft = speculative.draft_model
    if draft is None and speculative.algorithm.value == "EAGLE3" and spec.model.draft_model is not None:
        draft = spec.model.draft_model.path
    if speculative.algorithm.value == "EAGLE3" and draft is None:
        raise RenderError(
            RenderErrorReason.SPEC_NEEDS_DRAFT_MODEL,
            "EAGLE-3 speculation needs a draft model; set spec.model.draftModel.path",
        )
    return SpeculativeArgs(
        algorithm=speculative.algorithm.value,
        num_steps=speculative.num_steps,
        eagle_topk=speculative.eagle_topk,
        num_draft_tokens=speculative.num_draft_tokens,
        draft_model_path=draft,
    )


def _check_roles_agree(prefill: EngineArgs, decode: EngineArgs) -> None:
    # Decode refuses the first bootstrap handshake otherwise (sglang-0.5.23.md §4.2, §6.1).
    for what, left, right in (
        ("KV-cache dtype", prefill.kv_cache_dtype, decode.kv_cache_dtype),
        ("page size", prefill.page_size, decode.page_size),
        ("model", prefill.model_path, decode.model_path),
    ):
        if left != right:
            raise RenderError(
                RenderErrorReason.PD_ROLES_DISAGREE, f"prefill and decode must share the {what}: {left} vs {right}"
            )
