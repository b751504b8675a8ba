"""`spec.sweep` and `status.sweep`: benchmark sweeps of candidate configurations (see docs/sweeps.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from frontier_operator.api.base import ApiModel
from frontier_operator.api.units import Duration, GpuMinutes

MAX_LEVELS = 16
MAX_POINTS = 32
MAX_LINES = 16


class SweepSpec(ApiModel):
    """Measure candidate configurations with SGLang's benchmark client where the model is least sure."""

    budget: GpuMinutes = GpuMinutes(30.0, "30 GPU-min")
    """GPU time one sweep may use, deployments' warm-up included, e.g. `30 GPU-min` or `2 GPU-h`; also the most
    spent per `period`. Default: 30 GPU-min."""
    on_create: bool = False
    """Sweep on creation (opt-in). In auto mode the first deployment waits for it and serves the measured plan;
    in recommend and observe mode the sweep is proposed (`frontier sweep start` runs it). Default: false."""
    period: Duration | None = None
    """Sweep again this often (and never spend more than the budget per period), e.g. `168h`. Default: never."""
    concurrency: Annotated[list[Annotated[int, Field(ge=1, le=4096)]] | None, Field(max_length=MAX_LEVELS)] = None
    """Concurrency levels (requests in flight per measured unit) points are chosen from. Default: 1, 2, 4 … 512."""


class SweepPointStatus(ApiModel):
    """One measured point against what the model predicted for it."""

    configuration: Annotated[str, Field(max_length=256)]
    """The measured unit, e.g. `bf16 TP4 cap 64 ×1`."""
    concurrency: Annotated[int, Field(ge=1)]
    """Requests in flight during the run."""
    reason: Annotated[str, Field(max_length=64)] = ""
    """Why it was measured: chosen, knee, runner-up or least-calibrated."""
    predicted_ttft_ms: float | None = None
    """Median TTFT the model predicted, ms."""
    measured_ttft_ms: float | None = None
    """Median TTFT measured, ms."""
    predicted_tpot_ms: float | None = None
    """Median TPOT the model predicted, ms."""
    measured_tpot_ms: float | None = None
    """Median TPOT measured, ms."""
    measured_output_tokens_per_s: float | None = None
    """Output tokens per second of the unit during the run."""


class SweepStatus(ApiModel):
    """The last sweep: what it measured, what it cost, what it changed."""

    phase: Annotated[str, Field(max_length=32)] = "Idle"
    """Idle, Proposed (recommend mode), Running, Done or Failed."""
    gpu_minutes_used: Annotated[float, Field(ge=0)] = 0.0
    """GPU-minutes spent in the current period."""
    period_started_at: str | None = None
    """Start of the current budget period (RFC 3339)."""
    last_run_at: str | None = None
    """When the last sweep finished (RFC 3339)."""
    results_config_map: Annotated[str | None, Field(max_length=253)] = None
    """ConfigMap holding every stored measured point (key `sweep.json`)."""
    points: Annotated[list[SweepPointStatus], Field(max_length=MAX_POINTS)] = []
    """Measured points of the last sweep, predicted against measured."""
    explanation: Annotated[list[Annotated[str, Field(max_length=1024)]], Field(max_length=MAX_LINES)] = []
    """Why these points, in sentences."""
