"""`FrontierTarget.spec`: what the platform team wants — model, SLO, objective, traffic, GPUs, knobs.

Defaults are chosen so that a spec naming only a model, an SLO, a request rate and one GPU pool is
complete; each default is stated in its field's description. Cross-field rules live in validators
here (with the message the user sees) and, where the API server can check them itself, as CEL rules
in `json_schema_extra` so `kubectl apply` refuses the spec before the operator ever sees it.
"""

from __future__ import annotations

import itertools
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from frontier_operator.api.base import ApiModel
from frontier_operator.api.sweep import SweepSpec
from frontier_operator.api.units import Duration, Fraction, Price, Rate, TokenCount

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
PERCENTILES = ("p50", "p90", "p95", "p99")


def _field_error(message: str, hint: str) -> PydanticCustomError:
    return PydanticCustomError("spec_rule", "{message}", {"message": message, "hint": hint})


# ---------------------------------------------------------------------------------------------- model


class ConfigMapKeyRef(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=253)]
    """Name of a ConfigMap in the target's namespace."""
    key: Annotated[str, Field(min_length=1, max_length=253)] = "config.json"
    """Key holding the Hugging Face `config.json`. Default: config.json."""


class ModelConfigSource(ApiModel):
    """A Hugging Face `config.json`, for a model the built-in catalog does not know."""

    inline: Annotated[
        dict[str, Any] | None,
        Field(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True, "type": "object"}),
    ] = None
    """The `config.json` object itself, pasted into the spec."""
    config_map_ref: ConfigMapKeyRef | None = None
    """A ConfigMap key holding the `config.json` text."""

    @model_validator(mode="after")
    def _exactly_one_source(self) -> ModelConfigSource:
        if (self.inline is None) == (self.config_map_ref is None):
            raise _field_error("give exactly one of inline and configMapRef", "keep one of the two")
        return self


class WeightFormat(StrEnum):
    BF16 = "bf16"
    FP8 = "fp8"
    FP8_BLOCK = "fp8-block"
    MXFP4 = "mxfp4"
    NVFP4 = "nvfp4"
    W4A16 = "w4a16"


class KvCacheDtype(StrEnum):
    AUTO = "auto"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"
    MXFP8 = "mxfp8"
    NVFP4 = "nvfp4"


class DraftAlgorithm(StrEnum):
    EAGLE3 = "eagle3"


class DraftModel(ApiModel):
    path: Annotated[str, Field(min_length=1, max_length=512)]
    """Hugging Face repository or path of the EAGLE-3 draft model."""
    algorithm: DraftAlgorithm = DraftAlgorithm.EAGLE3
    """Speculative algorithm the draft was trained for. Default: eagle3."""


class ModelSpec(ApiModel):
    """The model to serve: a catalog name or Hugging Face id, or a `config.json` for unknown models."""

    name: Annotated[str, Field(min_length=1, max_length=256)]
    """Catalog name (`GLM-5`, `DeepSeek-R1`) or Hugging Face id (`zai-org/GLM-5`); `frontier catalog` lists them."""
    config: ModelConfigSource | None = None
    """Architecture for a model the catalog does not know. Default: looked up in the catalog by name."""
    checkpoints: Annotated[dict[WeightFormat, Annotated[str, Field(min_length=1, max_length=512)]], Field()] = {}
    """Checkpoint per weight format (`fp8: zai-org/GLM-5-FP8`). Default: the catalog's checkpoints, else `name`."""
    draft_model: DraftModel | None = None
    """Separate draft model for EAGLE-3 speculation. Default: the checkpoint's own MTP layers, where it has them."""
    served_model_name: Annotated[str | None, Field(max_length=256)] = None
    """Name clients send in the OpenAI `model` field. Default: `name`."""


# ------------------------------------------------------------------------------------------------ slo


