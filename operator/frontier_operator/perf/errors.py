"""The one error the performance model raises: a configuration it cannot put a number on."""

from __future__ import annotations


# The name is part of the performance model's public interface (planner and CLI catch it), hence no "Error" suffix.
class UnpredictableConfig(ValueError):  # noqa: N818
    """The model cannot predict this configuration; `reason` says why in one sentence.

    Raised for inputs outside what the physics covers (an unknown number format, a format the GPU cannot
    run, weights that do not fit, a zero-sized worker), never for configurations that are merely slow.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
