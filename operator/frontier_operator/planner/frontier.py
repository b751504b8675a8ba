"""Pareto frontiers over operating points: per-user speed against $/Mtok and against tokens/s per GPU.

A point is on a frontier when no other point is at least as fast per user and at least as good on the
other axis, and strictly better on one of them. Both frontiers are computed with one sort and a sweep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from frontier_operator.planner.types import FrontierPoint

_Better = Callable[[FrontierPoint], float]


def _by_cost(point: FrontierPoint) -> float:
    return -point.cost_per_mtok


def _by_throughput(point: FrontierPoint) -> float:
    return point.tokens_per_s_per_gpu


def pareto(points: Iterable[FrontierPoint], better: _Better) -> tuple[FrontierPoint, ...]:
    """Points not dominated in (tokens/s per user, `better`), both larger-is-better; fastest per user first."""
    ordered = sorted(points, key=lambda p: (-p.tokens_per_s_per_user, -better(p)))
    front: list[FrontierPoint] = []
    best = float("-inf")
    for point in ordered:
        # Everything kept so far is at least as fast per user, so the point survives only if it beats them
        # on the other axis; equal values are duplicates of a kept point.
        if better(point) > best:
            front.append(point)
            best = better(point)
    return tuple(front)


def cost_frontier(points: Iterable[FrontierPoint]) -> tuple[FrontierPoint, ...]:
    return pareto(points, _by_cost)


def throughput_frontier(points: Iterable[FrontierPoint]) -> tuple[FrontierPoint, ...]:
    return pareto(points, _by_throughput)


def frontier(points: Sequence[FrontierPoint]) -> tuple[FrontierPoint, ...]:
    """Points on either frontier, fastest per user first."""
    on_either = {id(p): p for p in (*cost_frontier(points), *throughput_frontier(points))}
    return tuple(sorted(on_either.values(), key=lambda p: -p.tokens_per_s_per_user))


def best_at_speed(points: Iterable[FrontierPoint], min_tokens_per_s_per_user: float) -> FrontierPoint | None:
    """The point with the most tokens/s per GPU among those at least this fast per user."""
    eligible = [p for p in points if p.tokens_per_s_per_user >= min_tokens_per_s_per_user]
    return max(eligible, key=lambda p: p.tokens_per_s_per_gpu, default=None)
