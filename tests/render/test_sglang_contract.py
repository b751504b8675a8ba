"""Every argv the renderer emits is one SGLang 0.5.23 itself accepts, with full flag names only.

The engine argv of every golden case and of a sweep of several hundred legal plans (every shape,
quantization, KV dtype, speculative setting, attention DP / EP, multi-node, P/D) is parsed by the
real `ServerArgs.add_cli_args` parser with `allow_abbrev=False`, then put through SGLang's own
validation steps that need neither a GPU nor a model download. Router argv go through the real
`sglang_router` parser. `scripts/install-sglang-parser.sh` (run by `make test`) installs both.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from frontier_operator.perf.types import Role
from frontier_operator.render import resolve_layout
from frontier_operator.render.layout import FleetLayout
from frontier_operator.render.router import router_argv
from frontier_operator.render.sglang_flags import OPTIONS, SWITCHES
from render_support import golden_cases, pod_argvs, sweep_cases

server_args = pytest.importorskip(
    "sglang.srt.server_args",
    reason="SGLang 0.5.23 is not installed; run scripts/install-sglang-parser.sh (make test does)",
)
router_args_module = pytest.importorskip(
    "sglang_router.router_args",
    reason="sglang-router is not installed; run scripts/install-sglang-parser.sh (make test does)",
)

overrides = importlib.import_module("sglang.srt.arg_groups.overrides")
record_fields = importlib.import_module("sglang.srt.arg_groups.arg_utils").record_fields
run_hook = importlib.import_module("sglang.srt.arg_groups.resolution_hooks").run_hook

MIN_DISTINCT_ARGV = 200

# SGLang's resolution steps that depend on neither the model's config.json nor an accelerator, in the
# order `sglang.srt.arg_groups.pipeline.run_resolution_pipeline` runs them.
MODEL_INDEPENDENT_HOOKS = (
    ("validation_hook", "validate_prefill_decode_interval"),
    ("serving_hook", "handle_deprecated_args"),
    ("pd_disaggregation_hook", "handle_pd_disaggregation"),
    ("serving_hook", "handle_load_balance_method"),
    ("serving_hook", "handle_other_validations"),
)


@cache
def sglang_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    server_args.ServerArgs.add_cli_args(parser)
    return parser


def _layouts() -> Iterator[tuple[str, FleetLayout]]:
    for case in golden_cases():
        yield f"golden/{case.name}", resolve_layout(case.request())
    for sweep in sweep_cases():
        yield f"sweep/{sweep.label}", resolve_layout(sweep.request)


def engine_argvs() -> dict[tuple[str, ...], str]:
    """Every distinct per-pod engine argv, mapped to the case that first produced it."""
    argvs: dict[tuple[str, ...], str] = {}
    for label, layout in _layouts():
        for role in layout.roles:
            for rank, argv in enumerate(pod_argvs(role.engine.to_argv(), role.nnodes)):
                argvs.setdefault(tuple(argv), f"{label}/{role.role.value}/rank{rank}")
    return argvs


def router_argvs() -> dict[tuple[str, ...], str]:
    return {tuple(router_argv(layout)): label for label, layout in _layouts() if layout.has_router}


ENGINE_ARGVS = engine_argvs()
ROUTER_ARGVS = router_argvs()


def run_sglang_checks(argv: list[str]) -> Any:
    """Parse like `prepare_server_args`, then run SGLang's model-independent validation on the record."""
    namespace = sglang_parser().parse_args(argv)
    record = server_args.ServerArgs.from_cli_args(namespace)
    # The bookkeeping `ServerArgs.resolve_once` sets up before the pipeline runs.
    record._raw_input = {field.name: getattr(record, field.name) for field in record_fields(type(record))}
    record._resolved_overrides = []
    record._input_frozen = True
    logging.disable(logging.WARNING)
    try:
        for module, name in MODEL_INDEPENDENT_HOOKS:
            run_hook(getattr(importlib.import_module(f"sglang.srt.arg_groups.{module}"), name), record)
        overrides.run_post_process_pass(record, overrides._pipeline_parallel_overlap_disable)
        overrides.run_post_process_pass(record, overrides._page_size_default)
    finally:
        record._input_frozen = False
        logging.disable(logging.NOTSET)
    # The checks `Engine` runs before it starts (entrypoints/engine.py: server_args.check_server_args()).
    record.check_server_args()
    return overrides.resolving_view(record)


