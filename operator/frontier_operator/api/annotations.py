"""Annotations an SRE (or `frontier pause|resume|approve|rollback|pin`) sets on a FrontierTarget.

Annotations, not spec fields: they are operational overrides that a GitOps pipeline owning the
spec must not fight over, and `kubectl annotate` works in a runbook at 3 a.m.
"""

from __future__ import annotations

from datetime import datetime

from frontier_operator.api.units import rfc3339

PREFIX = "frontier.dev/"
# Any value: no tuning action at all (observation and status go on). Same as spec.tuning.paused.
PAUSED = f"{PREFIX}paused"
# Why it was paused, shown by `frontier status`.
PAUSED_REASON = f"{PREFIX}paused-reason"
# The `proposedAt` of the recommendation being approved: applies exactly that recommendation.
APPROVE = f"{PREFIX}approve"
# A request token (`request_token`): roll the canary back, or return to the previous revision when there is none.
ROLLBACK = f"{PREFIX}rollback"
# A revision: keep this engine configuration (replicas may still scale); empty value or absent: unpinned.
PIN = f"{PREFIX}pin"
# A request token (`frontier sweep start`): run a benchmark sweep now (in recommend and observe mode: approve the
# proposed one). Obeyed once per value; the operator remembers the last value it acted on.
SWEEP_START = f"{PREFIX}sweep-start"

ALL = (PAUSED, PAUSED_REASON, APPROVE, ROLLBACK, PIN, SWEEP_START)


def request_token(moment: datetime) -> str:
    """The value that asks for a rollback or a sweep at `moment`: RFC 3339 to the microsecond, in UTC.

    The operator obeys each value once and remembers the last one; whole seconds made a request sent within
    the second after the previous one (a sweep re-requested as soon as the last one ended) look already obeyed.
    """
    return rfc3339(moment, microseconds=True)
