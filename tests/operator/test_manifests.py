"""manifests/ builds offline with kustomize, validates against the Kubernetes schemas, and is hardened."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "1.32.0"


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (the project machines have it)")
    done = subprocess.run([kubectl, "kustomize", str(ROOT / "manifests")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def test_kustomize_builds_the_whole_installation(built: list[dict[str, Any]]) -> None:
    kinds = {doc["kind"] for doc in built}
    assert kinds >= {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Service",
        "ServiceMonitor",
        "CustomResourceDefinition",
        "ClusterKopfPeering",
    }


def test_core_objects_pass_the_kubernetes_schemas(built: list[dict[str, Any]]) -> None:
    for doc in built:
        if doc["apiVersion"].startswith(("monitoring.coreos.com", "kopf.dev")):
            continue  # custom kinds: no bundled schema
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_crd_passes_the_kubernetes_schema() -> None:
    crd = yaml.safe_load((ROOT / "crds" / "frontiertargets.frontier.dev.yaml").read_text(encoding="utf-8"))
    kubernetes_validate.validate(crd, KUBERNETES_VERSION, strict=True)


def test_the_operator_pod_is_locked_down(built: list[dict[str, Any]]) -> None:
    (deployment,) = [doc for doc in built if doc["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["limits"]["memory"]
    assert {"livenessProbe", "readinessProbe"} <= set(container)
    assert deployment["spec"]["replicas"] == 2 and "--peering=frontier-operator" in container["args"]
    assert container["args"][-2:] == ["-m", "frontier_operator.main"]
