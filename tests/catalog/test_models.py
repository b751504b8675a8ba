"""The model catalog (catalog/data/models.yaml) and the Hugging Face config.json loader.

Expected figures below are written out from the configs and model cards (see
tests/data/hf_configs/SOURCES.md and the sources of each catalog entry), not computed by the code
under test.
"""

from __future__ import annotations

import copy
import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from frontier_operator.catalog import models as catalog_models
from frontier_operator.catalog.hf_config import HfConfigError, model_from_hf_config, parameter_counts
from frontier_operator.catalog.models import (
    ModelCatalogError,
    find_model,
    load_model_catalog,
    model_names,
)
from frontier_operator.catalog.types import AttentionKind, LayerMix, ModelArch

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
# shared/ lies beside the repository, here and in CI.
SILICON_CSV = Path(__file__).resolve().parents[2].parent / "shared/data/silicon/silicon_measurements.csv"

REQUIRED_MODELS = (
    "DeepSeek-V3",
    "DeepSeek-R1",
    "Kimi-K2.5",
    "GLM-5",
    "Qwen3-32B",
    "Qwen3-235B-A22B",
    "Qwen3.5-397B-A17B",
    "Llama-3.1-8B-Instruct",
    "Llama-3.1-70B-Instruct",
    "gpt-oss-120b",
    "MiniMax-M2.5",
)


def load_fixture(folder: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / folder / "config.json").read_text("utf-8"))
    return loaded


@dataclass(frozen=True)
class Expected:
    folder: str
    catalog_name: str
    attention: AttentionKind
    kv_elements_per_token: int
    layers: LayerMix
    native_dtype: str
    num_experts: int | None
    experts_per_token: int | None
    shared_experts: int
    dense_layers: int
    mtp_layers: int
    published_total_b: float
    # None where the publisher's convention differs from ours (dense models; MiniMax omits the head).
    published_active_b: float | None


EXPECTED = (
    # Dense GQA: 2 (K and V) × 8 KV heads × 128 × 32 layers.
    Expected("llama-3.1-8b-instruct", "Llama-3.1-8B-Instruct", AttentionKind.GQA, 2 * 8 * 128 * 32,
             LayerMix(full_attention=32), "bf16", None, None, 0, 0, 0, 8.0, None),
    Expected("llama-3.1-70b-instruct", "Llama-3.1-70B-Instruct", AttentionKind.GQA, 2 * 8 * 128 * 80,
             LayerMix(full_attention=80), "bf16", None, None, 0, 0, 0, 70.6, None),
    Expected("qwen3-32b", "Qwen3-32B", AttentionKind.GQA, 2 * 8 * 128 * 64,
             LayerMix(full_attention=64), "bf16", None, None, 0, 0, 0, 32.8, None),
    # MoE + GQA.
    Expected("qwen3-235b-a22b", "Qwen3-235B-A22B", AttentionKind.GQA, 2 * 4 * 128 * 94,
             LayerMix(full_attention=94), "bf16", 128, 8, 0, 0, 0, 235.0, 22.0),
    # MoE + MLA: one 512-wide latent plus the 64-wide shared rope key per layer.
    Expected("deepseek-v3", "DeepSeek-V3", AttentionKind.MLA, (512 + 64) * 61,
             LayerMix(full_attention=61), "fp8", 256, 8, 1, 3, 1, 671.0, 37.0),
    Expected("deepseek-r1", "DeepSeek-R1", AttentionKind.MLA, (512 + 64) * 61,
             LayerMix(full_attention=61), "fp8", 256, 8, 1, 3, 1, 671.0, 37.0),
    Expected("kimi-k2.5", "Kimi-K2.5", AttentionKind.MLA, (512 + 64) * 61,
             LayerMix(full_attention=61), "int4", 384, 8, 1, 1, 0, 1000.0, 32.0),
    Expected("glm-5", "GLM-5", AttentionKind.MLA, (512 + 64) * 78,
             LayerMix(full_attention=78), "bf16", 256, 8, 1, 3, 1, 744.0, 40.0),
    # Hybrid: 15 full-attention layers (2 KV heads × 256) among 45 Gated DeltaNet layers.
    Expected("qwen3.5-397b-a17b", "Qwen3.5-397B-A17B", AttentionKind.GQA, 2 * 2 * 256 * 15,
             LayerMix(full_attention=15, linear_attention=45), "bf16", 512, 10, 1, 0, 1, 397.0, 17.0),
    # Sliding window: only the 18 full-attention layers keep the whole context.
    Expected("gpt-oss-120b", "gpt-oss-120b", AttentionKind.GQA, 2 * 8 * 64 * 18,
             LayerMix(full_attention=18, sliding_window=18, sliding_window_size=128), "mxfp4",
             128, 4, 0, 0, 0, 117.0, 5.1),
    Expected("minimax-m2.5", "MiniMax-M2.5", AttentionKind.GQA, 2 * 8 * 128 * 62,
             LayerMix(full_attention=62), "fp8", 256, 8, 0, 0, 3, 229.9, None),
)  # fmt: skip
EXPECTED_IDS = [case.folder for case in EXPECTED]


