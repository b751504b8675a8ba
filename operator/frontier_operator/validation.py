"""Checks of a FrontierTarget against the catalog: names the schema cannot know are real.

The CRD schema and the pydantic models check shape and units; whether `H900` is a GPU or
`acme/Foo-9000` a model only the catalog can say. Each problem is a `FieldError` like the schema's.
"""

from __future__ import annotations

from frontier_operator.api import FrontierTarget, SpecInvalid
from frontier_operator.api.errors import FieldError
from frontier_operator.api.spec import FrontierTargetSpec
from frontier_operator.catalog.gpus import find_gpu, gpu_names
from frontier_operator.catalog.hf_config import HfConfigError, model_from_hf_config
from frontier_operator.catalog.models import find_model


def catalog_errors(spec: FrontierTargetSpec) -> list[FieldError]:
    errors = []
    if spec.model.config is None and find_model(spec.model.name) is None:
        errors.append(
            FieldError(
                "spec.model.name",
                f'"{spec.model.name}" is not in the catalog',
                "use a catalog name (`frontier catalog` lists them) or give spec.model.config with its config.json",
            )
        )
    inline = spec.model.config.inline if spec.model.config is not None else None
    if inline is not None:
        # The planner reads the architecture from it; a config.json it cannot read is the user's to fix.
        try:
            model_from_hf_config(inline, spec.model.name)
        except HfConfigError as bad:
            errors.append(
                FieldError(f"spec.model.config.inline.{bad.field}", bad.message, bad.hint or "fix config.json")
            )
    for index, pool in enumerate(spec.hardware.pools):
        gpu = find_gpu(pool.gpu)
        if gpu is None:
            errors.append(
                FieldError(
                    f"spec.hardware.pools[{index}].gpu",
                    f'"{pool.gpu}" is not a known GPU',
                    f"use one of {', '.join(gpu_names())}",
                )
            )
        elif pool.gpus_per_node is not None and pool.gpus_per_node > gpu.gpus_per_node:
            errors.append(
                FieldError(
                    f"spec.hardware.pools[{index}].gpusPerNode",
                    f"no {gpu.name} node holds {pool.gpus_per_node} GPUs",
                    f"use at most {gpu.gpus_per_node}, the GPUs of one {gpu.name} node",
                )
            )
    return errors


def check_target(target: FrontierTarget) -> FrontierTarget:
    """Return the target unchanged, or raise SpecInvalid listing every catalog problem."""
    errors = catalog_errors(target.spec)
    if errors:
        raise SpecInvalid(errors)
    return target
