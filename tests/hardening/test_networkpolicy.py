"""The operator's NetworkPolicy: built with the rest of manifests/, valid, and as narrow as the operator's
traffic — egress to the API server, DNS and Prometheus only; ingress to its metrics and health ports only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from frontier_operator.api.spec import TuningSpec

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "1.32.0"
API_SERVER_PORTS = {443, 6443}
DNS_PORT = 53


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (the project machines have it)")
    done = subprocess.run([kubectl, "kustomize", str(ROOT / "manifests")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def policy(built: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [doc for doc in built if doc["kind"] == "NetworkPolicy"]
    kubernetes_validate.validate(found, KUBERNETES_VERSION, strict=True)
    return found


@pytest.fixture(scope="module")
def pod(built: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [doc for doc in built if doc["kind"] == "Deployment"]
    template: dict[str, Any] = deployment["spec"]["template"]
    return template


def _ports(rule: dict[str, Any]) -> set[tuple[str, int]]:
    return {(port.get("protocol", "TCP"), port["port"]) for port in rule.get("ports", [])}


def test_it_selects_the_operator_pods_and_restricts_both_directions(
    policy: dict[str, Any], pod: dict[str, Any]
) -> None:
    spec = policy["spec"]
    assert policy["metadata"]["namespace"] == "frontier-system"
    selector = spec["podSelector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]


def test_ingress_reaches_only_the_metrics_and_health_ports(policy: dict[str, Any], pod: dict[str, Any]) -> None:
    (container,) = pod["spec"]["containers"]
    declared = {port["name"]: port["containerPort"] for port in container["ports"]}
    opened = set().union(*(_ports(rule) for rule in policy["spec"]["ingress"]))
    assert opened == {("TCP", declared["metrics"]), ("TCP", declared["health"])} == {("TCP", 8080), ("TCP", 8081)}
    probed = {container[probe]["httpGet"]["port"] for probe in ("livenessProbe", "readinessProbe")}
    assert {declared[name] if isinstance(name, str) else name for name in probed} <= {port for _, port in opened}


def test_egress_reaches_only_the_api_server_dns_and_prometheus(policy: dict[str, Any]) -> None:
    rules = policy["spec"]["egress"]
    assert all(rule.get("ports") for rule in rules), "an egress rule without ports allows every port"
    by_ports = {frozenset(_ports(rule)): rule for rule in rules}
    api_server = by_ports[frozenset(("TCP", port) for port in API_SERVER_PORTS)]
    dns = by_ports[frozenset({("UDP", DNS_PORT), ("TCP", DNS_PORT)})]
    prometheus_port = urlsplit(TuningSpec().prometheus_url).port
    prometheus = by_ports[frozenset({("TCP", prometheus_port)})]
    assert len(rules) == 3
    assert "to" not in api_server  # cluster-specific address: documented in the file, narrowed by the user
    (dns_peer,) = dns["to"]
    assert dns_peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "kube-system"}
    assert dns_peer["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
    (prometheus_peer,) = prometheus["to"]
    assert prometheus_peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}


def test_the_cluster_specific_api_server_address_is_documented() -> None:
    text = (ROOT / "manifests" / "networkpolicy.yaml").read_text(encoding="utf-8")
    assert "cluster-specific" in text and "ipBlock" in text