# --------------------------------------------------------------------------------------------------
# The catalog file.


def test_catalog_has_every_required_model() -> None:
    names = model_names()
    assert set(REQUIRED_MODELS) <= set(names)
    assert names == sorted(names, key=str.lower)
    assert len(load_model_catalog()) == len(names)


@pytest.mark.parametrize("model", load_model_catalog().values(), ids=lambda model: model.name)
def test_every_catalog_entry_is_servable_and_cited(model: ModelArch) -> None:
    assert load_model_catalog()[model.name.lower()] is model
    assert model.checkpoint_for(model.native_dtype) == model.hf_id
    assert model.kv_elements_per_token() > 0
    assert 0 < model.active_params <= model.total_params
    assert model.sources and all(source.strip() for source in model.sources)
    for name in (model.name, model.hf_id, *model.aliases, *(repo for _, repo in model.checkpoints)):
        assert find_model(name) is model
        assert find_model(name.upper()) is model


def test_every_silicon_measurement_model_resolves() -> None:
    if not SILICON_CSV.exists():
        pytest.skip(f"shared data not present at {SILICON_CSV}")
    with SILICON_CSV.open(newline="", encoding="utf-8") as handle:
        model_paths = {row["model_path"] for row in csv.DictReader(handle)}
    assert len(model_paths) >= 10
    unresolved = sorted(path for path in model_paths if find_model(path) is None)
    assert unresolved == []


def test_find_model_matches_names_repositories_and_checkpoints_in_any_case() -> None:
    assert find_model("deepseek-r1") is find_model("deepseek-ai/DeepSeek-R1")
    assert find_model("  Qwen/Qwen3-235B-A22B-FP8 ") is load_model_catalog()["qwen3-235b-a22b"]
    assert find_model("NVIDIA/LLAMA-3.1-8B-INSTRUCT-FP8") is load_model_catalog()["llama-3.1-8b-instruct"]
    assert find_model("meta-llama/Llama-3.1-70B") is load_model_catalog()["llama-3.1-70b-instruct"]
    assert find_model("nvidia/DeepSeek-V3.1-NVFP4") is load_model_catalog()["deepseek-v3.1"]
    assert find_model("openai/gpt-oss-120b") is load_model_catalog()["gpt-oss-120b"]
    assert find_model("not-a-model/Nope-7B") is None
    assert find_model("") is None


@pytest.mark.parametrize("case", EXPECTED, ids=EXPECTED_IDS)
def test_catalog_entry_agrees_with_its_config_json(case: Expected) -> None:
    entry = find_model(case.catalog_name)
    assert entry is not None
    loaded = model_from_hf_config(load_fixture(case.folder), entry.name, entry.hf_id)
    structural = (
        "architecture", "num_layers", "hidden_size", "intermediate_size", "num_attention_heads",
        "num_kv_heads", "head_dim", "attention", "vocab_size", "max_context", "native_dtype", "layers",
        "mla", "moe", "mtp_layers",
    )  # fmt: skip
    for field in structural:
        assert getattr(entry, field) == getattr(loaded, field), field
    # The YAML keeps the computed counts rounded to 0.01 B.
    assert entry.total_params == pytest.approx(loaded.total_params, abs=0.006e9)
    assert entry.active_params == pytest.approx(loaded.active_params, abs=0.006e9)


# --------------------------------------------------------------------------------------------------
# The loader on real configs.


