"""The operator's own Prometheus metrics (served on FRONTIER_METRICS_PORT, 8080 by default)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RECONCILES = Counter("frontier_reconciles_total", "Reconcile steps, by trigger and result.", ["trigger", "result"])
API_ERRORS = Counter("frontier_kubernetes_errors_total", "Failed Kubernetes API calls, by HTTP status.", ["status"])
PLAN_SECONDS = Histogram(
    "frontier_plan_duration_seconds",
    "Wall time of one planner run (cache misses only).",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
DECISIONS = Counter(
    "frontier_decisions_total", "Decisions taken, by kind (plan, apply, prune, tuning actions).", ["decision"]
)
TARGETS = Gauge("frontier_targets", "FrontierTargets by condition and status.", ["condition", "status"])
