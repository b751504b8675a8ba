"""Injected faults against the real operator process (`python -m kopf run`), through the API stand-in.

Each test arms faults on the requests the operator makes — its server-side applies, status patches,
lists — or breaks its watches, or kills it mid-rollout, and then checks that the operator ends where
it would have without the fault: every object applied, every status written, history kept, no
duplicate revision, nothing orphaned, and the old revision pruned only once the new one is ready.
The time each took to recover is printed (`pytest -s`) for docs/reliability.md.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

import kubernetes

from hardening_support import ready_when_marked
from k8s_standin import RequestMatch
from k8s_standin.fixtures import get_object, mark_deployment_ready, request_json, wait_for, wait_for_object
from operator_support import (
    FT,
    condition,
    create,
    engine_deployments,
    events_for,
    has_condition,
    target_document,
)

OPERATOR_ENV = {
    "FRONTIER_RECHECK_SECONDS": "1",
    "FRONTIER_METRICS_PORT": "0",
    "FRONTIER_RETRY_SECONDS": "1",
    "FRONTIER_API_TIMEOUT_SECONDS": "2",
}
REVISION = "frontier.dev/revision"
OWNED_PLURALS = {
    "deployments": "apps/v1",
    "services": "v1",
    "serviceaccounts": "v1",
    "poddisruptionbudgets": "policy/v1",
    "podmonitors": "monitoring.coreos.com/v1",
}


def start(kopf_process: Callable[..., Any], namespace: str) -> Any:
    operator = kopf_process(
        "run", "--standalone", "-n", namespace, "--verbose", "-m", "frontier_operator.main", env=OPERATOR_ENV
    )
    operator.wait_for_log(r"Starting the main handler|Initial authentication has finished", timeout=30)
    return operator


def named(name: str, namespace: str) -> dict[str, Any]:
    def rename(document: dict[str, Any]) -> None:
        document["metadata"]["name"] = name

    return target_document("llama-70b-chat", namespace, rename)


def children(api: kubernetes.client.ApiClient, namespace: str, target: str) -> dict[str, list[tuple[str, str]]]:
    """Every object the target owns, by kind: (name, revision)."""
    found = {}
    for plural, group in OWNED_PLURALS.items():
        prefix = f"/apis/{group}" if "/" in group else f"/api/{group}"
        status, body = request_json(
            api,
            "GET",
            f"{prefix}/namespaces/{namespace}/{plural}",
            query=[("labelSelector", f"frontier.dev/target={target}")],
        )
        if status == 404:
            continue  # a kind whose CRD the stand-in does not carry (PodMonitor): the operator says MissingCRD
        assert status == 200, body
        found[plural] = sorted(
            (i["metadata"]["name"], i["metadata"]["labels"].get(REVISION, "")) for i in body["items"]
        )
    return found


def figure(what: str, seconds: float, **details: Any) -> None:
    extra = " ".join(f"{key}={value}" for key, value in details.items())
    print(f"\nFIGURE {what}: {seconds:.2f} s {extra}")


def test_api_errors_and_timeouts_on_the_operators_requests_are_retried_and_nothing_is_lost(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, standin: Any, kopf_process: Any
) -> None:
    ns = namespace

    def applies(plural: str, target: str) -> RequestMatch:
        # Server-side apply is a PATCH on the object's path; every object's name starts with its target's.
        return RequestMatch(verb="patch", resource=plural, namespace=ns, path=f"/{plural}/{target}($|-)")

    def status_of(target: str) -> RequestMatch:
        return RequestMatch(verb="patch", resource="frontiertargets", subresource="status", name=target)

    def lists_of(target: str) -> Callable[[Any], bool]:
        return lambda r: r.verb == "list" and r.resource == "deployments" and f"%3D{target}" in r.query

    # target: (the requests hit, answered status (None: no answer before the client's timeout), how often)
    faults: dict[str, tuple[Callable[[Any], bool], int | None, int]] = {
        "apply-409": (applies("deployments", "apply-409"), 409, 2),
        "apply-429": (applies("services", "apply-429"), 429, 3),
        "apply-500": (applies("deployments", "apply-500"), 500, 3),
        "apply-timeout": (applies("deployments", "apply-timeout"), None, 1),
        "status-409": (status_of("status-409"), 409, 1),
        "status-500": (status_of("status-500"), 500, 3),
        "status-timeout": (status_of("status-timeout"), None, 1),
        "list-503": (lists_of("list-503"), 503, 3),
    }
    rules = {
        target: standin.faults.add(
            match,
            status=status,
            times=times,
            hang=4.0 if status is None else None,  # past the operator's 2 s client timeout
            retry_after=1 if status == 429 else None,
        )
        for target, (match, status, times) in faults.items()
    }

    start(kopf_process, ns)
    created = {}
    for target in [*faults, "control"]:
        created[target] = time.monotonic()
        create(kube_api, named(target, ns))

    # Every target is driven to Ready at once; each one's time from create to Ready is its recovery time.
    settled: dict[str, float] = {}

    def all_ready() -> bool:
        for target in [*faults, "control"]:
            if target not in settled and ready_when_marked(kube_api, ns, target):
                settled[target] = time.monotonic() - created[target]
        return len(settled) == len(faults) + 1

    wait_for(all_ready, timeout=60, interval=0.2, what="every target Ready")

    expected = children(kube_api, ns, "control")
    for target in [*faults, "control"]:
        if target != "control":
            assert rules[target].fired == faults[target][2], f"{target}: the fault fired {rules[target].fired}x"
        obj = get_object(kube_api, *FT, ns, target)
        assert obj is not None and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
        assert has_condition("PlanFeasible", "True")(obj) and has_condition("Progressing", "False", "RolledOut")(obj)
        assert len(obj["status"]["history"]) == 1, obj["status"]["history"]
        mine = children(kube_api, ns, target)
        # Nothing lost: the same objects as the target no fault touched (names differ only by the prefix).
        assert {k: len(v) for k, v in mine.items()} == {k: len(v) for k, v in expected.items()}, target
        reasons = [e["reason"] for e in events_for(kube_api, ns, target)]
        assert reasons.count("RolledOut") == 1, reasons
        figure(f"fault {target}", settled[target], control=f"{settled['control']:.2f}")


def test_watch_disconnects_and_expired_watches_resume(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, standin: Any, kopf_process: Any
) -> None:
    start(kopf_process, namespace)
    create(kube_api, named("before", namespace))
    wait_for_object(kube_api, *FT, namespace, "before", has_condition("PlanFeasible", "True"), timeout=30)

    breaks = {
        "after-clean-close": lambda: standin.disconnect_watches("frontiertargets"),
        "after-dropped-tcp": lambda: standin.disconnect_watches("frontiertargets", abort=True),
        "after-410-gone": standin.compact,
    }
    for target, broken in breaks.items():
        watches = standin.requests.count(verb="watch", resource="frontiertargets")
        lists = standin.requests.count(verb="list", resource="frontiertargets")
        broken()
        started = time.monotonic()
        # The operator notices the broken stream and opens a new watch (from its last version, or after
        # 410 Gone from a fresh list); only then is the next target created, so it arrives on the new one.
        wait_for(
            lambda w=watches: standin.requests.count(verb="watch", resource="frontiertargets") > w,
            timeout=30,
            what="a new watch request",
        )
        rewatched = time.monotonic() - started
        if target == "after-410-gone":  # a version too old: Kopf lists afresh before watching again
            wait_for(lambda n=lists: standin.requests.count(verb="list", resource="frontiertargets") > n, timeout=30)
        create(kube_api, named(target, namespace))
        wait_for_object(kube_api, *FT, namespace, target, has_condition("PlanFeasible", "True"), timeout=60)
        figure(f"watch {target}", time.monotonic() - started, rewatched=f"{rewatched:.2f}")

    # A spec change after all that is still seen: the watch is live, not merely re-listed once.
    custom = kubernetes.client.CustomObjectsApi(kube_api)
    custom.patch_namespaced_custom_object(
        "frontier.dev",
        "v1alpha1",
        namespace,
        "frontiertargets",
        "before",
        {"spec": {"workload": {"requestRate": "6/s"}}},
    )
    changed = wait_for_object(
        kube_api, *FT, namespace, "before", lambda o: o["status"]["observedGeneration"] == 2, timeout=30
    )
    assert changed["metadata"]["generation"] == 2  # a spec change bumps it (the stand-in once forgot to)
    assert standin.requests.count(verb="watch", resource="frontiertargets") >= 4


def test_the_operator_killed_mid_rollout_resumes_without_duplicates_orphans_or_lost_history(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, standin: Any, kopf_process: Any
) -> None:
    custom = kubernetes.client.CustomObjectsApi(kube_api)
    first_operator = start(kopf_process, namespace)
    create(kube_api, named("rollout", namespace))
    wait_for(lambda: ready_when_marked(kube_api, namespace, "rollout"), timeout=60, what="first revision Ready")
    ready = get_object(kube_api, *FT, namespace, "rollout")
    assert ready is not None
    old_revision = ready["status"]["appliedRevision"]
    history = ready["status"]["history"]

    chosen_format = ready["status"]["plan"]["config"]["roles"][0]["weightFormat"]
    other = "bf16" if chosen_format != "bf16" else "fp8"
    custom.patch_namespaced_custom_object(
        "frontier.dev",
        "v1alpha1",
        namespace,
        "frontiertargets",
        "rollout",
        {"spec": {"search": {"quantizations": [other]}}},
    )
    both = wait_for(
        lambda: len(engine_deployments(kube_api, namespace, "rollout")) == 2,
        timeout=30,
        what="the new revision applied",
    )
    assert both
    first_operator.process.send_signal(signal.SIGKILL)  # no graceful stop: nothing gets to clean up
    first_operator.process.wait(timeout=10)
    # Killed while applying the new revision's objects (a Deployment is not the last of them): the
    # snapshot may hold only part of the new revision.
    before_restart = children(kube_api, namespace, "rollout")

    def kinds(revision: str) -> set[str]:
        return {
            plural
            for plural, items in children(kube_api, namespace, "rollout").items()
            for _, r in items
            if r == revision
        }

    killed_at = time.monotonic()
    start(kopf_process, namespace)
    # Resumed: the status reaches the new generation; the old revision still serves (the new is not ready).
    resumed = wait_for_object(
        kube_api,
        *FT,
        namespace,
        "rollout",
        lambda o: o["status"]["observedGeneration"] == 2 and has_condition("Progressing", "True", "RollingOut")(o),
        timeout=30,
    )
    new_revision = resumed["status"]["plan"]["revision"]
    wait_for(lambda: kinds(new_revision) == kinds(old_revision), timeout=30, what="the new revision completed")
    figure("operator SIGKILLed mid-rollout, restarted", time.monotonic() - killed_at)
    assert resumed["status"]["appliedRevision"] == old_revision, "the old revision stopped serving"
    assert resumed["status"]["history"][: len(history)] == history, "history lost"
    after_restart = children(kube_api, namespace, "rollout")
    for plural, items in after_restart.items():
        assert set(before_restart.get(plural, [])) <= set(items), f"{plural}: the restart dropped objects"
        assert len({name for name, _ in items}) == len(items)
        assert {revision for _, revision in items} <= {old_revision, new_revision, ""}, (
            f"{plural}: a third revision"
        )  # "": shared (the Service)
        # No duplicate: the new revision has as many objects of each kind as the old one.
        revisions = [revision for _, revision in items]
        assert revisions.count(new_revision) in (0, revisions.count(old_revision)), f"{plural}: {items}"

    for name, revision in children(kube_api, namespace, "rollout")["deployments"]:
        if revision == new_revision:
            mark_deployment_ready(kube_api, namespace, name)
    done = wait_for_object(
        kube_api, *FT, namespace, "rollout", lambda o: o["status"].get("appliedRevision") == new_revision, timeout=30
    )
    assert [entry["revision"] for entry in done["status"]["history"]] == [old_revision, new_revision]
    wait_for(
        lambda: (
            {r for items in children(kube_api, namespace, "rollout").values() for _, r in items} - {""}
            == {new_revision}
        ),
        timeout=30,
        what="the old revision pruned",
    )
    assert standin.collect_garbage() == [], "orphaned objects"


def test_workloads_that_never_become_ready_leave_the_old_revision_serving(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, standin: Any, kopf_process: Any
) -> None:
    custom = kubernetes.client.CustomObjectsApi(kube_api)
    start(kopf_process, namespace)
    create(kube_api, named("stuck", namespace))
    wait_for(lambda: ready_when_marked(kube_api, namespace, "stuck"), timeout=60, what="first revision Ready")
    ready = get_object(kube_api, *FT, namespace, "stuck")
    assert ready is not None
    old_revision = ready["status"]["appliedRevision"]
    chosen_format = ready["status"]["plan"]["config"]["roles"][0]["weightFormat"]
    custom.patch_namespaced_custom_object(
        "frontier.dev",
        "v1alpha1",
        namespace,
        "frontiertargets",
        "stuck",
        {"spec": {"search": {"quantizations": ["bf16" if chosen_format != "bf16" else "fp8"]}}},
    )
    (new,) = wait_for(
        lambda: [
            d
            for d in engine_deployments(kube_api, namespace, "stuck")
            if d["metadata"]["labels"][REVISION] != old_revision
        ],
        timeout=30,
    )
    # The pods never pass their readiness probe: the controller reports them, none ready.
    fail_readiness(kube_api, namespace, new["metadata"]["name"])
    before = standin.requests.count(verb="list", resource="deployments", namespace=namespace)
    wait_for(
        lambda: standin.requests.count(verb="list", resource="deployments", namespace=namespace) >= before + 3,
        timeout=30,
        what="several re-checks",
    )
    stuck = get_object(kube_api, *FT, namespace, "stuck")
    assert stuck is not None
    ready_condition, progressing = condition(stuck, "Ready"), condition(stuck, "Progressing")
    assert ready_condition["status"] == "False" and progressing["status"] == "True"
    assert f"waiting for {new['metadata']['name']}" in ready_condition["message"], ready_condition["message"]
    assert "0/1 replicas ready" in ready_condition["message"]
    assert stuck["status"]["appliedRevision"] == old_revision
    old_names = [name for name, rev in children(kube_api, namespace, "stuck")["deployments"] if rev == old_revision]
    assert old_names, "the serving revision was pruned while the new one is not ready"
    assert [e["reason"] for e in events_for(kube_api, namespace, "stuck")].count("PlanChosen") == 2


def fail_readiness(api: kubernetes.client.ApiClient, namespace: str, name: str) -> None:
    """What the Deployment controller reports when every pod fails its readiness probe."""
    deployment = get_object(api, "apps/v1", "deployments", namespace, name)
    assert deployment is not None
    replicas = deployment["spec"].get("replicas", 1)
    status = {
        "observedGeneration": deployment["metadata"]["generation"],
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": 0,
        "unavailableReplicas": replicas,
        "conditions": [
            {
                "type": "Available",
                "status": "False",
                "reason": "MinimumReplicasUnavailable",
                "message": "Deployment does not have minimum availability.",
            }
        ],
    }
    code, body = request_json(
        api,
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status",
        {"status": status},
        content_type="application/merge-patch+json",
    )
    assert code == 200, body


def test_objects_the_api_server_refuses_are_reported_and_retried_at_the_recheck_pace(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, standin: Any, kopf_process: Any
) -> None:
    # What a real API server answers for a rendered object its validation rejects (a nodeSelector key
    # that is no label key, a quota, an admission webhook) or a Role the operator may not grant: an error
    # that retrying at once cannot fix. The operator says so and re-tries at the re-check pace.
    refusal = standin.faults.add(
        RequestMatch(verb="patch", resource="deployments", namespace=namespace), status=422, times=None
    )
    start(kopf_process, namespace)
    create(kube_api, named("refused", namespace))
    refused = wait_for_object(
        kube_api, *FT, namespace, "refused", has_condition("Degraded", "True", "ApplyRefused"), timeout=30
    )
    assert (
        "422" in condition(refused, "Degraded")["message"]
        and "Deployment refused-" in condition(refused, "Degraded")["message"]
    )
    assert has_condition("Progressing", "False", "ApplyRefused")(refused)
    fired, patches, started = (
        refusal.fired,
        standin.requests.count(verb="patch", resource="frontiertargets"),
        time.monotonic(),
    )
    wait_for(lambda: refusal.fired >= fired + 3, timeout=30, what="a few re-checks")
    elapsed = time.monotonic() - started
    assert refusal.fired - fired <= elapsed / 1.0 + 2, f"{refusal.fired - fired} applies in {elapsed:.1f} s"
    assert standin.requests.count(verb="patch", resource="frontiertargets") == patches, "status rewritten each tick"
    warnings = [e["reason"] for e in events_for(kube_api, namespace, "refused") if e["type"] == "Warning"]
    assert warnings.count("ApplyRefused") == 1, warnings

    standin.faults.clear()  # the cluster (or the spec) is fixed: the next re-check applies
    fixed_at = time.monotonic()
    wait_for(lambda: ready_when_marked(kube_api, namespace, "refused"), timeout=30, what="Ready after the fix")
    figure("apply refused (422) then fixed", time.monotonic() - fixed_at)
    assert has_condition("Degraded", "False")(get_object(kube_api, *FT, namespace, "refused") or {})


def test_a_refused_status_write_on_a_recheck_does_not_stop_the_rechecks(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, standin: Any, kopf_process: Any
) -> None:
    # Kopf applies a timer's patch outside its error handling: when the re-check's status write went through
    # Kopf, one refusal (a 409 here; a 422 or 5xx retries run out alike) ended the timer for good and the
    # target never saw its rollout finish. The re-check writes through the operator's client and retries.
    start(kopf_process, namespace)
    create(kube_api, named("rechecked", namespace))
    wait_for_object(
        kube_api,
        *FT,
        namespace,
        "rechecked",
        lambda o: (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"],
        timeout=30,
    )
    # The change handler has written its status; the next status write is a re-check's.
    refusal = standin.faults.add(
        RequestMatch(verb="patch", resource="frontiertargets", subresource="status", name="rechecked"),
        status=409,
        times=1,
    )
    refused_at = time.monotonic()
    wait_for(lambda: ready_when_marked(kube_api, namespace, "rechecked"), timeout=30, what="Ready after the refusal")
    figure("re-check status write refused (409)", time.monotonic() - refused_at)
    assert refusal.fired == 1
    rolled_out = get_object(kube_api, *FT, namespace, "rechecked") or {}
    assert has_condition("Progressing", "False", "RolledOut")(rolled_out)