@pytest.mark.parametrize("case", EXPECTED, ids=EXPECTED_IDS)
def test_loader_reads_architecture(case: Expected) -> None:
    model = model_from_hf_config(load_fixture(case.folder), case.catalog_name)
    assert model.attention is case.attention
    assert model.kv_elements_per_token() == case.kv_elements_per_token
    assert model.layers == case.layers
    assert model.native_dtype == case.native_dtype
    assert model.mtp_layers == case.mtp_layers
    if case.num_experts is None:
        assert model.moe is None
    else:
        assert model.moe is not None
        assert model.moe.num_experts == case.num_experts
        assert model.moe.experts_per_token == case.experts_per_token
        assert model.moe.shared_experts == case.shared_experts
        assert model.moe.dense_layers == case.dense_layers


@pytest.mark.parametrize("case", EXPECTED, ids=EXPECTED_IDS)
def test_computed_total_params_match_published_figure(case: Expected) -> None:
    counts = parameter_counts(load_fixture(case.folder))
    assert counts.total / 1e9 == pytest.approx(case.published_total_b, rel=0.03)


@pytest.mark.parametrize(
    "case", [case for case in EXPECTED if case.published_active_b is not None], ids=lambda case: case.folder
)
def test_computed_active_params_match_published_figure(case: Expected) -> None:
    counts = parameter_counts(load_fixture(case.folder))
    assert case.published_active_b is not None
    # Publishers round active counts coarsely (Qwen3.5's "A17B" is 16.3B of language model here).
    assert counts.active / 1e9 == pytest.approx(case.published_active_b, rel=0.05)


def test_deepseek_v3_kv_cache_is_70272_bytes_per_token_in_bf16() -> None:
    bf16_bytes = 2
    expected = (512 + 64) * 61 * bf16_bytes
    assert expected == 70_272
    loaded = model_from_hf_config(load_fixture("deepseek-v3"), "DeepSeek-V3")
    catalog_entry = find_model("DeepSeek-V3")
    assert catalog_entry is not None
    assert loaded.kv_elements_per_token() * bf16_bytes == expected
    assert catalog_entry.kv_elements_per_token() * bf16_bytes == expected


def test_deepseek_v3_draft_layer_matches_published_mtp_size() -> None:
    # README_WEIGHTS.md: the MTP module has 11.5B unique parameters (embedding and head shared).
    assert parameter_counts(load_fixture("deepseek-v3")).mtp / 1e9 == pytest.approx(11.5, rel=0.03)
    assert parameter_counts(load_fixture("llama-3.1-8b-instruct")).mtp == 0


def test_dense_model_active_params_leave_out_only_the_input_embedding() -> None:
    counts = parameter_counts(load_fixture("llama-3.1-8b-instruct"))
    assert counts.total - counts.active == 128256 * 4096


def test_hf_id_becomes_the_native_checkpoint_and_the_cited_source() -> None:
    model = model_from_hf_config(load_fixture("gpt-oss-120b"), "my-oss", hf_id="openai/gpt-oss-120b")
    assert model.hf_id == "openai/gpt-oss-120b"
    assert model.checkpoint_for("mxfp4") == "openai/gpt-oss-120b"
    assert model.sources == ("https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json",)
    assert model_from_hf_config(load_fixture("gpt-oss-120b"), "anon").checkpoints == ()


def test_head_dim_defaults_to_hidden_over_heads_and_mha_is_recognised() -> None:
    config = load_fixture("llama-3.1-8b-instruct")
    del config["num_key_value_heads"]
    model = model_from_hf_config(config, "llama-mha")
    assert model.head_dim == 4096 // 32
    assert model.attention is AttentionKind.MHA
    assert model.num_kv_heads == 32


def test_quantization_formats_map_to_weight_formats() -> None:
    config = load_fixture("qwen3-32b")
    cases = {
        "fp8": {"quant_method": "fp8", "weight_block_size": [128, 128]},
        "nvfp4": {"quant_method": "modelopt", "quant_algo": "NVFP4"},
        "mxfp4": {"quant_method": "mxfp4"},
        "int4": {"quant_method": "awq", "bits": 4},
    }
    for expected, quantization in cases.items():
        config["quantization_config"] = quantization
        assert model_from_hf_config(config, "q").native_dtype == expected
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
    }
    assert model_from_hf_config(config, "q").native_dtype == "nvfp4"
    del config["quantization_config"]
    config["torch_dtype"] = "float16"
    assert model_from_hf_config(config, "q").native_dtype == "fp16"


