"""PodMonitors (`monitoring.coreos.com/v1`) so a Prometheus Operator scrapes the engines and the router.

Engines serve `/metrics` on the API port with `--enable-metrics` (sglang-0.5.23.md §7.1); only the
replica's leader records scheduler metrics, so only leaders are scraped. The router serves its own
metrics on `--prometheus-port` (§6.2). The target, role, revision and variant labels are copied onto
every series, which is what the tuning loop's PromQL groups by.
"""

from __future__ import annotations

from typing import Any

from frontier_operator.render.layout import FleetLayout
from frontier_operator.render.pods import (
    COMPONENT_ENGINE,
    COMPONENT_ROUTER,
    LABEL_LEADER,
    LABEL_REVISION,
    LABEL_ROLE,
    LABEL_TARGET,
    LABEL_VARIANT,
    TRUE,
    revision_labels,
)
from frontier_operator.render.workloads import metadata

SCRAPE_INTERVAL = "15s"
# Pod label → the Prometheus label every scraped series carries. The tuning loop's PromQL
# (adapters/prometheus.py), the alert rules and the dashboard group by these names.
PROMETHEUS_LABELS = {
    LABEL_TARGET: "frontier_target",
    LABEL_ROLE: "frontier_role",
    LABEL_VARIANT: "frontier_variant",
    LABEL_REVISION: "frontier_revision",
}


def _meta_label(pod_label: str) -> str:
    # Prometheus' Kubernetes discovery turns every non-alphanumeric character of a label name into "_".
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in pod_label)


def relabelings() -> list[dict[str, Any]]:
    """`podMetricsEndpoints[].relabelings` writing each pod label under its `PROMETHEUS_LABELS` name."""
    return [
        {"action": "replace", "sourceLabels": [_meta_label(pod_label)], "targetLabel": target}
        for pod_label, target in PROMETHEUS_LABELS.items()
    ]


def _pod_monitor(
    layout: FleetLayout,
    *,
    name: str,
    labels: dict[str, str],
    selector: dict[str, str],
    port: str,
    owner: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": metadata(layout, name, labels, owner),
        "spec": {
            "selector": {"matchLabels": selector},
            "namespaceSelector": {"matchNames": [layout.namespace]},
            "podMetricsEndpoints": [
                {"port": port, "path": "/metrics", "interval": SCRAPE_INTERVAL, "relabelings": relabelings()}
            ],
        },
    }


def _without_role(labels: dict[str, str]) -> dict[str, str]:
    # One monitor covers every engine role of the revision.
    return {key: value for key, value in labels.items() if key != LABEL_ROLE}


def pod_monitors(layout: FleetLayout, owner: dict[str, Any] | None) -> list[dict[str, Any]]:
    base = {LABEL_TARGET: layout.target_label, LABEL_REVISION: layout.revision}
    monitors = [
        _pod_monitor(
            layout,
            name=layout.name("engines"),
            labels=_without_role(revision_labels(layout, COMPONENT_ENGINE, "")),
            selector={**base, "app.kubernetes.io/component": COMPONENT_ENGINE, LABEL_LEADER: TRUE},
            port="http",
            owner=owner,
        )
    ]
    if layout.has_router:
        monitors.append(
            _pod_monitor(
                layout,
                name=layout.name(COMPONENT_ROUTER),
                labels=revision_labels(layout, COMPONENT_ROUTER, COMPONENT_ROUTER),
                selector={**base, "app.kubernetes.io/component": COMPONENT_ROUTER},
                port="metrics",
                owner=owner,
            )
        )
    return monitors
