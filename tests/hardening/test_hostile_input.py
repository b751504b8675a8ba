"""A corpus of malformed and hostile FrontierTargets: each is refused — by the CRD schema or its CEL rules
at `kubectl apply`, or by the operator (API models, catalog, planner, renderer) with a structured error —
and nothing crashes, hangs or answers with a megabyte.

Three sources: hand-written cases (each with the layers that must refuse it), a wrong JSON type at
every field of every example (the schema and the models must both refuse, naming that field), and
hypothesis (random hostile values anywhere in the tree, random trees, fuzzed config.json): never a crash,
always a structured, bounded refusal. Raw YAML hazards (duplicate keys, alias bombs, deep nesting,
Python tags) live as files in `corpus/` and go through `frontier validate|plan|render`.
"""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier_operator.api import SpecInvalid, load_target_file
from frontier_operator.cli import build_parser, main
from frontier_operator.planner.types import Infeasible
from frontier_operator.reconcile.core import Planned
from hardening_support import (
    CORPUS,
    EXAMPLES,
    MAX_DECISION_SECONDS,
    MAX_ERROR_CHARS,
    ROOT,
    dotted,
    example,
    leaves,
    replaced,
    structural_problems,
    verdict,
)

MEGABYTE = "x" * 1_000_000
HF_CONFIGS = ROOT / "tests" / "data" / "hf_configs"


# ------------------------------------------------------------------------------------ hand-written


def _path(text: str) -> tuple[str | int, ...]:
    """`spec.hardware.pools[0].gpu` → ("spec", "hardware", "pools", 0, "gpu")."""
    steps: list[str | int] = []
    for part in text.split("."):
        name, *indices = re.split(r"\[|\]\[?", part.rstrip("]"))
        steps.append(name)
        steps += [int(index) for index in indices if index]
    return tuple(steps)


def put(path: str, value: Any, base: str = "llama-70b-chat") -> dict[str, Any]:
    """The example with one field set (created if absent)."""
    document = example(base)
    steps = _path(path)
    node: Any = document
    for step in steps[:-1]:
        if isinstance(node, dict) and step not in node:
            node[step] = {}
        node = node[step]
    node[steps[-1]] = value
    return document


def drop(path: str, base: str = "llama-70b-chat") -> dict[str, Any]:
    document = example(base)
    steps = _path(path)
    node: Any = document
    for step in steps[:-1]:
        node = node[step]
    del node[steps[-1]]
    return document


def with_spec(changes: dict[str, Any], base: str = "llama-70b-chat") -> dict[str, Any]:
    """The example with whole spec sections replaced."""
    document = example(base)
    document["spec"].update(copy.deepcopy(changes))
    return document


def pool(**fields: Any) -> list[dict[str, Any]]:
    return [{"name": "p", "gpu": "H100", "maxGpus": 8, **fields}]


