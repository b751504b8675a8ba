"""The model catalog: architectures the operator knows by name (``catalog/data/models.yaml``).

A FrontierTarget may name its model by catalog name, Hugging Face repository, alias or any known
checkpoint repository, in any letter case; :func:`find_model` resolves all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, TypeVar

from frontier_operator.catalog.data_files import load_data_file
from frontier_operator.catalog.types import BF16_MODULE_GROUPS, AttentionKind, LayerMix, MlaDims, ModelArch, MoeDims

MODELS_FILE = "models.yaml"
_BILLION = 1e9

_REQUIRED_KEYS = frozenset(
    {
        "name",
        "hf_id",
        "architecture",
        "total_params_b",
        "active_params_b",
        "num_layers",
        "hidden_size",
        "intermediate_size",
        "attention",
        "num_attention_heads",
        "num_kv_heads",
        "head_dim",
        "vocab_size",
        "max_context",
        "native_dtype",
        "layers",
        "checkpoints",
        "sources",
    }
)
_OPTIONAL_KEYS = frozenset({"mla", "moe", "mtp_layers", "aliases", "kept_in_bf16"})

_T = TypeVar("_T")


class ModelCatalogError(ValueError):
    """``models.yaml`` is malformed or inconsistent (a packaging bug, caught by the catalog tests)."""


@cache
def load_model_catalog() -> Mapping[str, ModelArch]:
    """Every catalog model, keyed by its lower-case name, in file order."""
    document = load_data_file(MODELS_FILE)
    entries = document.get("models") if isinstance(document, Mapping) else None
    if not isinstance(entries, list) or not entries:
        raise ModelCatalogError(f"{MODELS_FILE}: expected a non-empty list under 'models'")
    catalog: dict[str, ModelArch] = {}
    for position, entry in enumerate(entries):
        model = _model_from_entry(entry, position)
        key = _normalise(model.name)
        if key in catalog:
            raise ModelCatalogError(f"{MODELS_FILE}: model {model.name!r} is listed twice")
        catalog[key] = model
    _build_index(catalog.values())  # fail at load time on ambiguous aliases
    return MappingProxyType(catalog)


def find_model(name_or_hf_id: str) -> ModelArch | None:
    """The catalog model whose name, hf_id, alias or checkpoint repository matches (case-insensitive)."""
    return _catalog_index().get(_normalise(name_or_hf_id))


def model_names() -> list[str]:
    """Display names of every catalog model, sorted case-insensitively."""
    return sorted((model.name for model in load_model_catalog().values()), key=str.lower)


def _normalise(name: str) -> str:
    return name.strip().lower()


@cache
def _catalog_index() -> Mapping[str, ModelArch]:
    return _build_index(load_model_catalog().values())


def _build_index(models: Iterable[ModelArch]) -> Mapping[str, ModelArch]:
    index: dict[str, ModelArch] = {}
    for model in models:
        names = {model.name, model.hf_id, *model.aliases, *(repo for _, repo in model.checkpoints)}
        for name in names:
            key = _normalise(name)
            owner = index.setdefault(key, model)
            if owner is not model:
                raise ModelCatalogError(
                    f"{MODELS_FILE}: {name!r} would resolve to both {owner.name!r} and {model.name!r}"
                )
    return MappingProxyType(index)


# --------------------------------------------------------------------------------------------------
# One YAML entry → ModelArch, with errors that say which entry and which key.


class _Entry:
    def __init__(self, values: Mapping[str, Any], label: str) -> None:
        self.values = values
        self.label = label

    def fail(self, key: str, problem: str) -> ModelCatalogError:
        return ModelCatalogError(f"{MODELS_FILE}: {self.label}: {key} {problem}")

    def typed(self, key: str, check: Callable[[Any], bool], kind: str, convert: Callable[[Any], _T]) -> _T:
        value = self.values.get(key)
        if not check(value):
            raise self.fail(key, f"must be {kind}, got {value!r}")
        return convert(value)

    def positive_int(self, key: str) -> int:
        return self.typed(key, lambda v: _is_int(v) and v > 0, "a positive integer", int)

    def count(self, key: str, default: int = 0) -> int:
        if self.values.get(key) is None:
            return default
        return self.typed(key, lambda v: _is_int(v) and v >= 0, "a non-negative integer", int)

    def text(self, key: str) -> str:
        return self.typed(key, lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string", str)

    def billions(self, key: str) -> float:
        return _BILLION * self.typed(key, lambda v: _is_number(v) and v > 0, "a positive number of billions", float)

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.values.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise self.fail(key, f"must be a list of non-empty strings, got {value!r}")
        return tuple(value)

    def child(self, key: str) -> _Entry | None:
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.fail(key, f"must be a mapping, got {value!r}")
        return _Entry(value, f"{self.label}.{key}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _model_from_entry(raw: Any, position: int) -> ModelArch:
    if not isinstance(raw, Mapping):
        raise ModelCatalogError(f"{MODELS_FILE}: entry #{position} must be a mapping")
    label = str(raw.get("name", f"entry #{position}"))
    entry = _Entry(raw, label)
    missing = sorted(_REQUIRED_KEYS - raw.keys())
    unknown = sorted(raw.keys() - _REQUIRED_KEYS - _OPTIONAL_KEYS)
    if missing or unknown:
        raise ModelCatalogError(f"{MODELS_FILE}: {label}: missing keys {missing}, unknown keys {unknown}")

    attention_name = entry.text("attention")
    if attention_name not in {kind.value for kind in AttentionKind}:
        raise entry.fail("attention", f"must be one of mha/gqa/mla, got {attention_name!r}")
    model = ModelArch(
        name=entry.text("name"),
        hf_id=entry.text("hf_id"),
        architecture=entry.text("architecture"),
        total_params=entry.billions("total_params_b"),
        active_params=entry.billions("active_params_b"),
        num_layers=entry.positive_int("num_layers"),
        hidden_size=entry.positive_int("hidden_size"),
        intermediate_size=entry.count("intermediate_size"),
        num_attention_heads=entry.positive_int("num_attention_heads"),
        num_kv_heads=entry.positive_int("num_kv_heads"),
        head_dim=entry.positive_int("head_dim"),
        attention=AttentionKind(attention_name),
        vocab_size=entry.positive_int("vocab_size"),
        max_context=entry.positive_int("max_context"),
        native_dtype=entry.text("native_dtype"),
        layers=_layer_mix(entry),
        mla=_mla(entry),
        moe=_moe(entry),
        mtp_layers=entry.count("mtp_layers"),
        checkpoints=_checkpoints(entry),
        kept_in_bf16=_kept_in_bf16(entry),
        aliases=entry.strings("aliases"),
        sources=entry.strings("sources"),
    )
    _check_consistency(model, entry)
    return model


def _layer_mix(entry: _Entry) -> LayerMix:
    layers = entry.child("layers")
    if layers is None:
        raise entry.fail("layers", "is required")
    return LayerMix(
        full_attention=layers.count("full_attention"),
        sliding_window=layers.count("sliding_window"),
        sliding_window_size=layers.count("sliding_window_size"),
        linear_attention=layers.count("linear_attention"),
    )


def _mla(entry: _Entry) -> MlaDims | None:
    mla = entry.child("mla")
    if mla is None:
        return None
    return MlaDims(
        kv_lora_rank=mla.positive_int("kv_lora_rank"),
        q_lora_rank=mla.positive_int("q_lora_rank") if mla.values.get("q_lora_rank") is not None else None,
        qk_nope_head_dim=mla.positive_int("qk_nope_head_dim"),
        qk_rope_head_dim=mla.positive_int("qk_rope_head_dim"),
        v_head_dim=mla.positive_int("v_head_dim"),
        index_topk=mla.count("index_topk"),
        index_heads=mla.count("index_n_heads"),
        index_head_dim=mla.count("index_head_dim"),
    )


def _moe(entry: _Entry) -> MoeDims | None:
    moe = entry.child("moe")
    if moe is None:
        return None
    return MoeDims(
        num_experts=moe.positive_int("num_experts"),
        experts_per_token=moe.positive_int("experts_per_token"),
        shared_experts=moe.count("shared_experts"),
        expert_intermediate_size=moe.positive_int("expert_intermediate_size"),
        dense_layers=moe.count("dense_layers"),
    )


def _checkpoints(entry: _Entry) -> tuple[tuple[str, str], ...]:
    checkpoints = entry.child("checkpoints")
    if checkpoints is None or not checkpoints.values:
        raise entry.fail("checkpoints", "must map at least one weight format to a repository")
    return tuple((str(fmt), checkpoints.text(str(fmt))) for fmt in checkpoints.values)


def _kept_in_bf16(entry: _Entry) -> tuple[tuple[str, tuple[str, ...]], ...]:
    kept = entry.child("kept_in_bf16")
    if kept is None:
        return ()
    return tuple((str(fmt), kept.strings(str(fmt))) for fmt in kept.values)


def _check_consistency(model: ModelArch, entry: _Entry) -> None:
    """Invariants a hand-edited entry could break; the performance model relies on them."""
    mix = model.layers
    if mix.full_attention + mix.sliding_window + mix.linear_attention != model.num_layers:
        raise entry.fail("layers", f"must add up to num_layers ({model.num_layers})")
    if bool(mix.sliding_window) != bool(mix.sliding_window_size):
        raise entry.fail("layers", "needs sliding_window_size exactly when it has sliding_window layers")
    if (model.attention is AttentionKind.MLA) != (model.mla is not None):
        raise entry.fail("mla", "must be given exactly when attention is mla")
    if model.num_attention_heads % model.num_kv_heads:
        raise entry.fail("num_kv_heads", "must divide num_attention_heads")
    if model.attention is AttentionKind.GQA and model.num_kv_heads == model.num_attention_heads:
        raise entry.fail("attention", "is gqa but every head has its own KV head (that is mha)")
    if model.active_params > model.total_params:
        raise entry.fail("active_params_b", "exceeds total_params_b")
    for weight_format, groups in model.kept_in_bf16:
        if model.checkpoint_for(weight_format) is None:
            raise entry.fail("kept_in_bf16", f"names {weight_format!r}, which has no checkpoint")
        if unknown := set(groups) - set(BF16_MODULE_GROUPS):
            raise entry.fail("kept_in_bf16", f"names unknown module groups {sorted(unknown)}")
        if {"attention", "attention_inputs"} <= set(groups):
            raise entry.fail("kept_in_bf16", "names both attention and attention_inputs (the latter is part of it)")
        if "draft" in groups and not model.mtp_layers:
            raise entry.fail("kept_in_bf16", "names draft, but the model has no MTP layers")
    if model.checkpoint_for(model.native_dtype) != model.hf_id:
        raise entry.fail("checkpoints", f"must list hf_id under its native_dtype {model.native_dtype!r}")
    moe = model.moe
    if moe is not None:
        if moe.experts_per_token > moe.num_experts:
            raise entry.fail("moe", "routes to more experts than it has")
        if moe.dense_layers > model.num_layers:
            raise entry.fail("moe", "has more dense layers than the model has layers")
    if (model.moe is None or model.moe.dense_layers > 0) != (model.intermediate_size > 0):
        raise entry.fail("intermediate_size", "must be > 0 exactly when the model has dense FFN layers")
    if not model.sources:
        raise entry.fail("sources", "must cite where the figures come from")
