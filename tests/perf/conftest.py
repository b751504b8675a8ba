"""Fixtures of the performance-model tests."""

from __future__ import annotations

import pytest

from frontier_operator.perf.calibration import Calibration
from frontier_operator.perf.model import PerformanceModel


@pytest.fixture(scope="session")
def shipped() -> PerformanceModel:
    return PerformanceModel.default()


@pytest.fixture(scope="session")
def priors() -> PerformanceModel:
    return PerformanceModel(Calibration.uncalibrated())
