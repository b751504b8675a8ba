"""Pareto frontiers keep exactly the non-dominated points."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from frontier_operator.planner.frontier import best_at_speed, cost_frontier, frontier, throughput_frontier
from frontier_operator.planner.types import FrontierPoint, Technique


def point(user: float, per_gpu: float, cost: float, name: str = "") -> FrontierPoint:
    return FrontierPoint(name or f"{user}/{per_gpu}/{cost}", "pool", frozenset(), user, per_gpu, cost, 8, True)


def test_dominated_points_are_excluded() -> None:
    fast_dear = point(100, 200, 4.0)
    slow_cheap = point(20, 2000, 0.4)
    middle = point(50, 900, 1.0)
    dominated = point(40, 800, 1.2)  # slower, fewer tokens/GPU and dearer than `middle`
    points = [fast_dear, slow_cheap, middle, dominated]
    assert set(cost_frontier(points)) == {fast_dear, slow_cheap, middle}
    assert set(throughput_frontier(points)) == {fast_dear, slow_cheap, middle}
    assert dominated not in frontier(points)


def test_the_two_frontiers_can_differ() -> None:
    # Same per-user speed: one is cheaper per token (cheaper GPUs), the other does more per GPU.
    cheap_gpus = point(50, 800, 0.8, "cheap GPUs")
    fast_gpus = point(50, 1000, 1.1, "fast GPUs")
    assert cost_frontier([cheap_gpus, fast_gpus]) == (cheap_gpus,)
    assert throughput_frontier([cheap_gpus, fast_gpus]) == (fast_gpus,)
    assert set(frontier([cheap_gpus, fast_gpus])) == {cheap_gpus, fast_gpus}


def test_frontier_is_ordered_fastest_per_user_first() -> None:
    points = [point(20, 2000, 0.4), point(100, 200, 4.0), point(50, 900, 1.0)]
    assert [p.tokens_per_s_per_user for p in frontier(points)] == [100, 50, 20]


def test_duplicates_are_kept_once() -> None:
    twin_a, twin_b = point(50, 900, 1.0, "a"), point(50, 900, 1.0, "b")
    assert len(cost_frontier([twin_a, twin_b])) == 1


def test_best_at_speed() -> None:
    points = [point(20, 2000, 0.4), point(60, 900, 1.0), point(100, 200, 4.0)]
    best = best_at_speed(points, 50)
    assert best is not None and best.tokens_per_s_per_gpu == 900
    assert best_at_speed(points, 150) is None


def _dominates(a: FrontierPoint, b: FrontierPoint) -> bool:
    at_least = a.tokens_per_s_per_user >= b.tokens_per_s_per_user and a.cost_per_mtok <= b.cost_per_mtok
    strictly = a.tokens_per_s_per_user > b.tokens_per_s_per_user or a.cost_per_mtok < b.cost_per_mtok
    return at_least and strictly


values = st.floats(min_value=1, max_value=1000, allow_nan=False)


@given(st.lists(st.tuples(values, values), min_size=1, max_size=30))
def test_cost_frontier_is_exactly_the_non_dominated_set(pairs: list[tuple[float, float]]) -> None:
    points = [point(user, 1.0, cost, str(i)) for i, (user, cost) in enumerate(pairs)]
    front = cost_frontier(points)
    for kept in front:
        assert not any(_dominates(other, kept) for other in points)
    for dropped in (p for p in points if p not in front):
        duplicate = any(
            p.tokens_per_s_per_user == dropped.tokens_per_s_per_user and p.cost_per_mtok == dropped.cost_per_mtok
            for p in front
        )
        assert duplicate or any(_dominates(other, dropped) for other in points)


def test_techniques_are_carried_through() -> None:
    quantized = FrontierPoint("q", "pool", frozenset({Technique.QUANTIZATION}), 50, 900, 1.0, 8, True)
    assert frontier([quantized])[0].techniques == {Technique.QUANTIZATION}
