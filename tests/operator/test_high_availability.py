"""Two operator processes with Kopf peering: one handles, the other takes over when it goes."""

from __future__ import annotations

from typing import Any

import kubernetes

from k8s_standin.fixtures import get_object, wait_for, wait_for_object
from operator_support import FT, create, has_condition, target_document

QUIET = {"FRONTIER_METRICS_PORT": "0", "FRONTIER_RECHECK_SECONDS": "2"}


def test_only_the_active_replica_reconciles_and_the_standby_takes_over(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, kopf_process: Any
) -> None:
    custom = kubernetes.client.CustomObjectsApi(kube_api)
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "frontier-operator"}}
    custom.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", peering)

    def peers() -> dict[str, Any]:
        body = get_object(kube_api, "kopf.dev/v1", "kopfpeerings", namespace, "frontier-operator") or {}
        return dict(body.get("status") or {})

    args = ("run", "-n", namespace, "--peering=frontier-operator", "--verbose", "-m", "frontier_operator.main")
    active = kopf_process(*args, "--priority=100", env=QUIET)
    wait_for(lambda: len(peers()) == 1, timeout=30, what="the first replica to announce itself")
    standby = kopf_process(*args, "--priority=10", env=QUIET)
    wait_for(lambda: len(peers()) == 2, timeout=30, what="the second replica to announce itself")
    standby.wait_for_log(r"Pausing operations in favour of", timeout=30)

    create(kube_api, target_document("llama-70b-chat", namespace))
    wait_for_object(kube_api, *FT, namespace, "llama-70b-chat", has_condition("PlanFeasible", "True"), timeout=60)
    assert "reconcile_on_change" not in standby.log()

    assert active.stop() == 0
    standby.wait_for_log(r"Resuming operations after the pause", timeout=30)

    def renamed(document: dict[str, Any]) -> None:
        document["metadata"]["name"] = "after-handover"

    create(kube_api, target_document("llama-70b-chat", namespace, renamed))
    wait_for_object(kube_api, *FT, namespace, "after-handover", has_condition("PlanFeasible", "True"), timeout=60)
    standby.wait_for_log(r"Handler 'reconcile_on_change' succeeded", timeout=30)
