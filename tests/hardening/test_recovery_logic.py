"""The pure pieces behind the fault table: a refused apply reported once and stably, and numbers that
survive the spec's own round trip (the plan cache re-reads every spec it plans)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from frontier_operator.api.status import ConditionType, FrontierTargetStatus
from frontier_operator.api.units import Price, Rate
from frontier_operator.planner.types import Infeasible
from frontier_operator.reconcile.conditions import find_condition
from frontier_operator.reconcile.core import InvalidSpec, Planned, ReconcileInput, reconcile, refused_by_api
from hardening_support import operator_outcome
from hostile_corpus import put


def _inputs(current: FrontierTargetStatus, now: str) -> ReconcileInput:
    # Any outcome will do: the refusal is layered on whatever the step decided.
    outcome = InvalidSpec(())
    return ReconcileInput(spec=None, outcome=outcome, observed=(), current=current, generation=3, now=now)


def test_a_refused_apply_is_degraded_once_and_stays_put_on_the_next_recheck() -> None:
    first_inputs = _inputs(FrontierTargetStatus(), "2026-01-01T00:00:00Z")
    first = refused_by_api(first_inputs, reconcile(first_inputs), "Deployment x: PATCH …: 422 invalid")
    degraded = find_condition(first.status.conditions, ConditionType.DEGRADED)
    progressing = find_condition(first.status.conditions, ConditionType.PROGRESSING)
    assert degraded is not None and degraded.status.value == "True" and degraded.reason == "ApplyRefused"
    assert progressing is not None and progressing.status.value == "False"
    assert [e.reason for e in first.events if e.type == "Warning"].count("ApplyRefused") == 1

    later_inputs = _inputs(first.status, "2026-01-01T00:05:00Z")
    later = refused_by_api(later_inputs, reconcile(later_inputs), "Deployment x: PATCH …: 422 invalid")
    assert later.status.conditions == first.status.conditions  # same transition times: no status write
    assert "ApplyRefused" not in [e.reason for e in later.events]


@given(st.floats(min_value=0, max_value=1e300, allow_nan=False, allow_infinity=False))
def test_a_number_written_as_a_rate_reads_back_as_the_same_rate(value: float) -> None:
    rate = Rate.parse(value)
    assert Rate.parse(rate.text) == rate and "e" not in rate.text.lower()
    if value > 0:
        price = Price.parse(value)
        assert math.isclose(Price.parse(price.text), price)


def test_a_tiny_float_rate_no_longer_crashes_the_operator() -> None:
    # 0.00001 req/s was written back as "1e-05", which the spec's own pattern refuses on re-reading.
    outcome, _ = operator_outcome(put("spec.workload.requestRate", 0.00001))
    assert isinstance(outcome, Planned | Infeasible)