class PercentileBounds(ApiModel):
    """Upper bounds per percentile: `{p50: 20ms, p99: 40ms}`. At least one percentile."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": {
            "minProperties": 1,
            "x-kubernetes-validations": [
                {
                    "rule": f"!has(self.{lo}) || !has(self.{hi}) || duration(self.{lo}) <= duration(self.{hi})",
                    "message": f"{lo} must not exceed {hi}",
                }
                for lo, hi in (("p50", "p90"), ("p90", "p95"), ("p95", "p99"), ("p50", "p99"))
            ],
        }
    }

    p50: Duration | None = None
    """Median bound."""
    p90: Duration | None = None
    """90th-percentile bound."""
    p95: Duration | None = None
    """95th-percentile bound."""
    p99: Duration | None = None
    """99th-percentile bound."""

    def bounds(self) -> list[tuple[int, Duration]]:
        return [(int(p[1:]), value) for p in PERCENTILES if (value := getattr(self, p)) is not None]

    @model_validator(mode="after")
    def _ordered(self) -> PercentileBounds:
        bounds = self.bounds()
        if not bounds:
            raise _field_error("no percentile given", "add at least one of p50, p90, p95, p99")
        for (p_lo, lo), (p_hi, hi) in itertools.pairwise(bounds):
            if lo > hi:
                raise _field_error(
                    f"p{p_lo} {lo} is looser than p{p_hi} {hi}",
                    f"a lower percentile cannot exceed a higher one; raise p{p_hi} or lower p{p_lo}",
                )
        return self


class SloSpec(ApiModel):
    """Latency objectives the fleet must meet; any of ttft, tpot, itl, e2e, at p50/p90/p95/p99."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.ttft) || has(self.tpot) || has(self.itl) || has(self.e2e)",
                    "message": "set at least one of ttft, tpot, itl, e2e",
                }
            ]
        }
    }

    ttft: PercentileBounds | None = None
    """Time to first token."""
    tpot: PercentileBounds | None = None
    """Time per output token after the first (per-request mean inter-token time)."""
    itl: PercentileBounds | None = None
    """Inter-token latency (each gap between two streamed tokens)."""
    # Spelled out: the camelCase generator would publish `e2E`, which no user writes and the CEL rule above
    # (`has(self.e2e)`) would not find.
    e2e: Annotated[PercentileBounds | None, Field(alias="e2e")] = None
    """End-to-end request latency."""
    min_output_throughput: Rate | None = None
    """Output tokens per second the fleet must sustain at least (`5000/s`). Default: none beyond the request rate."""

    def objectives(self) -> list[tuple[str, int, Duration]]:
        return [
            (metric, percentile, bound)
            for metric in ("ttft", "tpot", "itl", "e2e")
            if (bounds := getattr(self, metric)) is not None
            for percentile, bound in bounds.bounds()
        ]

    @model_validator(mode="after")
    def _some_objective(self) -> SloSpec:
        if not self.objectives():
            raise _field_error(
                "no latency objective", "set at least one of ttft, tpot, itl, e2e, e.g. tpot: {p50: 20ms}"
            )
        return self


class Objective(StrEnum):
    MINIMIZE_COST = "minimize-cost"
    MINIMIZE_GPUS = "minimize-gpus"
    MAXIMIZE_THROUGHPUT = "maximize-throughput"
    MINIMIZE_LATENCY = "minimize-latency"


# ------------------------------------------------------------------------------------------- workload


class WorkloadKind(StrEnum):
    AGENTIC_CODING = "agentic-coding"
    CHAT = "chat"
    REASONING = "reasoning"
    RAG = "rag"
    SUMMARIZATION = "summarization"
    BATCH = "batch"


class ArrivalPattern(StrEnum):
    POISSON = "poisson"
    BURSTY = "bursty"


class LengthSpec(ApiModel):
    """Token-length distribution of requests: mean, optionally p90 and a hard maximum."""

    mean: TokenCount
    """Mean length in tokens (`2k`, `32Ki`, `600`)."""
    p90: TokenCount | None = None
    """90th percentile. Default: the mean (all requests alike)."""
    max: TokenCount | None = None
    """Longest request the fleet must accept; sizes the context window. Default: 4 × p90, within the model's context."""

    @model_validator(mode="after")
    def _ordered(self) -> LengthSpec:
        if self.p90 is not None and self.p90 < self.mean:
            raise _field_error(f"p90 {self.p90} is below the mean {self.mean}", "p90 must be at least the mean")
        top = self.p90 if self.p90 is not None else self.mean
        if self.max is not None and self.max < top:
            raise _field_error(f"max {self.max} is below {top}", "max must be at least the mean and p90")
        return self


