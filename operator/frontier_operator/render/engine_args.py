"""A typed model of the `sglang.launch_server` arguments the operator owns, and its argv.

Every flag is written with its full name: SGLang's parser accepts any unique prefix, and a prefix that
is unique today becomes ambiguous when a flag is added (`--cuda-graph-max-bs` broke that way in
0.5.23, sglang-0.5.23.md §10). The user's extra arguments come last and may not touch a flag listed
in `OWNED_FLAGS`, nor abbreviate one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from frontier_operator.render.errors import RenderError, RenderErrorReason
from frontier_operator.render.sglang_flags import FLAG_NAMES, OPTIONS

LAUNCH_COMMAND = ("python3", "-m", "sglang.launch_server")

HTTP_PORT = 30000
# SGLang's own default (sglang-0.5.23.md §6.1); written on both roles so the router and decode agree.
BOOTSTRAP_PORT = 8998
# torch.distributed rendezvous on the group leader; attention DP also uses the next six ports (§2.3).
DIST_INIT_PORT = 20000

# Values Kubernetes substitutes from the LeaderWorkerSet environment (`$(VAR)` in container args).
LWS_LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
LWS_WORKER_INDEX = "$(LWS_WORKER_INDEX)"


@dataclass(frozen=True)
class SpeculativeArgs:
    # SGLang's spelling: EAGLE3, or NEXTN for draft layers inside the checkpoint ("MTP" is rejected, §5).
    algorithm: str
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    draft_model_path: str | None = None


@dataclass(frozen=True)
class DisaggregationArgs:
    mode: str  # "prefill" | "decode"
    transfer_backend: str  # "mooncake" | "nixl"
    bootstrap_port: int = BOOTSTRAP_PORT


@dataclass(frozen=True)
class MultiNodeArgs:
    """Rank wiring of one replica spread over `nnodes` pods; every pod runs the same argv."""

    nnodes: int
    node_rank: str = LWS_WORKER_INDEX
    dist_init_addr: str = f"{LWS_LEADER_ADDRESS}:{DIST_INIT_PORT}"


@dataclass(frozen=True)
class EngineArgs:
    model_path: str
    served_model_name: str
    tp_size: int
    max_running_requests: int
    chunked_prefill_size: int
    kv_cache_dtype: str
    pp_size: int = 1
    attn_dp_size: int = 1
    # Prefill context parallelism; SGLang requires a split strategy with it, and DeepSeek-V3.2-style DSA
    # models accept only `interleave` (parallel_hook), so the renderer always asks for that one.
    attn_cp_size: int = 1
    ep_size: int = 1
    moe_a2a_backend: str | None = None
    # None: the checkpoint is already in the served format and SGLang reads it from its config (§4.1).
    quantization: str | None = None
    mem_fraction_static: float | None = None
    page_size: int | None = None
    speculative: SpeculativeArgs | None = None
    disaggregation: DisaggregationArgs | None = None
    multi_node: MultiNodeArgs | None = None
    extra_args: tuple[str, ...] = ()
    host: str = "0.0.0.0"
    port: int = HTTP_PORT

    def to_argv(self) -> list[str]:
        """The arguments after `python3 -m sglang.launch_server`, operator-owned flags first."""
        argv = [
            "--model-path",
            self.model_path,
            "--served-model-name",
            self.served_model_name,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--enable-metrics",
            "--tp-size",
            str(self.tp_size),
        ]
        if self.pp_size > 1:
            argv += ["--pp-size", str(self.pp_size)]
        if self.attn_dp_size > 1:
            argv += ["--attn-dp-size", str(self.attn_dp_size)]
        if self.attn_cp_size > 1:
            argv += ["--attn-cp-size", str(self.attn_cp_size), "--enable-prefill-cp", "--cp-strategy", "interleave"]
        if self.ep_size > 1:
            argv += ["--ep-size", str(self.ep_size)]
        if self.moe_a2a_backend is not None:
            argv += ["--moe-a2a-backend", self.moe_a2a_backend]
        argv += [
            "--max-running-requests",
            str(self.max_running_requests),
            "--chunked-prefill-size",
            str(self.chunked_prefill_size),
        ]
        if self.mem_fraction_static is not None:
            argv += ["--mem-fraction-static", f"{self.mem_fraction_static:.4g}"]
        if self.quantization is not None:
            argv += ["--quantization", self.quantization]
        argv += ["--kv-cache-dtype", self.kv_cache_dtype]
        if self.page_size is not None:
            argv += ["--page-size", str(self.page_size)]
        if self.speculative is not None:
            argv += _speculative_argv(self.speculative)
        if self.disaggregation is not None:
            argv += [
                "--disaggregation-mode",
                self.disaggregation.mode,
                "--disaggregation-transfer-backend",
                self.disaggregation.transfer_backend,
                "--disaggregation-bootstrap-port",
                str(self.disaggregation.bootstrap_port),
            ]
        if self.multi_node is not None:
            argv += [
                "--nnodes",
                str(self.multi_node.nnodes),
                "--node-rank",
                self.multi_node.node_rank,
                "--dist-init-addr",
                self.multi_node.dist_init_addr,
            ]
        return argv + list(self.extra_args)


def _speculative_argv(speculative: SpeculativeArgs) -> list[str]:
    argv = ["--speculative-algorithm", speculative.algorithm]
    if speculative.draft_model_path is not None:
        argv += ["--speculative-draft-model-path", speculative.draft_model_path]
    # All three or none: SGLang asserts that topk and draft tokens are not given without num-steps (§5).
    return [
        *argv,
        "--speculative-num-steps",
        str(speculative.num_steps),
        "--speculative-eagle-topk",
        str(speculative.eagle_topk),
        "--speculative-num-draft-tokens",
        str(speculative.num_draft_tokens),
    ]


def _aliases(*flags: str) -> frozenset[str]:
    """The flags and every alias SGLang registers for them (e.g. `--tp-size` = `--tensor-parallel-size`)."""
    names: set[str] = set()
    for option_strings, _ in OPTIONS:
        if any(flag in option_strings for flag in flags):
            names.update(option_strings)
    return frozenset(names)


# Flags whose value follows from the plan or the pod layout. `--dp-size` and `--enable-dp-attention`
# are owned too: replicas are pods, and attention DP is `--attn-dp-size`. `--config` could set any of them.
OWNED_FLAGS: frozenset[str] = _aliases(
    "--model-path",
    "--served-model-name",
    "--host",
    "--port",
    "--enable-metrics",
    "--tp-size",
    "--pp-size",
    "--dp-size",
    "--attn-dp-size",
    "--enable-dp-attention",
    "--attn-cp-size",
    "--enable-prefill-cp",
    "--cp-strategy",
    "--ep-size",
    "--moe-a2a-backend",
    "--max-running-requests",
    "--chunked-prefill-size",
    "--mem-fraction-static",
    "--quantization",
    "--kv-cache-dtype",
    "--page-size",
    "--speculative-algorithm",
    "--speculative-draft-model-path",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--disaggregation-mode",
    "--disaggregation-transfer-backend",
    "--disaggregation-bootstrap-port",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
    "--config",
)


def check_extra_args(extra_args: Sequence[str]) -> tuple[str, ...]:
    """The user's extra arguments, if each flag is a full SGLang flag the operator does not own."""
    for token in _flag_tokens(extra_args):
        name = token.split("=", 1)[0]
        if name in OWNED_FLAGS:
            raise RenderError(
                RenderErrorReason.EXTRA_ARG_OWNED,
                f"extra argument {name} sets what the plan decides; remove it from spec.serving.extraArgs",
            )
        if name not in FLAG_NAMES:
            expanded = sorted(flag for flag in FLAG_NAMES if flag.startswith(name))
            if any(flag in OWNED_FLAGS for flag in expanded):
                raise RenderError(
                    RenderErrorReason.EXTRA_ARG_OWNED,
                    f"extra argument {name} abbreviates {', '.join(expanded)}, which the operator owns",
                )
            hint = f"; write the full name ({', '.join(expanded[:3])})" if expanded else ""
            raise RenderError(
                RenderErrorReason.EXTRA_ARG_MALFORMED,
                f"extra argument {name} is not a flag of sglang.launch_server 0.5.23{hint}",
            )
    return tuple(extra_args)


def _flag_tokens(args: Iterable[str]) -> Iterable[str]:
    # Negative numbers are values (`-1` turns chunked prefill off); SGLang has no short options, so any
    # other dash-led token (`-h` prints help and exits) is a flag that is not in FLAG_NAMES.
    return (arg for arg in args if arg.startswith("-") and not _is_number(arg))


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True
