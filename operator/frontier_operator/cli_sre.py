"""SRE commands (kubeconfig): `frontier status|explain|pause|resume|approve|rollback|pin NAME`.

`status` and `explain` read the FrontierTarget and print what the operator decided and why;
the others set the annotations of `api.annotations`, which the operator obeys on its next tick.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from frontier_operator.adapters import kube
from frontier_operator.api.annotations import APPROVE, PAUSED, PAUSED_REASON, PIN, ROLLBACK, request_token
from frontier_operator.api.units import rfc3339

# Conditions in the order an on-call person reads them: every type the API defines (a test holds this to
# `ConditionType`); one this CLI does not know (written by a newer operator) follows them.
_CONDITION_ORDER = (
    "Ready",
    "SLOMet",
    "PlanFeasible",
    "Progressing",
    "MetricsAvailable",
    "RouteAccepted",
    "ModelDrift",
    "Degraded",
)
# Terminal width long fields wrap at: a decision's reason or a condition's message is never cut, its end is
# often the part that says what to do.
_WIDTH = 120


def _wrapped(prefix: str, text: str) -> list[str]:
    """`prefix` followed by `text`, continued under the start of `text`."""
    width = max(_WIDTH, len(prefix) + 40)
    indent = " " * len(prefix)
    lines = textwrap.wrap(
        text, width, initial_indent=prefix, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )
    return lines or [prefix.rstrip()]


def _bullets(items: Iterable[str]) -> list[str]:
    return [line for item in items for line in _wrapped("  - ", item)]


def _now() -> str:
    return rfc3339(datetime.now(UTC))


def format_status(target: dict[str, Any]) -> str:
    metadata, status = target.get("metadata", {}), target.get("status", {})
    summary, notes = status.get("summary", {}), metadata.get("annotations", {}) or {}
    lines = [
        f"{metadata.get('namespace')}/{metadata.get('name')}  generation {metadata.get('generation')}"
        f" (observed {status.get('observedGeneration', '-')})"
    ]
    for key in ("sloMet", "tpot", "ttft", "costPerMtok", "config", "gpus", "mode"):
        if summary.get(key) is not None:
            lines.append(f"  {key:<12} {summary[key]}")
    if PAUSED in notes:
        lines.append(f"  PAUSED       {notes.get(PAUSED_REASON, 'by annotation')}")
    if notes.get(PIN):
        lines.append(f"  PINNED       revision {notes[PIN]}")
    lines.append(
        f"  revision     applied {status.get('appliedRevision', '-')}"
        f", planned {status.get('plan', {}).get('revision', '-')}"
    )
    tuning = status.get("tuning") or {}
    if tuning.get("applied"):
        lines.append(f"  running      {tuning['applied']['summary']}")
    if tuning.get("lastDecision"):
        decided = (
            f"{tuning['lastDecision']} at {tuning.get('lastEvaluatedAt', '-')}: {tuning.get('lastDecisionReason', '')}"
        )
        lines += _wrapped("  decided      ", decided)
    calibration = status.get("calibration") or {}
    if calibration.get("sloWindows"):
        lines.append(
            f"  budget       {calibration['sloWindowsMissed']} of {calibration['sloWindows']} windows of the fleet in"
            f" force missed in 6 h, {calibration['sloWindowsAllowed']} allowed (goal: every SLO in 95 % of windows)"
        )
    if status.get("canary"):
        canary = status["canary"]
        lines.append(
            f"  canary       {canary['revision']} {canary['summary']} at {canary['trafficSharePercent']:g}%"
            f" since {canary['startedAt']}"
        )
    if status.get("route"):
        weights = ", ".join(f"{b['revision']} {b['weightPerMille'] / 10:g}%" for b in status["route"])
        lines.append(f"  route        HTTPRoute weights: {weights}")
    sweep = status.get("sweep") or {}
    if sweep.get("phase", "Idle") != "Idle":
        lines.append(
            f"  sweep        {sweep['phase']}, {sweep.get('gpuMinutesUsed', 0.0):.1f} GPU-min used this period"
            + (f" (approve: frontier sweep start {metadata.get('name')})" if sweep["phase"] == "Proposed" else "")
        )
    if status.get("recommendation"):
        rec = status["recommendation"]
        recommends = f"{rec['action']} — {rec['reason']} (approve: frontier approve {metadata.get('name')})"
        lines += _wrapped("  recommends   ", recommends)
    conditions = {c["type"]: c for c in status.get("conditions", [])}
    lines.append("  conditions")
    unknown = sorted(kind for kind in conditions if kind not in _CONDITION_ORDER)
    for kind in [*(k for k in _CONDITION_ORDER if k in conditions), *unknown]:
        c = conditions[kind]
        lines += _wrapped(f"    {kind:<17} {c['status']:<8} {c['reason']:<22} ", c.get("message", ""))
    return "\n".join(lines)


def format_explanation(target: dict[str, Any]) -> str:
    status = target.get("status", {})
    out = [format_status(target)]
    plan = status.get("plan")
    if plan:
        out.append("\nWhy this configuration")
        out += _bullets(plan.get("reasons", []))
        out.append("\nSLO (predicted)")
        out += [
            f"  p{c['percentile']} {c['metric'].upper():<5} {c['valueMs']:.1f} ms / {c['limitMs']:.0f} ms"
            f"  ({c['headroomPercent']:+.0f} % headroom)"
            for c in plan.get("slo", [])
        ]
    if status.get("infeasible"):
        out.append(f"\nInfeasible — nearest: {status['infeasible']['nearest']}")
        out += _bullets(status["infeasible"].get("suggestions", []))
    if status.get("frontier"):
        out.append("\nFrontier (predicted)")
        for point in status["frontier"]:
            delta = point.get("deltaCostPercent")
            shown = f"{delta:+.0f} %" if delta is not None else ""
            out.append(
                f"  {'✓' if point['meetsSlo'] else '✗'} ${point['costPerMtok']:.3f}/Mtok {shown:>7}  "
                f"{point['outputTokensPerSecondPerUser']:.0f} tok/s/user  {point['summary']}"
            )
    if status.get("rejected"):
        out.append("\nAlternatives and why they lost")
        out += _bullets(f"{r['alternative']}: {r['reason']}" for r in status["rejected"])
    if status.get("techniques"):
        out.append("\nWhat each technique does for this traffic")
        out += _bullets(f"{t['technique']}: {t.get('note', '')}" for t in status["techniques"])
    calibration = status.get("calibration")
    if calibration and calibration.get("samples"):
        ttft_tail, tpot_tail = calibration.get("ttftTailFactor", 1.0), calibration.get("tpotTailFactor", 1.0)
        out.append(
            f"\nCalibration: TTFT ×{calibration['ttftFactor']:.2f} (p99 ×{ttft_tail:.2f} more),"
            f" TPOT ×{calibration['tpotFactor']:.2f} (p99 ×{tpot_tail:.2f} more),"
            f" confidence {calibration['confidence']:.2f} over {calibration['samples']} windows"
        )
    out += _sweep_lines(status.get("sweep") or {})
    if status.get("history"):
        out.append("\nHistory")
        out += [
            line for h in status["history"] for line in _wrapped(f"  {h['time']}  ", f"{h['action']} — {h['reason']}")
        ]
    return "\n".join(out)


def _ms(value: float | None) -> str:
    return f"{value:.4g} ms" if value is not None else "-"


def _error(predicted: float | None, measured: float | None) -> str:
    return f"{(predicted / measured - 1) * 100:+.0f} %" if predicted and measured else ""


def _sweep_lines(sweep: dict[str, Any]) -> list[str]:
    """The last benchmark sweep: predicted against measured for every swept point, and why."""
    if not sweep or (sweep.get("phase", "Idle") == "Idle" and not sweep.get("points")):
        return []
    used = sweep.get("gpuMinutesUsed", 0.0)
    lines = [
        f"\nSweep: {sweep.get('phase')}, {used:.1f} GPU-min used this period"
        + (f", last run {sweep['lastRunAt']}" if sweep.get("lastRunAt") else "")
        + (f", points in ConfigMap {sweep['resultsConfigMap']}" if sweep.get("resultsConfigMap") else "")
    ]
    if sweep.get("points"):
        lines.append("  predicted / measured (p50)")
        for p in sweep["points"]:
            ttft = (p.get("predictedTtftMs"), p.get("measuredTtftMs"))
            tpot = (p.get("predictedTpotMs"), p.get("measuredTpotMs"))
            lines.append(
                f"  {p['configuration']} at {p['concurrency']} in flight ({p.get('reason') or 'measured'}): "
                f"TTFT {_ms(ttft[0])} / {_ms(ttft[1])} {_error(*ttft)}, "
                f"TPOT {_ms(tpot[0])} / {_ms(tpot[1])} {_error(*tpot)}"
            )
    lines += [f"  - {line}" for line in sweep.get("explanation", [])]
    return lines


def _target(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    api = kube.api_client()
    return api, kube.get_target(api, args.namespace, args.name)


def _show(args: argparse.Namespace) -> int:
    _, target = _target(args)
    print(format_explanation(target) if args.command == "explain" else format_status(target))
    return 0


def _annotate(args: argparse.Namespace) -> int:
    api, target = _target(args)
    changes: dict[str, str | None]
    if args.command == "pause":
        changes = {PAUSED: "true", PAUSED_REASON: args.reason or f"paused at {_now()}"}
    elif args.command == "resume":
        changes = {PAUSED: None, PAUSED_REASON: None}
    elif args.command == "approve":
        recommendation = target.get("status", {}).get("recommendation")
        if not recommendation:
            print(f"{args.name} has no pending recommendation", file=sys.stderr)
            return 1
        changes = {APPROVE: recommendation["proposedAt"]}
    elif args.command == "rollback":
        changes = {ROLLBACK: request_token(datetime.now(UTC))}
    else:  # pin
        revision = None if args.off else (args.revision or target.get("status", {}).get("appliedRevision"))
        if not args.off and not revision:
            print(f"{args.name} has no applied revision to pin yet", file=sys.stderr)
            return 1
        changes = {PIN: revision}
    kube.annotate_target(api, args.namespace, args.name, changes)
    print(f"{args.namespace}/{args.name}: {args.command} " + ", ".join(f"{k}={v}" for k, v in changes.items()))
    return 0


def _guarded(run: Any) -> Any:
    def call(args: argparse.Namespace) -> int:
        try:
            code: int = run(args)
        except kube.KubeError as error:
            print(f"frontier {args.command}: {error}", file=sys.stderr)
            return 1 if error.status != 404 else 2
        return code

    return call


def register(commands: Any) -> None:
    helps = {
        "status": "one target's state: SLO, cost, configuration, conditions",
        "explain": "why the operator chose what it runs: reasons, frontier, alternatives, history",
        "pause": "stop every tuning change (observation goes on)",
        "resume": "undo pause",
        "approve": "apply the pending recommendation (recommend mode)",
        "rollback": "roll the canary back, or return to the previous revision",
        "pin": "keep the current engine configuration (replicas may still scale); --off to unpin",
    }
    for name, text in helps.items():
        parser = commands.add_parser(name, help=text)
        parser.add_argument("name", help="FrontierTarget name")
        parser.add_argument("-n", "--namespace", default="default")
        if name == "pause":
            parser.add_argument("--reason", help="shown by `frontier status`")
        if name == "pin":
            parser.add_argument("--revision", help="revision to pin (default: the applied one)")
            parser.add_argument("--off", action="store_true", help="remove the pin")
        parser.set_defaults(func=_guarded(_show if name in ("status", "explain") else _annotate))
