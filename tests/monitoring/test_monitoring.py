"""Alerts, dashboard and Argo CD health check: valid for the tools that consume them, and right."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import lupa
import pytest
import yaml

from frontier_operator import metrics

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "manifests" / "prometheusrule.yaml"
DASHBOARD = ROOT / "monitoring" / "grafana-dashboard.json"
HEALTH = ROOT / "monitoring" / "argocd-health.lua"
SGLANG_METRICS = ROOT.parent / "shared" / "docs" / "reference" / "sglang-0.5.23-metrics.tsv"
OPERATOR_METRICS = {
    collector._name
    for collector in vars(metrics).values()
    if hasattr(collector, "_name") and hasattr(collector, "_type")
}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip("promtool (Debian's prometheus package) is not installed; `make test` installs it")
    return subprocess.run([binary, *args], capture_output=True, text=True, check=False, cwd=cwd)


def test_the_alert_rules_pass_promtool_check(tmp_path: Path) -> None:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["spec"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups), encoding="utf-8")
    done = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {rule["alert"] for group in groups["groups"] for rule in group["rules"]} >= {
        "FrontierSLOBurning",
        "FrontierModelDrift",
        "FrontierCanaryStuck",
        "FrontierOperatorErrors",
    }


def test_the_alerts_fire_when_they_should_and_not_before(tmp_path: Path) -> None:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["spec"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups), encoding="utf-8")
    shutil.copy(Path(__file__).with_name("rules-test.yaml"), tmp_path / "rules-test.yaml")
    done = promtool("test", "rules", "rules-test.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def _expressions(dashboard: dict[str, Any]) -> list[str]:
    panels = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    annotations = [item["expr"] for item in dashboard["annotations"]["list"]]
    return panels + annotations


def _substituted(expr: str) -> str:
    return expr.replace("$__rate_interval", "5m").replace("$namespace", "inference").replace("$target", "glm5")


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    expressions = _expressions(dashboard)
    assert len(expressions) >= 10
    recording = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{index}", "expr": _substituted(expr)}
                    for index, expr in enumerate(expressions)
                ],
            }
        ]
    }
    (tmp_path / "dashboard-rules.yaml").write_text(yaml.safe_dump(recording), encoding="utf-8")
    done = promtool("check", "rules", "dashboard-rules.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_reads_only_metrics_that_exist() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    text = "\n".join(_expressions(dashboard))
    ours = set(re.findall(r"\b(frontier_[a-z_]+)\{", text))
    assert ours and ours <= OPERATOR_METRICS | {f"{name}_total" for name in OPERATOR_METRICS}
    engines = set(re.findall(r"sglang\[:_\]([a-z_]+?)(?:_bucket)?\"", text))
    assert engines
    if SGLANG_METRICS.exists():
        known = {line.split("\t")[0].removeprefix("sglang:") for line in SGLANG_METRICS.read_text().splitlines()[1:]}
        assert engines <= known, engines - known
    titles = " ".join(panel["title"] for panel in dashboard["panels"])
    for subject in ("TPOT", "TTFT", "frontier", "$ per million tokens", "GPUs"):
        assert subject in titles


# ----------------------------------------------------------------------------------------- Argo CD


def _lua_value(lua: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return lua.table_from({key: _lua_value(lua, item) for key, item in value.items()})
    if isinstance(value, list):
        return lua.table_from([_lua_value(lua, item) for item in value])
    return value


def health(obj: dict[str, Any]) -> tuple[str, str]:
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    check = lua.eval(f"function(obj)\n{HEALTH.read_text(encoding='utf-8')}\nend")
    result = check(_lua_value(lua, obj))
    return str(result["status"]), str(result["message"])


def target(generation: int = 1, observed: int | None = 1, **conditions: tuple[str, str]) -> dict[str, Any]:
    status: dict[str, Any] = {"summary": {"config": "fp8 TP4 cap 48 ×1"}}
    if observed is not None:
        status["observedGeneration"] = observed
    status["conditions"] = [
        {"type": kind, "status": value, "reason": reason, "message": f"{kind} says {value}"}
        for kind, (value, reason) in conditions.items()
    ]
    return {"metadata": {"generation": generation}, "status": status}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"metadata": {"generation": 1}}, "Progressing"),
        (target(generation=2, PlanFeasible=("True", "PlanChosen"), Ready=("True", "WorkloadsReady")), "Progressing"),
        (target(PlanFeasible=("False", "InvalidSpec")), "Degraded"),
        (target(PlanFeasible=("False", "SloUnreachable"), Ready=("True", "WorkloadsReady")), "Degraded"),
        (target(PlanFeasible=("True", "PlanChosen"), Degraded=("True", "RenderFailed")), "Degraded"),
        (target(PlanFeasible=("True", "PlanChosen"), Ready=("False", "WorkloadsNotReady")), "Progressing"),
        (
            target(PlanFeasible=("True", "PlanChosen"), Ready=("True", "WorkloadsReady"), SLOMet=("Unknown", "X")),
            "Healthy",
        ),
        (
            target(PlanFeasible=("True", "PlanChosen"), Ready=("True", "WorkloadsReady"), SLOMet=("True", "Met")),
            "Healthy",
        ),
        (
            target(PlanFeasible=("True", "PlanChosen"), Ready=("True", "WorkloadsReady"), SLOMet=("False", "TpotOver")),
            "Degraded",
        ),
    ],
)
def test_argocd_health(obj: dict[str, Any], expected: str) -> None:
    status, message = health(obj)
    assert status == expected, message
    assert message
