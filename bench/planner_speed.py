"""Planner speed: wall and CPU time of a full `plan` for every example, and how much work it did.

Each example is planned `REPEATS` times from a cold start (a fresh performance model and prediction
cache, as the operator has after a restart), on one core (the planner is single-threaded). The goal
is ≤ 0.5 s per plan; AIConfigurator needs about 30 s (anchors.md §0, arXiv 2601.06288).

Writes `bench/results/planner_speed.json` and prints one summary line.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from frontier_operator.api import load_target_file
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.planner.from_spec import plan_request_from_spec
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.search import PredictionCache
from frontier_operator.planner.types import Plan

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "planner_speed.json"
REPEATS = 3
GOAL_SECONDS = 0.5


def bench_example(path: Path) -> dict[str, Any]:
    request = plan_request_from_spec(load_target_file(path).spec)
    walls, cpus = [], []
    result = None
    predictions = 0
    for _ in range(REPEATS):
        cache = PredictionCache(PerformanceModel.default())
        wall, cpu = time.perf_counter(), time.process_time()
        result = make_plan(request, cache)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        predictions = cache.calls
    assert result is not None
    stats = result.stats
    cpu = statistics.median(cpus)
    return {
        "example": path.name,
        "feasible": isinstance(result, Plan),
        "wall_s": round(statistics.median(walls), 4),
        "cpu_s": round(cpu, 4),
        "shapes_considered": stats.shapes_considered,
        "candidates_evaluated": stats.candidates_evaluated,
        "pruned": stats.pruned,
        "predictions": predictions,
        "shapes_per_cpu_s": round(stats.shapes_considered / cpu, 1) if cpu > 0 else None,
        "predictions_per_cpu_s": round(predictions / cpu, 1) if cpu > 0 else None,
    }


def main() -> int:
    examples = sorted((ROOT / "examples").glob("*.yaml"))
    rows = [bench_example(path) for path in examples]
    worst = max(rows, key=lambda row: row["cpu_s"])
    summary = {
        "goal_s": GOAL_SECONDS,
        "repeats": REPEATS,
        "examples": rows,
        "max_cpu_s": worst["cpu_s"],
        "median_cpu_s": statistics.median(row["cpu_s"] for row in rows),
        "max_wall_s": max(row["wall_s"] for row in rows),
        "all_within_goal": all(row["cpu_s"] <= GOAL_SECONDS for row in rows),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(
        f"planner_speed: {len(rows)} examples, median {summary['median_cpu_s']:.3f} s, "
        f"max {worst['cpu_s']:.3f} s CPU per plan ({worst['example']}; goal ≤ {GOAL_SECONDS} s), "
        f"{sum(r['predictions'] for r in rows) / sum(r['cpu_s'] for r in rows):.0f} predictions/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
