"""A plan that cannot become correct pods is a typed RenderError with a reason, never a broken manifest;
`frontier render` reports it on stderr and exits 2, without a traceback."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from frontier_operator import cli_render
from frontier_operator.perf.codec import config_to_dict
from frontier_operator.perf.types import Role, RoleDeployment, ServingConfig, Speculative, SpeculativeAlgorithm
from frontier_operator.render import RenderError, RenderErrorReason, RenderRequest, render_fleet
from render_support import EXAMPLES, make_target, pool_document, target_document, worker

R = RenderErrorReason


def request(
    config: ServingConfig,
    *,
    gpu: str = "H200",
    model: str = "Llama-3.1-70B-Instruct",
    serving: dict[str, Any] | None = None,
    pool: dict[str, Any] | None = None,
    pool_name: str = "pool",
) -> RenderRequest:
    document = target_document(model, pool or pool_document(gpu, rdma=True), serving=serving)
    return RenderRequest(target=make_target(document), config=config, pool_name=pool_name)


def unified(model: str = "Llama-3.1-70B-Instruct", replicas: int = 1, **worker_fields: Any) -> ServingConfig:
    fields: dict[str, Any] = {"gpu": "H200", "fmt": "fp8", "kv": "auto", "tp": 4, **worker_fields}
    w = worker(fields.pop("gpu"), fields.pop("fmt"), fields.pop("kv"), fields.pop("tp"), **fields)
    return ServingConfig(model, (RoleDeployment(Role.UNIFIED, w, replicas),))


def pd(model: str = "Llama-3.1-70B-Instruct", **decode_fields: Any) -> ServingConfig:
    decode: dict[str, Any] = {"gpu": "H200", "fmt": "fp8", "kv": "fp8_e4m3", "tp": 4, **decode_fields}
    roles = (
        RoleDeployment(Role.PREFILL, worker("H200", "fp8", "fp8_e4m3", 4), 1),
        RoleDeployment(
            Role.DECODE, worker(decode.pop("gpu"), decode.pop("fmt"), decode.pop("kv"), decode.pop("tp"), **decode), 1
        ),
    )
    return ServingConfig(model, roles, transfer_backend="mooncake")


CASES: list[tuple[str, RenderRequest, RenderErrorReason]] = [
    (
        "more GPUs per node than the pool has",
        request(unified(tp=8, gpus_per_node=8), pool={**pool_document("H200", rdma=True), "gpusPerNode": 4}),
        R.GPUS_EXCEED_NODE,
    ),
    (
        "NVFP4 on an AMD GPU",
        request(unified(model="Qwen3-32B", gpu="MI300X", fmt="nvfp4"), gpu="MI300X", model="Qwen3-32B"),
        R.FORMAT_UNSUPPORTED_ON_GPU,
    ),
    (
        "an NVFP4 KV cache on Hopper",
        request(unified(kv="nvfp4")),
        R.KV_FORMAT_UNSUPPORTED_ON_GPU,
    ),
    ("a format with neither checkpoint nor on-load quantization", request(unified(fmt="nvfp4")), R.NO_CHECKPOINT),
    ("an unknown weight format", request(unified(fmt="int3")), R.UNKNOWN_FORMAT),
    (
        "an extra arg that fights an owned flag",
        request(unified(), serving={"extraArgs": ["--tp-size", "2"]}),
        R.EXTRA_ARG_OWNED,
    ),
    (
        "an alias of an owned flag",
        request(unified(), serving={"extraArgs": ["--tensor-parallel-size", "2"]}),
        R.EXTRA_ARG_OWNED,
    ),
    ("an abbreviation of an owned flag", request(unified(), serving={"extraArgs": ["--tp", "2"]}), R.EXTRA_ARG_OWNED),
    (
        "a config file that could set anything",
        request(unified(), serving={"extraArgs": ["--config", "x.yaml"]}),
        R.EXTRA_ARG_OWNED,
    ),
    (
        "a flag SGLang does not have",
        request(unified(), serving={"extraArgs": ["--enable-turbo"]}),
        R.EXTRA_ARG_MALFORMED,
    ),
    (
        "an abbreviation of a free flag",
        request(unified(), serving={"extraArgs": ["--trust-remote"]}),
        R.EXTRA_ARG_MALFORMED,
    ),
    ("help, which would exit", request(unified(), serving={"extraArgs": ["-h"]}), R.EXTRA_ARG_MALFORMED),
    (
        "an env var the operator sets",
        request(unified(), serving={"env": [{"name": "HF_TOKEN", "value": "hf_x"}]}),
        R.ENV_OWNED,
    ),
    ("a pool the target does not have", request(unified(), pool_name="elsewhere"), R.POOL_NOT_FOUND),
    ("a GPU other than the pool's", request(unified(gpu="B200")), R.GPU_NOT_IN_POOL),
    ("a plan for another model", request(unified(model="Qwen3-32B")), R.MODEL_MISMATCH),
    (
        "prefill without decode",
        request(
            ServingConfig(
                "Llama-3.1-70B-Instruct", (RoleDeployment(Role.PREFILL, worker("H200", "fp8", "auto", 4), 1),)
            )
        ),
        R.ROLES_INCOMPLETE,
    ),
    ("P/D roles with different KV dtypes", request(pd(kv="auto")), R.PD_ROLES_DISAGREE),
    (
        "EAGLE-3 without a draft model",
        request(unified(speculative=Speculative(SpeculativeAlgorithm.EAGLE3, 3, 1, 4))),
        R.SPEC_NEEDS_DRAFT_MODEL,
    ),
    ("attention DP that does not divide TP", request(unified(tp=4, attention_dp=3)), R.PARALLELISM_INVALID),
    (
        "speculation with pipeline parallelism",
        request(
            unified(
                model="DeepSeek-R1",
                fmt="fp8-block",
                tp=8,
                pp=2,
                speculative=Speculative(SpeculativeAlgorithm.NEXTN, 3, 1, 4),
            ),
            model="DeepSeek-R1",
        ),
        R.PARALLELISM_INVALID,
    ),
    (
        "a chunk that is not a multiple of Blackwell's 64-token pages",
        request(unified(gpu="B200", chunked_prefill_size=1000), gpu="B200"),
        R.CHUNK_NOT_PAGE_ALIGNED,
    ),
    ("GPUs that do not split evenly over nodes", request(unified(tp=10, gpus_per_node=4)), R.NODES_UNEVEN),
    (
        "an unknown transfer backend",
        request(replace(pd(), transfer_backend="carrier-pigeon")),
        R.TRANSFER_BACKEND_UNKNOWN,
    ),
]


@pytest.mark.parametrize(("what", "bad", "reason"), CASES, ids=[case[0] for case in CASES])
def test_unrenderable_plan_is_a_typed_error(what: str, bad: RenderRequest, reason: RenderErrorReason) -> None:
    with pytest.raises(RenderError) as caught:
        render_fleet(bad)
    assert caught.value.reason is reason, caught.value
    assert caught.value.detail


def test_a_legal_neighbour_of_each_case_renders() -> None:
    """The cases fail for the reason given, not because the fixtures are broken."""
    assert render_fleet(request(unified()))
    assert render_fleet(request(pd()))
    assert render_fleet(request(unified(), serving={"extraArgs": ["--trust-remote-code", "--schedule-policy", "lpm"]}))


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="frontier")
    cli_render.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    code: int = args.func(args)
    return code


def write_plan(tmp_path: Path, config: ServingConfig, pool: str) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"config": config_to_dict(config), "pool": pool}), encoding="utf-8")
    return path


def test_cli_reports_a_render_error_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = unified(model="Llama-3.1-70B-Instruct", gpu="H100", tp=16, gpus_per_node=16)
    code = run_cli(
        "render", "-f", str(EXAMPLES / "llama-70b-chat.yaml"), "--plan", str(write_plan(tmp_path, bad, "h100"))
    )
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "gpus-exceed-node" in captured.err
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(
    "content",
    ["not json", json.dumps({"config": {}}), json.dumps({"config": {"model": "x"}, "pool": "h100"}), "[]"],
)
def test_cli_refuses_a_broken_plan_file(tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    path.write_text(content, encoding="utf-8")
    code = run_cli("render", "-f", str(EXAMPLES / "llama-70b-chat.yaml"), "--plan", str(path))
    assert code == 2
    assert "plan-file-invalid" in capsys.readouterr().err


def test_cli_refuses_an_invalid_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli("render", "-f", str(EXAMPLES / "invalid" / "unknown-gpu.yaml"), "--plan", str(tmp_path / "x.json"))
    assert code == 2
    assert "invalid" in capsys.readouterr().err