# A million requests per second: far beyond the largest fleet one target plans (GPU budgets are thousands).
MAX_REQUEST_RATE_PER_S = 1e6


class WorkloadSpec(ApiModel):
    """The traffic the fleet must carry; once enough is observed, the observed workload replaces it."""

    request_rate: Rate
    """Requests per second at peak (`40/s`, `2400/min`)."""
    input_tokens: LengthSpec
    """Prompt lengths, including any cached prefix."""
    output_tokens: LengthSpec
    """Generated lengths."""
    prefix_cache_hit_rate: Fraction = Fraction(0.0, "0%")
    """Share of prompt tokens served from the prefix cache (`80%` for agentic coding). Default: 0%."""
    kind: WorkloadKind = WorkloadKind.CHAT
    """Traffic kind; shapes speculative-decoding acceptance and burstiness. Default: chat."""
    arrival: ArrivalPattern = ArrivalPattern.POISSON
    """Arrival process: poisson, or bursty (coefficient of variation 2). Default: poisson."""

    @model_validator(mode="after")
    def _some_traffic(self) -> WorkloadSpec:
        # The fleet is sized for this rate; at zero every configuration carries nothing at no cost.
        if self.request_rate <= 0:
            raise _field_error(
                f"requestRate {self.request_rate} is not above zero",
                "write the peak rate the fleet must carry, e.g. 5/s",
            )
        # Past any fleet one target could hold, and past what the search's replica arithmetic can count
        # (1e307/s overflowed it).
        if self.request_rate > MAX_REQUEST_RATE_PER_S:
            raise _field_error(
                f"requestRate {float(self.request_rate):.4g}/s is above {MAX_REQUEST_RATE_PER_S:.0f}/s",
                "split traffic this large over several targets",
            )
        return self


# ------------------------------------------------------------------------------------------- hardware


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(ApiModel):
    """A Kubernetes toleration, copied to the pool's pods."""

    key: Annotated[str | None, Field(max_length=316)] = None
    """Taint key; empty with operator Exists tolerates everything."""
    operator: TolerationOperator = TolerationOperator.EQUAL
    """Exists or Equal. Default: Equal."""
    value: Annotated[str | None, Field(max_length=63)] = None
    """Taint value for operator Equal."""
    effect: TaintEffect | None = None
    """NoSchedule, PreferNoSchedule or NoExecute. Default: all effects."""
    toleration_seconds: Annotated[int | None, Field(ge=0)] = None
    """How long a NoExecute taint is tolerated. Default: forever."""


class RdmaSpec(ApiModel):
    enabled: bool = False
    """Pods get RDMA devices for KV transfer and multi-node collectives. Default: false."""
    resource_name: Annotated[str, Field(min_length=1, max_length=253)] = "rdma/ib"
    """Extended resource that exposes the RDMA devices. Default: rdma/ib."""
    devices_per_pod: Annotated[int, Field(ge=1, le=64)] = 1
    """RDMA resource units requested per pod. Default: 1."""


class GpuPool(ApiModel):
    """A set of identical GPU nodes the operator may place workloads on."""

    name: Annotated[str, Field(min_length=1, max_length=40, pattern=DNS_LABEL)]
    """Pool name (a DNS label), used in object names and explanations."""
    gpu: Annotated[str, Field(min_length=1, max_length=64)]
    """GPU type from the catalog: H100, H200, B200, B300, GB200, GB300, MI300X, MI355X."""
    max_gpus: Annotated[int, Field(ge=1, le=100_000)]
    """Most GPUs the fleet may use from this pool, all roles and replicas together."""
    gpus_per_node: Annotated[int | None, Field(ge=1, le=72)] = None
    """GPUs per node. Default: the GPU's usual node (8 for HGX/MI nodes, 4 for GB200/GB300 trays)."""
    price_per_gpu_hour: Price | None = None
    """Cost of one GPU-hour (`"$2.30/h"`; quote decimals). Default: the catalog price of the GPU."""
    node_selector: Annotated[dict[str, Annotated[str, Field(max_length=253)]], Field(max_length=32)] = {}
    """Node labels the pool's pods must match."""
    tolerations: Annotated[list[Toleration], Field(max_length=32)] = []
    """Tolerations for the pool's taints."""
    rdma: RdmaSpec = RdmaSpec()
    """RDMA networking of the pool. Default: none."""


