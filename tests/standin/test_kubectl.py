"""kubectl (when installed) works against the stand-in: apply, server-side apply, get, patch, delete."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from k8s_standin import StandIn

KUBECTL = shutil.which("kubectl")
TOY_CRD = Path(__file__).parent / "toy-crd.yaml"
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: srv, image: "sglang:0.5.23"}]}
"""


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_round_trip(standin: StandIn, namespace: str, tmp_path: Path) -> None:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig", namespace=namespace)

    def kubectl(*args: str, stdin: str | None = None) -> str:
        command = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), *args]
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    kubectl("apply", "--validate=false", "-f", str(TOY_CRD))  # no /openapi: client-side validation is off
    kubectl("apply", "--validate=false", "-f", "-", stdin=DEPLOYMENT)
    assert "configured" in kubectl("apply", "--validate=false", "-f", "-", stdin=DEPLOYMENT.replace("0.5.23", "0.5.24"))
    toy = "apiVersion: standin.example.dev/v1\nkind: Toy\nmetadata: {name: t1}\nspec: {message: hi}\n"
    assert "serverside-applied" in kubectl("apply", "--server-side", "--validate=false", "-f", "-", stdin=toy)
    assert kubectl("get", "ty", "t1", "-o", "jsonpath={.spec.replicas}") == "1"  # the CRD default
    kubectl("patch", "toy", "t1", "--type=merge", "-p", '{"spec":{"message":"yo"}}')
    listed = json.loads(kubectl("get", "deploy,toys", "-o", "json"))
    assert sorted(item["kind"] for item in listed["items"]) == ["Deployment", "Toy"]
    kubectl("delete", "toy", "t1")
    assert "t1" not in kubectl("get", "toys")
