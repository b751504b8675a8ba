"""Reads the YAML data files shipped inside the package (``catalog/data``)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml


def load_data_file(file_name: str) -> Any:
    """Parse one shipped YAML file; the caller turns the plain data into typed catalog entries."""
    text = resources.files("frontier_operator.catalog").joinpath("data", file_name).read_text("utf-8")
    return yaml.safe_load(text)