class HardwareSpec(ApiModel):
    model_config = ApiModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": "self.pools.all(p, self.pools.exists_one(q, q.name == p.name))",
                    "message": "pool names must be unique",
                }
            ]
        }
    }

    pools: Annotated[list[GpuPool], Field(min_length=1, max_length=8)]
    """GPU pools to choose from; the planner may pick any one of them."""

    @model_validator(mode="after")
    def _unique_names(self) -> HardwareSpec:
        names = [pool.name for pool in self.pools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise _field_error(f"pool name {duplicates[0]!r} is used twice", "give every pool its own name")
        return self


# --------------------------------------------------------------------------------------------- search


class Disaggregation(StrEnum):
    AUTO = "auto"
    ALWAYS = "always"
    NEVER = "never"


class SpeculativeMode(StrEnum):
    AUTO = "auto"
    OFF = "off"


class ParallelismLimits(ApiModel):
    max_tp: Annotated[int | None, Field(ge=1, le=1024)] = None
    """Widest tensor parallelism per replica. Default: as wide as the pool allows."""
    max_ep: Annotated[int | None, Field(ge=1, le=1024)] = None
    """Widest expert parallelism. Default: as wide as the pool allows."""
    attention_dp: bool = True
    """Allow attention data parallelism (DP attention). Default: true."""
    prefill_context_parallel: bool = True
    """Allow prefill context parallelism on P/D prefill workers of DeepSeek-Sparse-Attention models (GLM-5,
    DeepSeek-V3.2): the GPUs of a prefill server split a long prompt's tokens. Default: true."""
    multi_node: bool = True
    """Allow replicas that span nodes (LeaderWorkerSet). Default: true."""


_DEFAULT_FORMATS = [
    WeightFormat.BF16,
    WeightFormat.FP8,
    WeightFormat.FP8_BLOCK,
    WeightFormat.MXFP4,
    WeightFormat.NVFP4,
]


class SearchSpec(ApiModel):
    """Which techniques the planner may use."""

    quantizations: Annotated[list[WeightFormat], Field(min_length=1, max_length=6)] = list(_DEFAULT_FORMATS)
    """Weight formats to consider. Default: bf16, fp8, fp8-block, mxfp4, nvfp4 (w4a16 only when listed)."""
    kv_cache_dtypes: Annotated[list[KvCacheDtype], Field(min_length=1, max_length=5)] = [
        KvCacheDtype.AUTO,
        KvCacheDtype.FP8_E4M3,
    ]
    """KV-cache formats to consider. Default: auto (model dtype) and fp8_e4m3."""
    max_quality_loss: Fraction = Fraction(0.01, "1%")
    """Largest typical accuracy loss a format may cost (from the catalog's table). Default: 1%."""
    disaggregation: Disaggregation = Disaggregation.AUTO
    """Prefill/decode split: auto (when cheaper), always, never. Default: auto."""
    speculative: SpeculativeMode = SpeculativeMode.AUTO
    """Speculative decoding (MTP/EAGLE-3): auto (when it helps) or off. Default: auto."""
    parallelism: ParallelismLimits = ParallelismLimits()
    """Limits on the parallel layouts searched. Default: none."""

    @model_validator(mode="after")
    def _no_repeats(self) -> SearchSpec:
        for name, values in (("quantizations", self.quantizations), ("kvCacheDtypes", self.kv_cache_dtypes)):
            if len(set(values)) != len(values):
                raise _field_error(f"{name} lists a value twice", "list each value once")
        return self


# --------------------------------------------------------------------------------------------- tuning


class TuningMode(StrEnum):
    OBSERVE = "observe"
    RECOMMEND = "recommend"
    AUTO = "auto"


class CanarySpec(ApiModel):
    traffic_share: Fraction | None = None
    """With http-route splitting (spec.serving.traffic), the share of user traffic a canary revision receives.
    With service splitting, the most it may receive: the target's Service spreads connections evenly over the
    entry pods of both revisions (router pods, else the one engine leader), so a canary receives its entry pods'
    share, half when each revision has one router pod or one replica, and a lower value holds back cheaper,
    headroom, exploration and image canaries (not a remedy canary for a violated SLO). Default: 10% with
    http-route, raised when 10% of the traffic would complete too few requests per window to judge the canary; at
    most 25% for an exploration canary and no limit for the others with service."""
    min_duration: Duration = Duration(900.0, "15m")
    """Shortest comparison before a canary is promoted or rolled back. Default: 15m."""
    promote_margin: Fraction = Fraction(0.03, "3%")
    """How much cheaper a canary must be, meeting every SLO, to be promoted; an image canary, or a headroom canary
    (the plan in force, for a stable fleet without the capacity headroom the planner sizes for), may cost up to
    this much more. Default: 3%."""


_NOT_SHORTER = "!has(self.{longer}) || !has(self.interval) || duration(self.{longer}) >= duration(self.interval)"


class TuningSpec(ApiModel):
    """How the operator keeps nudging the configuration from Prometheus feedback."""

    model_config = ApiModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": _NOT_SHORTER.format(longer="cooldown"),
                    "message": "cooldown must be at least interval",
                },
                {
                    "rule": _NOT_SHORTER.format(longer="window"),
                    "message": "window must be at least interval",
                },
            ]
        }
    }

    mode: TuningMode = TuningMode.RECOMMEND
    """observe (report only), recommend (propose; apply on approval) or auto. Default: recommend."""
    interval: Duration = Duration(60.0, "60s")
    """How often metrics are read and a decision is taken. Default: 60s."""
    window: Duration = Duration(300.0, "5m")
    """Metrics window each decision looks at. Default: 5m."""
    cooldown: Duration = Duration(600.0, "10m")
    """Quiet time after a change before the next one. Default: 10m."""
    max_changes_per_hour: Annotated[int, Field(ge=0, le=60)] = 4
    """Upper bound on applied changes per rolling hour. Default: 4."""
    canary: CanarySpec = CanarySpec()
    """Canary settings for structural changes (parallelism, format, speculation, P/D). Default: 15m."""
    exploration: bool = True
    """Now and then canary an uncertain but promising neighbour configuration. Default: true."""
    prometheus_url: Annotated[str, Field(min_length=1, max_length=512, pattern=r"^https?://")] = (
        "http://prometheus-operated.monitoring.svc:9090"
    )
    """Prometheus that scrapes the SGLang pods. Default: http://prometheus-operated.monitoring.svc:9090."""
    paused: bool = False
    """Stop all tuning changes (the frontier.dev/paused annotation does the same). Default: false."""

    @model_validator(mode="after")
    def _ordered(self) -> TuningSpec:
        if self.cooldown < self.interval:
            raise _field_error(
                f"cooldown {self.cooldown} is shorter than interval {self.interval}",
                "make cooldown at least the interval",
            )
        if self.window < self.interval:
            raise _field_error(
                f"window {self.window} is shorter than interval {self.interval}",
                "make window at least the interval",
            )
        return self


