"""The operator's own Prometheus metrics (served on FRONTIER_METRICS_PORT, 8080 by default).

Per-target series use `target_namespace` and `frontier_target`: a ServiceMonitor scraping the
operator adds its own `namespace` label, which would otherwise clash.
"""

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
TARGET_CONDITION = Gauge(
    "frontier_target_condition",
    "1 for the current status of each condition of each target (kube-state-metrics style).",
    ["target_namespace", "frontier_target", "condition", "status"],
)
SLO_BOUND = Gauge(
    "frontier_slo_bound_seconds",
    "Each SLO bound of each target, so alerts can compare observed percentiles with it.",
    ["target_namespace", "frontier_target", "metric", "percentile"],
)
COST_PER_MTOK = Gauge(
    "frontier_cost_per_mtok_dollars",
    "Predicted $ per million tokens of the planned configuration.",
    ["target_namespace", "frontier_target"],
)
GPUS = Gauge("frontier_gpus", "GPUs of the planned configuration.", ["target_namespace", "frontier_target"])
CANARY_STARTED = Gauge(
    "frontier_canary_started_timestamp_seconds",
    "Start of the running canary of a target (absent when none runs).",
    ["target_namespace", "frontier_target"],
)
FRONTIER_POINT = Gauge(
    "frontier_frontier_point",
    "The target's predicted frontier, one series per point and axis (cost_per_mtok, tokens_per_s_per_user);"
    " `chosen` marks the planned configuration.",
    ["target_namespace", "frontier_target", "point", "axis", "meets_slo", "chosen"],
)
LAST_CHANGE = Gauge(
    "frontier_last_change_timestamp_seconds",
    "Time of the target's latest configuration change (its status history); dashboards annotate changes of it.",
    ["target_namespace", "frontier_target"],
)