def test_the_sweep_is_large_and_covers_every_shape() -> None:
    assert len(ENGINE_ARGVS) >= MIN_DISTINCT_ARGV, len(ENGINE_ARGVS)
    flat = [" ".join(argv) for argv in ENGINE_ARGVS]
    for fragment in (
        "--disaggregation-mode prefill",
        "--disaggregation-mode decode",
        "--disaggregation-transfer-backend nixl",
        "--disaggregation-transfer-backend mooncake_tcp",
        "--nnodes 2 --node-rank 1",
        "--pp-size 2",
        "--attn-dp-size 16",
        "--attn-cp-size 8 --enable-prefill-cp --cp-strategy interleave",
        "--moe-a2a-backend deepep",
        "--speculative-algorithm NEXTN",
        "--speculative-algorithm EAGLE3",
        "--quantization fp8",
        "--kv-cache-dtype fp8_e4m3",
        "--mem-fraction-static 0.8",
        "--page-size 64",
    ):
        assert any(fragment in argv for argv in flat), fragment
    assert any("--quantization" not in argv for argv in flat)


def test_flag_table_matches_the_installed_parser() -> None:
    parser = sglang_parser()
    installed = {
        (tuple(o for o in action.option_strings if o.startswith("--")), action.nargs == 0)
        for action in parser._actions
        if action.option_strings
    }
    assert installed == set(OPTIONS)
    assert len(OPTIONS) > 500


@pytest.mark.parametrize("argv", list(ENGINE_ARGVS), ids=list(ENGINE_ARGVS.values()))
def test_engine_argv_parses_and_passes_sglang_checks(argv: tuple[str, ...]) -> None:
    parser = sglang_parser()
    known = parser._option_string_actions
    flags = [token for token in argv if token.startswith("--")]
    # Full names only: each flag is an option string itself, not a prefix SGLang would expand.
    assert all(flag in known for flag in flags), [flag for flag in flags if flag not in known]
    assert len(flags) == len(set(flags)), "a flag is given twice"
    view = run_sglang_checks(list(argv))
    assert view.host == "0.0.0.0"
    assert view.enable_metrics is True
    assert view.served_model_name
    for flag in flags:
        if flag in SWITCHES:
            assert getattr(view, known[flag].dest) is True, flag


@cache
def router_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    router_args_module.RouterArgs.add_cli_args(parser, use_router_prefix=False)
    return parser


# Router flags as documented in sglang-0.5.23.md §6.2 (router_args.py of sgl-project/sglang).
DOCUMENTED_ROUTER_FLAGS = frozenset(
    {
        "--host",
        "--port",
        "--prometheus-host",
        "--prometheus-port",
        "--policy",
        "--worker-startup-timeout-secs",
        "--health-check-endpoint",
        "--shutdown-grace-period-secs",
        "--pd-disaggregation",
        "--prefill",
        "--decode",
        "--worker-urls",
        "--service-discovery",
        "--service-discovery-namespace",
        "--service-discovery-port",
        "--selector",
        "--prefill-selector",
        "--decode-selector",
    }
)


@pytest.mark.parametrize("argv", list(ROUTER_ARGVS), ids=list(ROUTER_ARGVS.values()))
def test_router_argv_parses_with_the_router_parser(argv: tuple[str, ...]) -> None:
    flags = {token for token in argv if token.startswith("--")}
    assert flags <= DOCUMENTED_ROUTER_FLAGS, flags - DOCUMENTED_ROUTER_FLAGS
    parser = router_parser()
    assert flags <= set(parser._option_string_actions)
    args = router_args_module.RouterArgs.from_cli_args(parser.parse_args(list(argv)), use_router_prefix=False)
    args._validate_router_args()
    assert args.policy == "cache_aware"
    assert args.host == "0.0.0.0"
    if args.pd_disaggregation:
        if args.service_discovery:
            assert args.prefill_selector["frontier.dev/role"] == "prefill"
            assert args.decode_selector["frontier.dev/role"] == "decode"
        else:
            assert args.prefill_urls and args.decode_urls
            assert all(port == 8998 for _, port in args.prefill_urls)
    elif args.service_discovery:
        assert args.selector["frontier.dev/role"] == Role.UNIFIED.value
    else:
        assert len(args.worker_urls) >= 2


def test_sglang_refuses_what_the_renderer_never_emits() -> None:
    """The checks are live: an abbreviation and a broken topology are caught by SGLang itself."""
    with pytest.raises(SystemExit):
        sglang_parser().parse_args(["--model-path", "m", "--tp", "8"])
    with pytest.raises(AssertionError, match="divisible by number of nodes"):
        run_sglang_checks(["--model-path", "m", "--served-model-name", "m", "--tp-size", "3", "--nnodes", "2"])
    with pytest.raises(AssertionError, match="chunked_prefill_size must be divisible by page_size"):
        run_sglang_checks(
            ["--model-path", "m", "--served-model-name", "m", "--chunked-prefill-size", "100", "--page-size", "64"]
        )
