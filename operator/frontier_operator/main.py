"""Operator entry point: `kopf run -m frontier_operator.main` (or `frontier operator run`).

Handlers are a few lines each: they call the controller and map its errors to Kopf's. Importing
this module registers them, so tests re-import it to run a fresh operator.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import kopf
from prometheus_client import start_http_server

from frontier_operator import metrics
from frontier_operator.adapters import kube
from frontier_operator.api.v1alpha1 import GROUP, PLURAL, VERSION
from frontier_operator.controller import Controller, Step
from frontier_operator.settings import OperatorSettings

PREFIX = "frontier.dev"
SETTINGS = OperatorSettings.from_env()

_controller: Controller | None = None


def controller() -> Controller:
    """One controller (and API client) per process, created on first use, after Kopf has logged in."""
    global _controller  # noqa: PLW0603 - the process-wide client is created lazily on purpose
    if _controller is None:
        _controller = Controller(kube.api_client())
    return _controller


def _reconcile(body: kopf.Body, patch: kopf.Patch | None, trigger: str, *, force_apply: bool) -> None:
    """Reconcile, then write the step: through Kopf's `patch`, or (None) through our own client."""
    try:
        step = controller().reconcile(body, force_apply=force_apply)
        for event in step.events:
            kopf.event(body, type=event.type, reason=event.reason, message=event.message)
        if patch is None:
            # After the Events, as Kopf applies its patch after them: a failed write is retried, and the retry
            # may repeat an Event (the record it decided from was not written) but never lose one.
            _write(body, step)
    except kube.KubeError as error:
        metrics.API_ERRORS.labels(str(error.status)).inc()
        metrics.RECONCILES.labels(trigger, "retry" if error.retriable else "error").inc()
        if error.retriable:
            raise kopf.TemporaryError(str(error), delay=SETTINGS.retry_seconds) from None
        raise kopf.PermanentError(str(error)) from None
    if patch is not None:
        if step.status_patch:
            patch.status.update(step.status_patch)
        for key, value in step.annotations.items():
            patch.metadata.annotations[key] = value
    metrics.RECONCILES.labels(trigger, "ok").inc()


def _write(body: kopf.Body, step: Step) -> None:
    """The step's annotations (the record of what was done), then its status, each a merge patch."""
    namespace, name = body.metadata.namespace or "", body.metadata.name or ""
    if step.annotations:
        kube.annotate_target(controller().api, namespace, name, dict(step.annotations))
    if step.status_patch:
        kube.patch_target_status(controller().api, namespace, name, step.status_patch)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile_on_change(body: kopf.Body, patch: kopf.Patch, reason: str, **_: Any) -> None:
    _reconcile(body, patch, str(reason), force_apply=True)


def _change_pending(body: kopf.Body) -> bool:
    """Whether Kopf has a spec change it has not finished handling (its diff-base is not the current spec)."""
    handled = (body.get("metadata", {}).get("annotations") or {}).get(f"{PREFIX}/last-handled-configuration")
    if handled is None:
        return True
    try:
        last = json.loads(handled)
    except ValueError:
        return True
    return not isinstance(last, dict) or last.get("spec") != body.get("spec")


# uid → the resourceVersion at which a re-check found the status behind with no change pending.
_behind_at: dict[str, str] = {}


# The re-check writes through our own client, not Kopf's patch: Kopf applies a timer's patch outside its error
# handling, so one refused write (a 409, a 422, retries on 5xx run out) would end the timer for good and the
# target would not be re-checked until the operator restarts. Our write's failure is a retried TemporaryError.
@kopf.timer(GROUP, VERSION, PLURAL, interval=SETTINGS.recheck_seconds, idle=SETTINGS.recheck_seconds / 3)
def reconcile_periodically(body: kopf.Body, **_: Any) -> None:
    metadata = body.get("metadata", {})
    uid, version = str(metadata.get("uid")), str(metadata.get("resourceVersion"))
    behind = body.get("status", {}).get("observedGeneration") != metadata.get("generation")
    if not behind:
        _behind_at.pop(uid, None)
    # A spec change not yet handled belongs to the change handler; racing it would act twice.
    elif _change_pending(body):
        return
    # Behind with nothing pending: Kopf recorded the change as handled, but its status write has not
    # landed. Normally it is a moment away (Kopf writes its bookkeeping, then the status); if the object
    # is still unchanged one re-check later, the status write failed (a 409, 5xx or timeout on the
    # status patch) and nothing would ever redo it: this tick does, re-applying as the change handler would.
    elif _behind_at.get(uid) != version:
        _behind_at[uid] = version
        return
    _reconcile(body, None, "timer", force_apply=behind)


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)
def forget_deleted(namespace: str | None, name: str, uid: str | None, **_: Any) -> None:
    # Owner references let the garbage collector remove the children; only our gauges need telling.
    controller().forget(namespace or "", name)
    _behind_at.pop(str(uid), None)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, logger: logging.Logger | logging.LoggerAdapter[Any], **_: Any) -> None:
    # Kopf's bookkeeping goes into annotations under our prefix: the CRD's structural schema would
    # prune anything Kopf wrote into an undeclared `status.kopf`.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    settings.posting.level = logging.INFO
    # Kopf's own short requests (status, Events, peering) time out like ours and are retried; its
    # default, five minutes, would hold an object's processing that long on one hung request.
    settings.networking.request_timeout = SETTINGS.api_timeout_seconds
    # Two replicas elect one active operator through Kopf peering (ClusterKopfPeering "frontier-operator").
    settings.peering.name = "frontier-operator"
    settings.peering.mandatory = False
    if SETTINGS.metrics_port:
        try:
            start_http_server(SETTINGS.metrics_port)
        except OSError as error:  # the port is taken: keep reconciling, say so loudly
            logger.warning("operator metrics not served on :%d: %s", SETTINGS.metrics_port, error)
        else:
            logger.info("operator metrics on :%d/metrics", SETTINGS.metrics_port)