# -------------------------------------------------------------------------------------------- serving


class SecretKeyRef(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=253)]
    """Secret name in the target's namespace."""
    key: Annotated[str, Field(min_length=1, max_length=253)] = "token"
    """Key within the Secret. Default: token."""


class EnvValueFrom(ApiModel):
    secret_key_ref: SecretKeyRef | None = None
    """Take the value from a Secret key."""
    config_map_key_ref: ConfigMapKeyRef | None = None
    """Take the value from a ConfigMap key."""


class EnvVar(ApiModel):
    name: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    """Variable name."""
    value: Annotated[str | None, Field(max_length=4096)] = None
    """Literal value."""
    value_from: EnvValueFrom | None = None
    """Value from a Secret or ConfigMap key."""


class CacheVolume(ApiModel):
    claim_name: Annotated[str | None, Field(max_length=253)] = None
    """Existing PersistentVolumeClaim for model weights and JIT caches. Default: an emptyDir per pod."""
    size: Annotated[str, Field(max_length=32, pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")] = "500Gi"
    """Size limit of the emptyDir when no claim is given. Default: 500Gi."""
    mount_path: Annotated[str, Field(max_length=256, pattern=r"^/")] = "/root/.cache"
    """Where the cache is mounted; SGLANG_CACHE_DIR and HF_HOME point inside it. Default: /root/.cache."""


class ResourceList(ApiModel):
    cpu: Annotated[str | None, Field(max_length=32, pattern=r"^[0-9]+(\.[0-9]+)?m?$")] = None
    """CPU request per engine pod (`32`, `500m`). Default: 8 per GPU."""
    memory: Annotated[str | None, Field(max_length=32, pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")] = None
    """Memory request per engine pod (`512Gi`). Default: 96Gi per GPU."""


class KvTransferBackend(StrEnum):
    MOONCAKE = "mooncake"
    NIXL = "nixl"


class WorkerDiscovery(StrEnum):
    LABEL_SELECTOR = "label-selector"
    STABLE_ADDRESSES = "stable-addresses"


class RouterSpec(ApiModel):
    """The SGLang router (`sglang_router.launch_router`) in front of P/D workers or several replicas."""

    image: Annotated[str | None, Field(min_length=1, max_length=512)] = None
    """Router image. Default: the engine image, which ships the `sglang_router` module."""
    replicas: Annotated[int, Field(ge=1, le=16)] = 1
    """Router pods. Each keeps its own cache-aware prefix tree, so more than one dilutes KV-aware routing.
    Default: 1."""
    worker_discovery: WorkerDiscovery = WorkerDiscovery.LABEL_SELECTOR
    """How the router finds engine pods: label-selector (Kubernetes service discovery; the router gets a
    ServiceAccount that may list and watch pods) or stable-addresses (every engine replica runs as a
    LeaderWorkerSet group and the router is given the DNS name of each group leader). Default: label-selector."""
    resources: ResourceList = ResourceList()
    """CPU and memory of each router pod. Default: 2 CPU and 4Gi."""


class TrafficSplitting(StrEnum):
    SERVICE = "service"
    HTTP_ROUTE = "http-route"


# Gateway API's patterns for a parent reference's group and section name (gateway-api.sigs.k8s.io/reference/spec).
_SECTION_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_ROUTE_GROUP = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class RouteParent(ApiModel):
    """A Gateway API parent reference: the Gateway (or, for a mesh, the Service) an HTTPRoute attaches to."""

    group: Annotated[str, Field(max_length=253, pattern=_ROUTE_GROUP)] = "gateway.networking.k8s.io"
    """API group of the parent: gateway.networking.k8s.io for a Gateway, empty for a Service. Default: the former."""
    kind: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")] = (
        "Gateway"
    )
    """Kind of the parent: Gateway, or Service for a mesh (GAMMA). Default: Gateway."""
    name: Annotated[str, Field(min_length=1, max_length=253)]
    """Name of the parent."""
    namespace: Annotated[str | None, Field(max_length=63, pattern=DNS_LABEL)] = None
    """Namespace of the parent. Default: the target's."""
    section_name: Annotated[str | None, Field(min_length=1, max_length=253, pattern=_SECTION_NAME)] = None
    """A listener of a Gateway (or a port name of a Service). Default: all of them."""


class TrafficSpec(ApiModel):
    """How user traffic is divided between the stable revision and a canary."""

    splitting: TrafficSplitting = TrafficSplitting.SERVICE
    """service: through the target's Service, which spreads connections evenly over the entry pods (router pods,
    else the engine leader) of both revisions — a canary usually takes half. http-route: a Gateway API
    HTTPRoute with weighted per-revision Services gives a canary exactly its share (spec.tuning.canary); needs
    the Gateway API CRDs and a Gateway or mesh that implements them, and clients that call through it. The
    loop checks the split it observes and rolls back a canary that receives far more than planned.
    Default: service."""
    parent_refs: Annotated[list[RouteParent], Field(max_length=16)] = []
    """http-route: where the HTTPRoute attaches. Default: the target's own Service, for a mesh (GAMMA) that
    applies the weights to traffic addressed to it."""

    @property
    def weighted(self) -> bool:
        """A weighted HTTPRoute gives a canary its share, not the Service's spread over entry pods."""
        return self.splitting is TrafficSplitting.HTTP_ROUTE


class ServingSpec(ApiModel):
    """How the engine pods are built."""

    image: Annotated[str, Field(min_length=1, max_length=512)] = "lmsysorg/sglang:v0.5.23-cu130"
    """SGLang image for NVIDIA pools. Default: lmsysorg/sglang:v0.5.23-cu130."""
    rocm_image: Annotated[str, Field(min_length=1, max_length=512)] = "lmsysorg/sglang:v0.5.23-rocm700-mi35x"
    """SGLang image for AMD pools. Default: lmsysorg/sglang:v0.5.23-rocm700-mi35x."""
    extra_args: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=64)] = []
    """Extra `sglang.launch_server` arguments, appended last; flags the operator owns are refused."""
    env: Annotated[list[EnvVar], Field(max_length=64)] = []
    """Extra environment variables for engine containers."""
    resources: ResourceList = ResourceList()
    """CPU and memory per engine pod; GPUs follow from the plan. Default: 8 CPU and 96Gi per GPU."""
    hf_token_secret_ref: SecretKeyRef | None = None
    """Secret with a Hugging Face token for gated checkpoints; never copied into the spec or status."""
    cache: CacheVolume = CacheVolume()
    """Model and JIT cache volume. Default: a 500Gi emptyDir at /root/.cache."""
    shm_size: Annotated[str, Field(max_length=32, pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")] = "32Gi"
    """Size of the memory-backed /dev/shm. Default: 32Gi."""
    kv_transfer_backend: KvTransferBackend = KvTransferBackend.MOONCAKE
    """KV-cache transfer between prefill and decode workers (P/D only): mooncake or nixl. A transfer backend
    chosen by the plan takes precedence. Default: mooncake."""
    router: RouterSpec = RouterSpec()
    """The router in front of P/D workers or several aggregated replicas. Default: one router pod, the engine image."""
    traffic: TrafficSpec = TrafficSpec()
    """How a canary's share of user traffic is realised. Default: through the target's Service."""


# ----------------------------------------------------------------------------------------------- root


class FrontierTargetSpec(ApiModel):
    """Intent: serve this model for this traffic within this SLO, at the best point of the frontier."""

    model: ModelSpec
    """The model to serve."""
    slo: SloSpec
    """Latency objectives (and optional minimum throughput)."""
    objective: Objective = Objective.MINIMIZE_COST
    """What to optimise among configurations meeting the SLO: minimize-cost ($ per million tokens),
    minimize-gpus, maximize-throughput, minimize-latency. Default: minimize-cost."""
    workload: WorkloadSpec
    """Expected traffic."""
    hardware: HardwareSpec
    """GPU pools and budgets."""
    search: SearchSpec = SearchSpec()
    """Techniques the planner may use. Default: every technique, within a 1% quality-loss budget."""
    tuning: TuningSpec = TuningSpec()
    """Closed-loop tuning. Default: recommend mode, 60s interval."""
    serving: ServingSpec = ServingSpec()
    """Engine pod settings. Default: the pinned SGLang image."""
    sweep: SweepSpec = SweepSpec()
    """Benchmark sweeps of candidate configurations. Default: 30 GPU-min, on request only."""
