"""A toy Kopf operator the stand-in's tests run: Toy → child ConfigMap + status + Event.

Create or a spec change: make or update the child ConfigMap `<name>-child` (owned by the Toy),
write `status.message`, `status.handledBy` (`$TOY_OPERATOR_ID`) and `status.observedGeneration`,
and post a `Reconciled` Event. Delete: a `Deleted` Event (the delete handler makes Kopf put a
finalizer on every Toy, so deletion goes through `deletionTimestamp`).
"""

import logging
import os
from typing import Any

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "standin.example.dev", "v1", "toys"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.level = logging.INFO
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.networking.error_backoffs = [0.1, 0.2, 0.4]  # Kopf's own retries of 429/5xx
    settings.peering.lifetime = 30


def core_api() -> kubernetes.client.CoreV1Api:
    kubernetes.config.load_kube_config()
    return kubernetes.client.CoreV1Api()


@kopf.on.create(GROUP, VERSION, PLURAL, backoff=0.2)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec", backoff=0.2)
def reconcile(
    *, spec: kopf.Spec, name: str, namespace: str, body: kopf.Body, meta: kopf.Meta, patch: kopf.Patch, **_: Any
) -> None:
    child: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-child", "labels": {f"{GROUP}/toy": name}},
        "data": {"message": spec["message"], "replicas": str(spec.get("replicas"))},
    }
    kopf.adopt(child, owner=body)
    api = core_api()
    try:
        api.create_namespaced_config_map(namespace, child)
    except kubernetes.client.ApiException as error:
        if error.status != 409:
            raise
        api.patch_namespaced_config_map(f"{name}-child", namespace, {"data": child["data"]})
    patch.status["message"] = spec["message"]
    patch.status["handledBy"] = os.environ.get("TOY_OPERATOR_ID", "runner")
    patch.status["observedGeneration"] = meta.get("generation")
    kopf.info(body, reason="Reconciled", message=f"child {name}-child says {spec['message']!r}")


@kopf.on.delete(GROUP, VERSION, PLURAL, backoff=0.2)
def deleted(body: kopf.Body, **_: Any) -> None:
    kopf.info(body, reason="Deleted", message="the toy is going away")