def test_qwen_mlp_only_layers_and_deepseek_dense_prefix_are_counted_as_dense() -> None:
    qwen = load_fixture("qwen3-235b-a22b")
    qwen["mlp_only_layers"] = [0, 1]
    model = model_from_hf_config(qwen, "qwen-with-dense")
    assert model.moe is not None and model.moe.dense_layers == 2
    assert model.intermediate_size == 12288
    deepseek = load_fixture("deepseek-v3")
    deepseek["first_k_dense_replace"] = 0
    all_moe = parameter_counts(deepseek).total - parameter_counts(load_fixture("deepseek-v3")).total
    hidden = 7168
    moe_ffn = (256 + 1) * 3 * hidden * 2048 + hidden * 256 + 256  # routed + shared, router, score bias
    dense_ffn = 3 * hidden * 18432
    assert all_moe == 3 * (moe_ffn - dense_ffn)


# --------------------------------------------------------------------------------------------------
# Malformed configs.


def _delete(key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(config: dict[str, Any]) -> None:
        del config[key]

    return mutate


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(config: dict[str, Any]) -> None:
        config[key] = value

    return mutate


def _update(**values: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(config: dict[str, Any]) -> None:
        config.update(values)

    return mutate


def _set_text(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(config: dict[str, Any]) -> None:
        config["text_config"][key] = value

    return mutate


def _drop_everything(config: dict[str, Any]) -> None:
    config.clear()


MALFORMED = [
    ("llama-3.1-8b-instruct", _delete("hidden_size"), "hidden_size"),
    ("llama-3.1-8b-instruct", _set("hidden_size", "4096"), "hidden_size"),
    ("llama-3.1-8b-instruct", _set("hidden_size", True), "hidden_size"),
    ("llama-3.1-8b-instruct", _set("num_hidden_layers", 0), "num_hidden_layers"),
    ("llama-3.1-8b-instruct", _set("num_key_value_heads", 7), "num_key_value_heads"),
    ("llama-3.1-8b-instruct", _set("num_key_value_heads", 64), "num_key_value_heads"),
    ("llama-3.1-8b-instruct", _update(num_attention_heads=30, num_key_value_heads=10), "num_attention_heads"),
    ("llama-3.1-8b-instruct", _delete("max_position_embeddings"), "max_position_embeddings"),
    ("llama-3.1-8b-instruct", _delete("intermediate_size"), "intermediate_size"),
    ("llama-3.1-8b-instruct", _set("torch_dtype", "float8"), "torch_dtype"),
    ("llama-3.1-8b-instruct", _set("architectures", "LlamaForCausalLM"), "architectures"),
    ("llama-3.1-8b-instruct", _set("tie_word_embeddings", "no"), "tie_word_embeddings"),
    ("qwen3-235b-a22b", _set("num_experts_per_tok", 129), "num_experts_per_tok"),
    ("qwen3-235b-a22b", _set("mlp_only_layers", "0,1"), "mlp_only_layers"),
    ("qwen3-235b-a22b", _delete("moe_intermediate_size"), "moe_intermediate_size"),
    ("gpt-oss-120b", _delete("intermediate_size"), "intermediate_size"),
    ("deepseek-v3", _set("kv_lora_rank", "512"), "kv_lora_rank"),
    ("deepseek-v3", _delete("qk_rope_head_dim"), "qk_rope_head_dim"),
    ("deepseek-v3", _set("quantization_config", {"quant_method": "bitsandbytes"}), "quantization_config.quant_method"),
    ("deepseek-v3", _set("quantization_config", [1]), "quantization_config"),
    ("gpt-oss-120b", _set("layer_types", ["full_attention"] * 35), "layer_types"),
    ("gpt-oss-120b", _set("layer_types", ["chunked_attention"] * 36), "layer_types"),
    ("gpt-oss-120b", _delete("sliding_window"), "sliding_window"),
    ("kimi-k2.5", _set("text_config", "DeepseekV3"), "text_config"),
    ("kimi-k2.5", _set_text("n_routed_experts", -1), "text_config.n_routed_experts"),
    ("qwen3.5-397b-a17b", _set_text("linear_num_value_heads", None), "text_config.linear_num_value_heads"),
    ("qwen3.5-397b-a17b", _set_text("hidden_size", 4096.0), "text_config.hidden_size"),
    ("glm-5", _set("index_n_heads", 32.5), "index_n_heads"),
    ("minimax-m2.5", _set("use_mtp", "yes"), "use_mtp"),
    ("llama-3.1-8b-instruct", _drop_everything, "hidden_size"),
]  # fmt: skip


@pytest.mark.parametrize(("folder", "mutate", "field"), MALFORMED)
def test_malformed_config_names_the_bad_field(
    folder: str, mutate: Callable[[dict[str, Any]], None], field: str
) -> None:
    config = load_fixture(folder)
    mutate(config)
    with pytest.raises(HfConfigError) as raised:
        model_from_hf_config(config, "broken")
    assert raised.value.field == field
    assert field in str(raised.value)


def test_config_that_is_not_an_object_is_rejected() -> None:
    with pytest.raises(HfConfigError) as raised:
        model_from_hf_config([], "broken")  # type: ignore[arg-type]
    assert raised.value.field == "config"
    with pytest.raises(HfConfigError) as raised:
        model_from_hf_config(load_fixture("qwen3-32b"), "  ")
    assert raised.value.field == "name"


def test_config_without_architectures_or_model_type_is_rejected() -> None:
    config = load_fixture("qwen3-32b")
    del config["architectures"], config["model_type"]
    with pytest.raises(HfConfigError) as raised:
        model_from_hf_config(config, "broken")
    assert raised.value.field == "architectures"


JUNK_VALUES = ("x", -3, 0, True, 1.5, [], {}, [1, "a"], None)


def _junk_variants(config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every config that replaces one language-model key with one junk value."""
    nested = "text_config" in config
    section = config["text_config"] if nested else config
    for key in list(section):
        for junk in JUNK_VALUES:
            variant = copy.deepcopy(config)
            (variant["text_config"] if nested else variant)[key] = junk
            yield variant


@pytest.mark.parametrize("folder", EXPECTED_IDS)
def test_junk_values_raise_only_hf_config_errors(folder: str) -> None:
    loaded = rejected = 0
    for variant in _junk_variants(load_fixture(folder)):
        try:
            model_from_hf_config(variant, "junk")
            loaded += 1
        except HfConfigError as error:
            assert error.field
            rejected += 1
    assert rejected > 0 and loaded > 0


# --------------------------------------------------------------------------------------------------
# A broken catalog file is caught at load time.


@pytest.fixture
def broken_catalog(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[dict[str, Any]], None]], None]]:
    good = catalog_models.load_data_file(catalog_models.MODELS_FILE)

    def install(break_entry: Callable[[dict[str, Any]], None]) -> None:
        document = copy.deepcopy(good)
        break_entry(document["models"][0])
        monkeypatch.setattr(catalog_models, "load_data_file", lambda _name: document)
        catalog_models.load_model_catalog.cache_clear()

    yield install
    monkeypatch.undo()
    catalog_models.load_model_catalog.cache_clear()


@pytest.mark.parametrize(
    ("break_entry", "message"),
    [
        (lambda entry: entry["layers"].update(full_attention=60), "add up to num_layers"),
        (lambda entry: entry.pop("sources"), "missing keys"),
        (lambda entry: entry.update(colour="blue"), "unknown keys"),
        (lambda entry: entry.update(hidden_size="7168"), "hidden_size"),
        (lambda entry: entry.update(attention="gqa"), "mla"),
        (lambda entry: entry.update(native_dtype="bf16"), "checkpoints"),
        (lambda entry: entry.update(aliases=["deepseek-ai/DeepSeek-R1"]), "would resolve to both"),
        (lambda entry: entry.update(kept_in_bf16={"mxfp4": ["attention"]}), "has no checkpoint"),
        (lambda entry: entry.update(kept_in_bf16={"nvfp4": ["router"]}), "unknown module groups"),
        (lambda entry: entry.update(kept_in_bf16={"nvfp4": ["attention", "attention_inputs"]}), "both attention"),
        (lambda entry: entry.update(kept_in_bf16={"nvfp4": "attention"}), "list of non-empty strings"),
        (lambda entry: entry.update(mtp_layers=0), "names draft, but the model has no MTP layers"),
    ],
)
def test_broken_catalog_entry_is_reported(
    broken_catalog: Callable[[Callable[[dict[str, Any]], None]], None],
    break_entry: Callable[[dict[str, Any]], None],
    message: str,
) -> None:
    broken_catalog(break_entry)
    with pytest.raises(ModelCatalogError, match=message):
        load_model_catalog()
