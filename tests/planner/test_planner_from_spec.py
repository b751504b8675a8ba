"""FrontierTarget spec → PlanRequest: units, catalog look-ups, defaults."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from frontier_operator.api import load_target_file, parse_spec
from frontier_operator.planner.from_spec import SpecResolutionError, lognormal_cv, plan_request_from_spec
from frontier_operator.planner.types import Disaggregation, Objective, SloMetric, SpeculativeMode

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def spec_of(name: str) -> Any:
    return load_target_file(EXAMPLES / name).spec


def test_glm5_example_becomes_a_request() -> None:
    planning = plan_request_from_spec(spec_of("glm5-agentic-coding.yaml"))
    assert planning.arch.name == "GLM-5"
    assert [(b.metric, b.percentile, b.limit_s) for b in planning.slos] == [
        (SloMetric.TTFT, 99, 2.0),
        (SloMetric.TPOT, 50, 0.020),
    ]
    assert planning.objective is Objective.MINIMIZE_COST
    (h200,) = planning.pools
    assert (h200.name, h200.gpu.name, h200.gpus_per_node, h200.max_gpus, h200.rdma) == ("h200", "H200", 8, 64, True)
    assert h200.price_per_gpu_hour == pytest.approx(2.30)
    workload = planning.workload
    assert workload.request_rate_per_s == 6 and workload.input_tokens.mean == 24_000
    assert workload.input_tokens.max == 128_000 and workload.prefix_cache_hit_rate == pytest.approx(0.85)
    assert workload.kind == "agentic-coding" and workload.arrival_cv == 2.0
    search = planning.search
    assert [f.name for f in search.quantizations] == ["bf16", "fp8", "nvfp4"]
    assert {f.name for f in search.fallback_quantizations}.isdisjoint({"bf16", "fp8", "nvfp4"})
    assert [f.name for f in search.kv_cache_formats] == ["bf16", "fp8_e4m3"]  # "auto" is bf16
    assert search.max_quality_loss_pct == pytest.approx(1.0)
    assert search.disaggregation is Disaggregation.AUTO and search.speculative is SpeculativeMode.AUTO


def test_spec_checkpoints_extend_the_catalog() -> None:
    planning = plan_request_from_spec(spec_of("llama-70b-chat.yaml"))
    assert planning.arch.checkpoint_for("fp8") == "nvidia/Llama-3.1-70B-Instruct-FP8"


def test_minimum_throughput_and_default_price() -> None:
    planning = plan_request_from_spec(spec_of("kimi-k25-batch.yaml"))
    assert planning.min_output_tokens_per_s == 20_000
    llama = plan_request_from_spec(spec_of("llama-70b-chat.yaml"))
    assert llama.pools[0].price_per_gpu_hour == llama.pools[0].gpu.default_price_per_hour


def test_default_max_lengths_stay_within_the_context() -> None:
    document = yaml.safe_load((EXAMPLES / "llama-70b-chat.yaml").read_text())
    spec = document["spec"]
    spec["workload"]["inputTokens"] = {"mean": "100k", "p90": "120k"}
    spec["workload"]["outputTokens"] = {"mean": "2k"}
    planning = plan_request_from_spec(parse_spec(spec))
    lengths = planning.workload
    assert lengths.input_tokens.max is not None and lengths.output_tokens.max is not None
    assert lengths.input_tokens.max + lengths.output_tokens.max <= planning.arch.max_context


def test_unknown_gpu_is_a_resolution_error() -> None:
    spec = load_target_file(EXAMPLES / "invalid" / "unknown-gpu.yaml").spec
    with pytest.raises(SpecResolutionError) as error:
        plan_request_from_spec(spec)
    assert error.value.path == "spec.hardware.pools[0].gpu"


def test_inline_config_json_is_read() -> None:
    document = yaml.safe_load((EXAMPLES / "llama-70b-chat.yaml").read_text())
    spec = document["spec"]
    spec["model"] = {
        "name": "acme/tiny-llama",
        "config": {
            "inline": {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 2048,
                "intermediate_size": 8192,
                "num_hidden_layers": 16,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "vocab_size": 32000,
                "max_position_embeddings": 8192,
                "torch_dtype": "bfloat16",
            }
        },
    }
    planning = plan_request_from_spec(parse_spec(spec))
    assert planning.arch.name == "acme/tiny-llama" and planning.arch.num_layers == 16


def test_lognormal_cv() -> None:
    assert lognormal_cv(1000, None) == 0 and lognormal_cv(1000, 1000) == 0
    assert 0 < lognormal_cv(1000, 1500) < lognormal_cv(1000, 2000) < lognormal_cv(1000, 10_000)
    # The most skewed shape two numbers allow: σ = z90, CV ≈ 2.1.
    assert lognormal_cv(1000, 10_000) == pytest.approx(math.sqrt(math.expm1(1.2815515655446004**2)))


def test_a_replaced_checkpoint_drops_what_the_catalog_knows_it_keeps_in_bf16() -> None:
    document = yaml.safe_load((EXAMPLES / "deepseek-r1-low-latency.yaml").read_text())
    catalog = plan_request_from_spec(parse_spec(document["spec"])).arch
    assert dict(catalog.kept_in_bf16)["nvfp4"] == ("attention_inputs", "draft")
    # Naming the catalog's own export keeps its facts; another repository is taken as quantized throughout.
    for repository, kept in (("nvidia/deepseek-r1-0528-fp4-v2", True), ("example/DeepSeek-R1-all-FP4", False)):
        document["spec"]["model"]["checkpoints"] = {"nvfp4": repository}
        arch = plan_request_from_spec(parse_spec(document["spec"])).arch
        assert arch.checkpoint_for("nvfp4") == repository
        assert ("nvfp4" in dict(arch.kept_in_bf16)) is kept
