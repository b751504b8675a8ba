"""The SRE commands against a target the real operator reconciled."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest

from frontier_operator.api.status import ConditionType
from frontier_operator.cli import main
from frontier_operator.cli_sre import format_explanation, format_status
from k8s_standin.fixtures import get_object, mark_deployment_ready, wait_for, wait_for_object
from operator_support import FT, OPERATOR, create, engine_deployments, has_condition, target_document


def annotations_of(api: kubernetes.client.ApiClient, namespace: str, name: str) -> dict[str, str]:
    target = get_object(api, *FT, namespace, name) or {}
    found: dict[str, str] = target.get("metadata", {}).get("annotations") or {}
    return found


def test_status_explain_and_the_runbook_annotations(
    crd: None,
    kube_api: kubernetes.client.ApiClient,
    namespace: str,
    run_operator: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with run_operator(OPERATOR, namespaces=[namespace], timeout=120):
        create(kube_api, target_document("llama-70b-chat", namespace))
        (deployment,) = wait_for(lambda: engine_deployments(kube_api, namespace, "llama-70b-chat"), timeout=30)
        mark_deployment_ready(kube_api, namespace, deployment["metadata"]["name"])
        ready = wait_for_object(kube_api, *FT, namespace, "llama-70b-chat", has_condition("Ready", "True"), timeout=30)
    revision = ready["status"]["appliedRevision"]

    assert main(["status", "llama-70b-chat", "-n", namespace]) == 0
    shown = capsys.readouterr().out
    assert f"applied {revision}" in shown and "Ready" in shown and "WorkloadsReady" in shown

    assert main(["explain", "llama-70b-chat", "-n", namespace]) == 0
    explained = capsys.readouterr().out
    assert "Why this configuration" in explained and "SLO (predicted)" in explained and "History" in explained

    assert main(["pause", "llama-70b-chat", "-n", namespace, "--reason", "incident 42"]) == 0
    assert annotations_of(kube_api, namespace, "llama-70b-chat")["frontier.dev/paused-reason"] == "incident 42"
    assert main(["status", "llama-70b-chat", "-n", namespace]) == 0
    assert "PAUSED       incident 42" in capsys.readouterr().out
    assert main(["resume", "llama-70b-chat", "-n", namespace]) == 0
    assert "frontier.dev/paused" not in annotations_of(kube_api, namespace, "llama-70b-chat")

    assert main(["pin", "llama-70b-chat", "-n", namespace]) == 0
    assert annotations_of(kube_api, namespace, "llama-70b-chat")["frontier.dev/pin"] == revision
    assert main(["pin", "llama-70b-chat", "-n", namespace, "--off"]) == 0
    assert "frontier.dev/pin" not in annotations_of(kube_api, namespace, "llama-70b-chat")

    assert main(["rollback", "llama-70b-chat", "-n", namespace]) == 0
    assert "frontier.dev/rollback" in annotations_of(kube_api, namespace, "llama-70b-chat")

    capsys.readouterr()
    assert main(["approve", "llama-70b-chat", "-n", namespace]) == 1
    assert "no pending recommendation" in capsys.readouterr().err
    assert main(["status", "no-such-target", "-n", namespace]) == 2
    assert "404" in capsys.readouterr().err


def test_status_shows_the_error_budget_of_the_fleet_in_force() -> None:
    calibration = {"samples": 31, "sloWindows": 31, "sloWindowsMissed": 1, "sloWindowsAllowed": 1}
    target = {"metadata": {"namespace": "ns", "name": "t"}, "status": {"calibration": calibration}}
    assert "budget       1 of 31 windows of the fleet in force missed in 6 h, 1 allowed" in format_status(target)
    assert "budget" not in format_status({"metadata": {}, "status": {"calibration": {"samples": 0}}})


def test_status_shows_where_the_http_route_sends_traffic() -> None:
    route = [{"revision": "aaaa1111", "weightPerMille": 900}, {"revision": "bbbb2222", "weightPerMille": 100}]
    target = {"metadata": {"namespace": "ns", "name": "t"}, "status": {"route": route}}
    assert "route        HTTPRoute weights: aaaa1111 90%, bbbb2222 10%" in format_status(target)
    assert "route" not in format_status({"metadata": {}, "status": {}})


def test_explain_shows_the_learnt_tail_beside_each_correction() -> None:
    calibration = {
        "samples": 31,
        "ttftFactor": 1.17,
        "tpotFactor": 0.81,
        "ttftTailFactor": 1.52,
        "tpotTailFactor": 0.97,
        "confidence": 0.92,
    }
    target = {"metadata": {"namespace": "ns", "name": "t"}, "status": {"calibration": calibration}}
    assert (
        "Calibration: TTFT ×1.17 (p99 ×1.52 more), TPOT ×0.81 (p99 ×0.97 more), confidence 0.92 over 31 windows"
        in format_explanation(target)
    )


def _unwrapped(text: str) -> str:
    return " ".join(text.split())


def test_status_prints_a_long_reason_and_message_whole_within_the_terminal_width() -> None:
    reason = (
        "roll back canary r8: its full fleet at today's traffic (3.24 requests/s) is projected to miss p99 TTFT "
        "(8.33 s with a 14% margin, of 4 s), p50 TPOT (31.2 ms with a 9% margin, of 30 ms), capacity (3.44 "
        "requests/s for 3.24 with a 14% margin)"
    )
    refused = (
        "parent gateway infra/public (listener https) refused the route: NotAllowedByListeners — the listener "
        "allows routes from namespaces labelled team=platform only; no canary starts until it is accepted"
    )
    status = {
        "tuning": {
            "lastDecision": "roll back",
            "lastEvaluatedAt": "2026-12-03T05:42:00Z",
            "lastDecisionReason": reason,
        },
        "conditions": [
            {"type": "RouteAccepted", "status": "False", "reason": "NotAllowedByListeners", "message": refused}
        ],
    }
    shown = format_status({"metadata": {"namespace": "ns", "name": "t"}, "status": status})
    assert reason in _unwrapped(shown) and refused in _unwrapped(shown)
    assert max(len(line) for line in shown.splitlines()) <= 120


def test_status_shows_every_condition_type_and_one_it_does_not_know() -> None:
    kinds = [*(kind.value for kind in ConditionType), "FromANewerOperator"]
    conditions = [{"type": kind, "status": "True", "reason": "Because", "message": ""} for kind in kinds]
    shown = format_status({"metadata": {}, "status": {"conditions": conditions}})
    listed = [line.split()[0] for line in shown.split("  conditions\n", 1)[1].splitlines()]
    assert sorted(listed) == sorted(kinds) and listed[-1] == "FromANewerOperator"
