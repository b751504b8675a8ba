"""The hand-written corpus of hostile FrontierTargets, each with the layers that must refuse it.

Used by tests/hardening/test_hostile_input.py (every case through admission and the operator's decision,
and through the CLI) and tests/hardening/test_operator_hostile.py (those the API server admits, against
the running operator). Layers: crd (OpenAPI schema with strict field validation), cel, model (the API
models), catalog, planner, render — see hardening_support.verdict.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import yaml

from hardening_support import ROOT, example

MEGABYTE = "x" * 1_000_000
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml writes the megabyte cases in milliseconds
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
    # "8" for an integer and "yes" for a boolean: the schema refuses them, and the models (strict) too.
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
    case("unknown-field-megabyte-key", put("spec.serving", {MEGABYTE[:100_000]: 1}), *SHAPE),
    # --- unknown names
    case("unknown-model", put("spec.model.name", "acme/Foo-9000"), "catalog"),
    case("unknown-gpu", put("spec.hardware.pools[0].gpu", "H900"), "catalog"),
    case("gpu-empty", put("spec.hardware.pools[0].gpu", ""), *SHAPE),
    case("gpu-lowercase-unknown", put("spec.hardware.pools[0].gpu", "a100-80gb-pcie"), "catalog"),
    case("quantization-int3", put("spec.search.quantizations", ["int3"]), *SHAPE),
    case("kv-cache-fp4", put("spec.search.kvCacheDtypes", ["fp4"]), *SHAPE),
    case("checkpoint-format-unknown", put("spec.model.checkpoints", {"int3": "a/b"}), "cel", "model"),
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
    case("cooldown-below-interval", put("spec.tuning", {"interval": "15m", "cooldown": "10m"}), "cel", "model"),
    # The CRD has no defaults (structural schemas of this CRD carry none): CEL cannot see the default cooldown.
    case("interval-above-default-cooldown", put("spec.tuning", {"interval": "15m"}), "model"),
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
    case("config-json-megabyte-hidden-size", inline_model(hf_config(hidden_size=MEGABYTE)), "catalog"),
    case("config-json-heads-not-dividing", inline_model(hf_config(num_key_value_heads=7)), "catalog"),
    case("config-json-huge-vocab", inline_model(hf_config(vocab_size=10**40)), "planner"),
    case("config-json-is-a-list", inline_model([1, 2, 3]), *SHAPE),
]
