"""Operator scale: N FrontierTargets against the Kubernetes API stand-in.

Starts the stand-in, runs the real operator (`kopf run -m frontier_operator.main`) as a child
process, creates N targets (the examples, cycled, with `--distinct` different request rates so the
planner really plans `5 × distinct` specs), and measures the time until every target's status
reflects its generation, the operator's peak memory (VmHWM), and API requests per target. With
`--storm`, every spec is then changed at once and the same is measured for the reconcile storm.

    python bench/operator_scale.py [--targets 500] [--distinct 4] [--storm] [--out bench/results/operator_scale.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kubernetes
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from k8s_standin.server import StandIn  # noqa: E402 - the stand-in lives with the tests

NAMESPACE = "scale"
GOAL_SECONDS, GOAL_MB = 60.0, 300.0


def documents(count: int, distinct: int) -> list[dict[str, Any]]:
    examples = [yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted((ROOT / "examples").glob("*.yaml"))]
    out = []
    for index in range(count):
        document = json.loads(json.dumps(examples[index % len(examples)]))
        document["metadata"] = {"name": f"target-{index:04d}", "namespace": NAMESPACE}
        rate = float(str(document["spec"]["workload"]["requestRate"]).split("/")[0])
        document["spec"]["workload"]["requestRate"] = f"{rate * (1 + (index // len(examples)) % distinct / 10):g}/s"
        out.append(document)
    return out


def settled(api: kubernetes.client.CustomObjectsApi) -> tuple[int, int]:
    """(targets whose status matches their generation, all targets)."""
    items = api.list_namespaced_custom_object("frontier.dev", "v1alpha1", NAMESPACE, "frontiertargets")["items"]
    done = sum(
        1
        for item in items
        if item.get("status", {}).get("observedGeneration") == item["metadata"].get("generation")
        and any(c["type"] == "PlanFeasible" for c in item.get("status", {}).get("conditions", []))
    )
    return done, len(items)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_settled(api: kubernetes.client.CustomObjectsApi, count: int, started: float, timeout: float) -> float:
    while time.monotonic() - started < timeout:
        done, total = settled(api)
        if total == count and done == count:
            return time.monotonic() - started
        time.sleep(0.5)
    return float("inf")


def operator_requests(standin: StandIn, since: int) -> int:
    return sum(1 for r in standin.requests.all()[since:] if r.user_agent.startswith(("frontier-operator/", "kopf/")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=500)
    parser.add_argument("--distinct", type=int, default=4, help="request rates per example (distinct specs = 5 × this)")
    parser.add_argument("--storm", action="store_true", help="then change every spec at once")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "operator_scale.json")
    args = parser.parse_args()

    crd = yaml.safe_load((ROOT / "crds" / "frontiertargets.frontier.dev.yaml").read_text(encoding="utf-8"))
    with StandIn(crds=[crd]) as standin, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = standin.write_kubeconfig(Path(tmp) / "kubeconfig")
        kubernetes.config.load_kube_config(str(kubeconfig))
        api_client = kubernetes.client.ApiClient()
        kubernetes.client.CoreV1Api(api_client).create_namespace({"metadata": {"name": NAMESPACE}})
        custom = kubernetes.client.CustomObjectsApi(api_client)
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "FRONTIER_METRICS_PORT": "0",
            "FRONTIER_RECHECK_SECONDS": "60",
            "PYTHONPATH": str(ROOT / "operator"),
        }
        log = open(Path(tmp) / "operator.log", "wb")  # noqa: SIM115 - closed with the process
        operator = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "-n", NAMESPACE, "--standalone", "-m", "frontier_operator.main"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            time.sleep(2)  # let it list and watch before the flood
            before = len(standin.requests.all())
            started = time.monotonic()
            for document in documents(args.targets, args.distinct):
                custom.create_namespaced_custom_object(
                    "frontier.dev", "v1alpha1", NAMESPACE, "frontiertargets", document
                )
            created_s = time.monotonic() - started
            reconciled_s = wait_settled(custom, args.targets, started, args.timeout)
            result: dict[str, Any] = {
                "targets": args.targets,
                "distinct_specs": min(args.targets, 5 * args.distinct),
                "create_seconds": round(created_s, 2),
                "reconcile_all_seconds": round(reconciled_s, 2),
                "operator_peak_rss_mb": round(peak_rss_mb(operator.pid), 1),
                "api_requests_per_target": round(operator_requests(standin, before) / args.targets, 2),
                "goal": {"reconcile_all_seconds": GOAL_SECONDS, "operator_peak_rss_mb": GOAL_MB},
            }
            if args.storm:
                before = len(standin.requests.all())
                started = time.monotonic()
                for index in range(args.targets):
                    custom.patch_namespaced_custom_object(
                        "frontier.dev",
                        "v1alpha1",
                        NAMESPACE,
                        "frontiertargets",
                        f"target-{index:04d}",
                        {"spec": {"tuning": {"maxChangesPerHour": 3}}},
                    )
                storm_s = wait_settled(custom, args.targets, started, args.timeout)
                result["storm"] = {
                    "reconcile_all_seconds": round(storm_s, 2),
                    "api_requests_per_target": round(operator_requests(standin, before) / args.targets, 2),
                    "operator_peak_rss_mb": round(peak_rss_mb(operator.pid), 1),
                }
        finally:
            operator.terminate()
            operator.wait(timeout=30)
            log.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    storm = f"; storm {result['storm']['reconcile_all_seconds']} s" if "storm" in result else ""
    print(
        f"operator_scale: {args.targets} targets ({result['distinct_specs']} distinct specs) reconciled in "
        f"{result['reconcile_all_seconds']} s (goal ≤ {GOAL_SECONDS:g}), peak {result['operator_peak_rss_mb']} MB "
        f"(goal ≤ {GOAL_MB:g}), {result['api_requests_per_target']} API requests/target{storm}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
