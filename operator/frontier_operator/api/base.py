"""The base every API model shares: camelCase on the wire, unknown fields refused, immutable."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    # Field docstrings become descriptions, so `kubectl explain` reads the same text as the code.
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        use_enum_values=False,
    )