def hf_config(name: str = "llama-3.1-8b-instruct", **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((HF_CONFIGS / name / "config.json").read_text(encoding="utf-8"))
    config.update(changes)
    return config


def inline_model(config: Any) -> dict[str, Any]:
    return put("spec.model", {"name": "acme/custom", "config": {"inline": config}})


@dataclass(frozen=True)
class Case:
    name: str
    document: Any
    # Exactly the layers that refuse it (crd, cel, model, catalog, planner, render).
    refused_by: frozenset[str]


def case(name: str, document: Any, *layers: str) -> Case:
    return Case(name, document, frozenset(layers))


SHAPE = ("crd", "model")  # refused by the schema at kubectl apply, and again by the operator's models

CASES = [
    # --- the document itself
    case("api-version-v2", put("apiVersion", "frontier.dev/v2"), "model"),
    case("kind-deployment", put("kind", "Deployment"), "model"),
    case("no-name", put("metadata", {}), "model"),
    case("spec-missing", drop("spec"), *SHAPE),
    case("spec-is-a-list", put("spec", [1, 2, 3]), *SHAPE),
    case("spec-is-text", put("spec", "serve llama fast"), *SHAPE),
    case("spec-is-null", put("spec", None), *SHAPE),
    case("document-is-a-list", [example()], *SHAPE),
    case("document-is-a-number", 42, *SHAPE),
    # --- wrong types
    case("model-name-number", put("spec.model.name", 42), *SHAPE),
    case("model-is-text", put("spec.model", "Llama-3.1-70B-Instruct"), *SHAPE),
    case("duration-without-unit", put("spec.slo.tpot.p50", 30), *SHAPE),
    case("duration-as-list", put("spec.slo.tpot.p50", ["30ms"]), *SHAPE),
    case("rate-boolean", put("spec.workload.requestRate", True), *SHAPE),
    case("max-gpus-text", put("spec.hardware.pools[0].maxGpus", "8"), *SHAPE),
    case("max-gpus-fraction", put("spec.hardware.pools[0].maxGpus", 7.5), *SHAPE),
    case("pools-mapping", put("spec.hardware.pools", {"h100": {"gpu": "H100"}}), *SHAPE),
    case("quantizations-text", put("spec.search.quantizations", "fp8"), *SHAPE),
    case("node-selector-list", put("spec.hardware.pools[0].nodeSelector", ["gpu=h100"]), *SHAPE),
    case("node-selector-number-value", put("spec.hardware.pools[0].nodeSelector", {"zone": 3}), *SHAPE),
    case("tolerations-numbers", put("spec.hardware.pools[0].tolerations", [1, 2]), *SHAPE),
    case("paused-text", put("spec.tuning.paused", "yes"), *SHAPE),
    case("env-value-object", put("spec.serving.env", [{"name": "A", "value": {"b": 1}}]), *SHAPE),
    # --- negative and huge numbers
    case("max-gpus-negative", put("spec.hardware.pools[0].maxGpus", -8), *SHAPE),
    case("max-gpus-zero", put("spec.hardware.pools[0].maxGpus", 0), *SHAPE),
    case("max-gpus-a-billion", put("spec.hardware.pools[0].maxGpus", 10**9), *SHAPE),
    case("max-gpus-beyond-int64", put("spec.hardware.pools[0].maxGpus", 10**30), *SHAPE),
    case("gpus-per-node-zero", put("spec.hardware.pools[0].gpusPerNode", 0), *SHAPE),
    case("gpus-per-node-thousand", put("spec.hardware.pools[0].gpusPerNode", 1000), *SHAPE),
    case("rate-negative", put("spec.workload.requestRate", -5), *SHAPE),
    case("rate-zero", put("spec.workload.requestRate", "0/s"), "model"),
    case("rate-400-digits", put("spec.workload.requestRate", "9" * 400), "model"),
    case("price-zero", put("spec.hardware.pools", pool(pricePerGpuHour="$0/h")), "model"),
    case("price-negative", put("spec.hardware.pools", pool(pricePerGpuHour=-2)), *SHAPE),
    case("price-400-digits", put("spec.hardware.pools", pool(pricePerGpuHour="9" * 400)), "model"),
    case("tokens-zero", put("spec.workload.inputTokens", {"mean": 0}), *SHAPE),
    case("tokens-negative", put("spec.workload.inputTokens", {"mean": -100}), *SHAPE),
    case("tokens-rounding-to-zero", put("spec.workload.inputTokens", {"mean": "0.4"}), "model"),
    case("tokens-400-digits", put("spec.workload.inputTokens", {"mean": "9" * 400}), "model"),
    case("duration-400-digits", put("spec.slo.tpot.p50", "9" * 400 + "ms"), *SHAPE),
    case("duration-zero", put("spec.slo.tpot.p50", "0ms"), "model"),
    case("max-tp-zero", put("spec.search.parallelism", {"maxTp": 0}), *SHAPE),
    case("max-ep-huge", put("spec.search.parallelism", {"maxEp": 10**6}), *SHAPE),
    case("changes-per-hour-negative", put("spec.tuning.maxChangesPerHour", -1), *SHAPE),
    case("router-replicas-thousand", put("spec.serving.router.replicas", 1000), *SHAPE),
    case(
        "toleration-seconds-negative", put("spec.hardware.pools", pool(tolerations=[{"tolerationSeconds": -1}])), *SHAPE
    ),
    case("rdma-devices-zero", put("spec.hardware.pools", pool(rdma={"enabled": True, "devicesPerPod": 0})), *SHAPE),
    # --- NaN and infinity
    case("rate-nan-text", put("spec.workload.requestRate", "NaN"), *SHAPE),
    case("rate-infinity-text", put("spec.workload.requestRate", "Infinity/s"), *SHAPE),
    case("rate-float-nan", put("spec.workload.requestRate", math.nan), *SHAPE),
    case("rate-float-inf", put("spec.workload.requestRate", math.inf), *SHAPE),
    case("duration-nan", put("spec.slo.tpot.p50", "NaNms"), *SHAPE),
    case("duration-inf", put("spec.slo.ttft.p99", "infs"), *SHAPE),
    case("percentage-nan", put("spec.workload.prefixCacheHitRate", "NaN%"), *SHAPE),
    case("percentage-above-100", put("spec.workload.prefixCacheHitRate", "140%"), "model"),
    case("price-inf", put("spec.hardware.pools", pool(pricePerGpuHour="$inf/h")), *SHAPE),
    case("tokens-exponent", put("spec.workload.outputTokens", {"mean": "1e9"}), *SHAPE),
    # --- unicode and megabyte strings
    case("model-name-megabyte", put("spec.model.name", MEGABYTE), *SHAPE),
    case("model-name-rtl-override", put("spec.model.name", "Llama-3.1-70B-Instruct\u202e"), "catalog"),
    case("model-name-fullwidth", put("spec.model.name", "Ｌｌａｍａ-3.1-70B-Instruct"), "catalog"),
    case("model-name-nul", put("spec.model.name", "Llama\x00-3.1-70B-Instruct"), "catalog"),
    case("gpu-cyrillic-homoglyph", put("spec.hardware.pools[0].gpu", "Н100"), "catalog"),
    case("gpu-emoji", put("spec.hardware.pools[0].gpu", "🚀"), "catalog"),
    case("pool-name-unicode", put("spec.hardware.pools[0].name", "h100ü"), *SHAPE),
    case("pool-name-megabyte", put("spec.hardware.pools[0].name", MEGABYTE), *SHAPE),
    case("image-megabyte", put("spec.serving.image", MEGABYTE), *SHAPE),
    case("env-value-megabyte", put("spec.serving.env", [{"name": "A", "value": MEGABYTE}]), *SHAPE),
    case("extra-arg-megabyte", put("spec.serving.extraArgs", [MEGABYTE]), *SHAPE),
    case("node-selector-value-megabyte", put("spec.hardware.pools", pool(nodeSelector={"a": MEGABYTE})), *SHAPE),
    case("duration-unicode-digits", put("spec.slo.tpot.p50", "٣٠ms"), *SHAPE),
    case("duration-micro-sign", put("spec.slo.tpot.p50", "30000\u00b5s"), "planner"),
    case("unknown-field-megabyte-key", put("spec.serving", {MEGABYTE[:100_000]: 1}), *SHAPE),
    # --- unknown names
    case("unknown-model", put("spec.model.name", "acme/Foo-9000"), "catalog"),
    case("unknown-gpu", put("spec.hardware.pools[0].gpu", "H900"), "catalog"),
    case("gpu-empty", put("spec.hardware.pools[0].gpu", ""), *SHAPE),
    case("gpu-lowercase-unknown", put("spec.hardware.pools[0].gpu", "a100-80gb-pcie"), "catalog"),
    case("quantization-int3", put("spec.search.quantizations", ["int3"]), *SHAPE),
    case("kv-cache-fp4", put("spec.search.kvCacheDtypes", ["fp4"]), *SHAPE),
    case("checkpoint-format-unknown", put("spec.model.checkpoints", {"int3": "a/b"}), *SHAPE),
    case("objective-unknown", put("spec.objective", "cheapest"), *SHAPE),
    case("tuning-mode-unknown", put("spec.tuning.mode", "yolo"), *SHAPE),
    case("unknown-spec-field", put("spec.replicas", 3), *SHAPE),
    case("unknown-percentile", put("spec.slo.tpot", {"p75": "20ms"}), *SHAPE),
    case("prometheus-file-url", put("spec.tuning.prometheusUrl", "file:///etc/passwd"), *SHAPE),
    case("env-name-with-equals", put("spec.serving.env", [{"name": "A=B", "value": "c"}]), *SHAPE),
    case("mount-path-relative", put("spec.serving.cache", {"mountPath": "cache"}), *SHAPE),
    case("cpu-negative", put("spec.serving.resources", {"cpu": "-1"}), *SHAPE),
    case("shm-exabytes", put("spec.serving.shmSize", "1Ei"), *SHAPE),
    case("hf-token-secret-unnamed", put("spec.serving.hfTokenSecretRef", {"name": ""}), *SHAPE),
    # --- conflicting constraints
    case("gpus-per-node-beyond-node", put("spec.hardware.pools[0].gpusPerNode", 16), "catalog"),
    case("duplicate-pool-names", put("spec.hardware.pools", pool() + pool()), "cel", "model"),
    case("quantization-twice", put("spec.search.quantizations", ["fp8", "fp8"]), "model"),
    case(
        "config-inline-and-configmap", put("spec.model.config", {"inline": {}, "configMapRef": {"name": "c"}}), "model"
    ),
    case("config-empty", put("spec.model.config", {}), "model"),
    case("cooldown-below-interval", put("spec.tuning", {"interval": "15m"}), "cel", "model"),
    case("window-below-interval", put("spec.tuning", {"interval": "2m", "window": "1m"}), "cel", "model"),
    case("p90-below-mean", put("spec.workload.inputTokens", {"mean": 2000, "p90": 1000}), "model"),
    case("max-below-p90", put("spec.workload.outputTokens", {"mean": 100, "p90": 400, "max": 200}), "model"),
    case("extra-arg-owned-flag", put("spec.serving.extraArgs", ["--tp-size", "2"]), "render"),
    case("env-owned-variable", put("spec.serving.env", [{"name": "SGLANG_CACHE_DIR", "value": "/x"}]), "render"),
    case(
        "bf16-only-for-a-1t-model",
        with_spec({"model": {"name": "Kimi-K2.5"}, "search": {"quantizations": ["bf16"]}}),
        "planner",
    ),
    case("max-tp-one-for-70b", put("spec.search.parallelism", {"maxTp": 1}), "planner"),
    case(
        "configmap-missing",
        put("spec.model", {"name": "acme/x", "config": {"configMapRef": {"name": "nope"}}}),
        "catalog",
    ),
    # --- impossible SLOs
    case("tpot-one-microsecond", put("spec.slo", {"tpot": {"p50": "1us"}}), "planner"),
    case("ttft-one-nanosecond", put("spec.slo", {"ttft": {"p99": "1ns"}}), "planner"),
    case("e2e-one-millisecond", put("spec.slo", {"e2e": {"p50": "1ms"}}), "planner"),
    case("throughput-a-billion", put("spec.slo.minOutputThroughput", "1000000000/s"), "planner"),
    case("rate-a-million", put("spec.workload.requestRate", "1000000/s"), "planner"),
    # --- empty
    case("pools-empty", put("spec.hardware.pools", []), *SHAPE),
    case("slo-empty", put("spec.slo", {}), "cel", "model"),
    case("percentiles-empty", put("spec.slo", {"tpot": {}}), *SHAPE),
    case("workload-empty", put("spec.workload", {}), *SHAPE),
    case("quantizations-empty", put("spec.search.quantizations", []), *SHAPE),
    case("model-name-empty", put("spec.model.name", ""), *SHAPE),
    # --- percentiles out of order (the YAML duplicate-key cases are files in corpus/)
    case("p50-above-p99", put("spec.slo.tpot", {"p50": "80ms", "p99": "60ms"}), "cel", "model"),
    case("p90-above-p95", put("spec.slo.ttft", {"p90": "2s", "p95": "1s"}), "cel", "model"),
    case("p50-above-p99-mixed-units", put("spec.slo.tpot", {"p50": "1s", "p99": "999ms"}), "cel", "model"),
    # --- absurd lengths
    case("input-a-million-tokens", put("spec.workload.inputTokens", {"mean": "1M"}), "planner"),
    case("input-10-to-the-30", put("spec.workload.inputTokens", {"mean": 10**30}), "planner"),
    case("output-128-mebitokens", put("spec.workload.outputTokens", {"mean": 350, "max": "128Mi"}), "planner"),
    # --- config.json of an unknown model
    case("config-json-empty", inline_model({}), "catalog"),
    case("config-json-negative-hidden", inline_model(hf_config(hidden_size=-1)), "catalog"),
    case("config-json-zero-heads", inline_model(hf_config(num_attention_heads=0)), "catalog"),
    case("config-json-text-layers", inline_model(hf_config(num_hidden_layers="32")), "catalog"),
    case("config-json-megabyte-type", inline_model(hf_config(model_type=MEGABYTE)), "catalog"),
    case("config-json-heads-not-dividing", inline_model(hf_config(num_key_value_heads=7)), "catalog"),
    case("config-json-huge-vocab", inline_model(hf_config(vocab_size=10**40)), "catalog"),
    case("config-json-is-a-list", inline_model([1, 2, 3]), *SHAPE),
]


def test_the_corpus_is_large_and_names_are_unique() -> None:
    assert len({c.name for c in CASES}) == len(CASES)
    assert len(CASES) + len(RAW_FILES) >= 100


@pytest.mark.parametrize("hostile", CASES, ids=lambda c: c.name)
def test_each_hostile_target_is_refused_where_expected(hostile: Case) -> None:
    found = verdict(hostile.document)
    assert found.layers == hostile.refused_by, found.describe()
    assert found.outcome is not None and not isinstance(found.outcome, Planned)
    assert structural_problems(found.outcome) == []
    assert found.seconds < MAX_DECISION_SECONDS


# --------------------------------------------------------------------- a wrong type at every field


def _wrong_type_cases() -> list[tuple[str, str, Any, tuple[str | int, ...]]]:
    cases = []
    for name in EXAMPLES:
        document = example(name)
        for path, value in leaves(document["spec"], ("spec",)):
            if "inline" in path:
                continue  # config.json is free-form: its keys are judged by the catalog (cases above)
            wrong: Any = ["a", "list"] if isinstance(value, dict) else {"an": "object"}
            cases.append((name, dotted(path), wrong, path))
    return cases


WRONG_TYPES = _wrong_type_cases()


@pytest.mark.parametrize(("name", "where", "wrong", "path"), WRONG_TYPES, ids=[f"{c[0]}:{c[1]}" for c in WRONG_TYPES])
def test_a_wrong_type_anywhere_is_refused_by_the_schema_and_the_models_at_that_field(
    name: str, where: str, wrong: Any, path: tuple[str | int, ...]
) -> None:
    document = replaced(example(name), path, wrong)
    found = verdict(document)
    assert {"crd", "model"} <= found.layers, found.describe()
    assert any(message.startswith(where) for message in found.messages["crd"]), found.messages["crd"]
    assert any(message.startswith(where) for message in found.messages["model"]), found.messages["model"]
    assert found.outcome is not None and structural_problems(found.outcome) == []


# ---------------------------------------------------------------------------------------- hypothesis

HOSTILE_TEXT = st.sampled_from(
    ["NaN", "nan", "inf", "-inf", "Infinity", "1e309", "-1", "0", "", " ", "\x00", "\u202e", "🚀", "9" * 400]
)
HOSTILE_NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**9, 1e308, -0.0]),
)
HOSTILE_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    HOSTILE_NUMBERS,
    HOSTILE_TEXT,
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8).map(lambda s: s * 20_000),
)
HOSTILE_VALUES = st.recursive(
    HOSTILE_LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
SPEC_NODES = [(name, path) for name in EXAMPLES for path, _ in leaves(example(name)["spec"], ("spec",))]
HYPOTHESIS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _assert_refused_or_planned_cleanly(document: Any) -> None:
    found = verdict(document)  # a crash fails the test with the example hypothesis found
    assert found.outcome is not None
    assert structural_problems(found.outcome) == [], found.describe()
    assert found.seconds < MAX_DECISION_SECONDS
    # Defence in depth: what the API server would refuse, the operator refuses too (a stale CRD, a
    # direct write to etcd, `frontier plan` on a file never applied).
    if {"crd", "cel"} & found.layers:
        assert {"model", "catalog"} & found.layers, found.describe()


@HYPOTHESIS
@given(node=st.sampled_from(SPEC_NODES), value=HOSTILE_VALUES)
def test_a_hostile_value_anywhere_in_the_tree_never_crashes_the_operator(
    node: tuple[str, tuple[str | int, ...]], value: Any
) -> None:
    name, path = node
    _assert_refused_or_planned_cleanly(replaced(example(name), path, value))


@HYPOTHESIS
@given(spec=HOSTILE_VALUES)
def test_a_random_tree_as_the_spec_never_crashes_the_operator(spec: Any) -> None:
    document = example()
    document["spec"] = spec
    _assert_refused_or_planned_cleanly(document)


CONFIG_KEYS = sorted(hf_config())


@HYPOTHESIS
@given(
    base=st.sampled_from(sorted(p.name for p in HF_CONFIGS.iterdir() if p.is_dir())),
    key=st.one_of(st.sampled_from(CONFIG_KEYS), st.text(max_size=30)),
    value=HOSTILE_VALUES,
)
def test_a_hostile_config_json_is_a_catalog_refusal_never_a_crash(base: str, key: str, value: Any) -> None:
    config = hf_config(base)
    config[key] = value
    found = verdict(inline_model(config))
    assert found.outcome is not None
    assert structural_problems(found.outcome) == [], found.describe()
    assert found.seconds < MAX_DECISION_SECONDS


# ------------------------------------------------------------------- valid but extreme: the planner

EXTREMES = {
    "a-million-token-prompts-within-context": with_spec(
        {
            "model": {"name": "Llama-3.1-8B-Instruct"},
            "workload": {
                "requestRate": "1/s",
                "inputTokens": {"mean": "100k", "max": "128Ki"},
                "outputTokens": {"mean": 1},
            },
        }
    ),
    "a-million-requests-per-second": put("spec.workload.requestRate", "1000000/s"),
    "a-trillion-parameters-on-one-gpu": with_spec(
        {"model": {"name": "Kimi-K2.5"}, "hardware": {"pools": pool(maxGpus=1)}}
    ),
    "a-hundred-thousand-gpus": put("spec.hardware.pools", pool(maxGpus=100_000)),
    "eight-pools-of-every-gpu": put(
        "spec.hardware.pools",
        [
            {"name": f"p{i}", "gpu": gpu, "maxGpus": 100_000}
            for i, gpu in enumerate(["H100", "H200", "B200", "B300", "GB200", "GB300", "MI300X", "MI355X"])
        ],
        base="glm5-agentic-coding",
    ),
    "one-request-per-hour": put("spec.workload.requestRate", "1/h"),
    "an-hour-long-slo": put("spec.slo", {"e2e": {"p99": "1h"}}),
    "a-one-token-workload": put(
        "spec.workload", {"requestRate": "1/s", "inputTokens": {"mean": 1}, "outputTokens": {"mean": 1}}
    ),
    "ten-thousand-outputs": put("spec.workload.outputTokens", {"mean": "10k", "p90": "20k", "max": "64k"}),
}


@pytest.mark.parametrize("name", sorted(EXTREMES))
def test_the_planner_answers_extreme_valid_targets_in_bounded_time(name: str) -> None:
    found = verdict(EXTREMES[name])
    assert not {"crd", "cel", "model", "catalog"} & found.layers, found.describe()
    assert isinstance(found.outcome, Planned | Infeasible), found.describe()
    assert structural_problems(found.outcome) == []
    assert found.seconds < MAX_DECISION_SECONDS, f"{name}: {found.seconds:.1f} s"


@settings(max_examples=40, deadline=None)
@given(
    rate=st.floats(min_value=1e-6, max_value=1e9),
    input_tokens=st.integers(min_value=1, max_value=10**7),
    output_tokens=st.integers(min_value=1, max_value=10**6),
    bound_ms=st.floats(min_value=1e-6, max_value=3.6e6),
    max_gpus=st.integers(min_value=1, max_value=100_000),
    gpu=st.sampled_from(["H100", "H200", "B200", "GB300", "MI355X"]),
)
def test_the_planner_never_raises_on_valid_extremes(
    rate: float, input_tokens: int, output_tokens: int, bound_ms: float, max_gpus: int, gpu: str
) -> None:
    document = with_spec(
        {
            "slo": {"tpot": {"p50": f"{bound_ms:.6f}ms"}},
            "workload": {
                "requestRate": f"{rate:.6f}/s",
                "inputTokens": {"mean": input_tokens},
                "outputTokens": {"mean": output_tokens},
            },
            "hardware": {"pools": pool(gpu=gpu, maxGpus=max_gpus)},
            "search": {},
        }
    )
    found = verdict(document)
    assert isinstance(found.outcome, Planned | Infeasible) or found.layers <= {"model"}, found.describe()
    assert structural_problems(found.outcome) == [] if found.outcome is not None else True
    assert found.seconds < MAX_DECISION_SECONDS


# ------------------------------------------------------------------------------ raw YAML and the CLI

RAW_FILES = sorted(CORPUS.glob("*.yaml"))


def _expected_layer(path: Path) -> str:
    found = re.search(r"^# refused-by: (\w+)", path.read_text(encoding="utf-8", errors="replace"), re.MULTILINE)
    assert found, f"{path.name} must say `# refused-by: LAYER`"
    return found.group(1)


@pytest.mark.parametrize("path", RAW_FILES, ids=lambda p: p.stem)
def test_raw_yaml_hazards_are_refused_on_load_with_a_structured_error(path: Path) -> None:
    expected = _expected_layer(path)
    if expected == "yaml":
        with pytest.raises(SpecInvalid) as caught:
            load_target_file(path)
        (error,) = caught.value.errors
        assert error.path == str(path) and error.message and error.hint
        assert len(str(error)) < MAX_ERROR_CHARS + len(str(path))
    else:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert expected in verdict(document).layers


def _cli_files(tmp_path: Path) -> list[tuple[str, Path, str]]:
    """Every hand-written case as a file (YAML can carry NaN and inf; JSON cannot), and the raw files."""
    files = []
    for hostile in CASES:
        if hostile.name == "configmap-missing":
            continue  # the CLI reads no ConfigMaps: it says so (exit 2) — covered by its own test below
        path = tmp_path / f"{hostile.name}.yaml"
        path.write_text(yaml.safe_dump(hostile.document, allow_unicode=True), encoding="utf-8")
        files.append((hostile.name, path, _cli_layer(hostile.refused_by)))
    files += [(path.stem, path, _expected_layer(path)) for path in RAW_FILES]
    return files


def _cli_layer(layers: frozenset[str]) -> str:
    for layer in ("model", "catalog", "planner", "render"):
        if layer in layers:
            return layer
    return "crd-only"


# What each command answers per refusing layer: 2 invalid input, 3 infeasible, 0 nothing to refuse.
EXIT_CODES = {
    "yaml": {"validate": 2, "plan": 2, "render": 2},
    "model": {"validate": 2, "plan": 2, "render": 2},
    "catalog": {"validate": 2, "plan": 2, "render": 2},
    "planner": {"validate": 0, "plan": 3, "render": 3},
    "render": {"validate": 0, "plan": 0, "render": 2},
}


def _commands() -> list[str]:
    registered = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    return [command for command in ("validate", "plan", "render", "simulate") if command in registered]


def test_the_cli_refuses_every_hostile_file_with_its_exit_code_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tally: dict[tuple[str, int], int] = {}
    for name, path, layer in _cli_files(tmp_path):
        if layer == "crd-only":
            continue
        for command in _commands():
            argv = [command, str(path)] if command == "validate" else [command, "-f", str(path)]
            code = main(argv)  # an exception here is the crash we are looking for
            out, err = capsys.readouterr()
            expected = EXIT_CODES[layer].get(command, 2)
            assert code == expected, f"frontier {command} {name}: exit {code}, expected {expected}\n{err[-2000:]}"
            assert "Traceback" not in out + err
            if code:
                assert err.strip(), f"frontier {command} {name}: exit {code} without a message"
                assert len(err) < 20_000, f"frontier {command} {name}: {len(err)} characters of error"
            tally[(command, code)] = tally.get((command, code), 0) + 1
    assert sum(tally.values()) >= 3 * 100


def test_the_cli_says_it_cannot_read_a_configmap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (hostile,) = [c for c in CASES if c.name == "configmap-missing"]
    path = tmp_path / "configmap.yaml"
    path.write_text(yaml.safe_dump(hostile.document), encoding="utf-8")
    for argv in (["plan", "-f", str(path)], ["render", "-f", str(path)]):
        assert main(argv) == 2
        assert "configMapRef" in capsys.readouterr().err


SUBPROCESS_SAMPLE = ["duplicate-percentile", "alias-bomb", "deep-nesting", "python-object-tag"]


@pytest.mark.parametrize("stem", SUBPROCESS_SAMPLE)
def test_the_cli_as_a_process_exits_2_with_a_message(stem: str) -> None:
    path = CORPUS / f"{stem}.yaml"
    for command in (["validate", str(path)], ["plan", "-f", str(path)], ["render", "-f", str(path)]):
        done = subprocess.run(
            [sys.executable, "-m", "frontier_operator.cli", *command],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=ROOT,
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and "invalid" in done.stderr
