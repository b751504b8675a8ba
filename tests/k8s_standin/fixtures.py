"""pytest fixtures and helpers for tests that need a Kubernetes API (the stand-in or a real cluster).

Fixtures (import them into a conftest.py; tests/conftest.py does):

* `kube_cluster` (session): the stand-in in a background thread, its kubeconfig written, `KUBECONFIG`
  set and `kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION` patched (the client reads
  `$KUBECONFIG` once, at import). With `E2E_REAL_CLUSTER=1`, the cluster of `$KUBECONFIG` (kind,
  k3d, …) is used instead and no stand-in is started.
* `standin`: the running stand-in, with faults and the request log cleared for this test; skips
  the test on a real cluster (faults, request counts and the GC helper exist only here).
* `kube_api` (session): a `kubernetes.client.ApiClient` for the cluster.
* `namespace`: a fresh namespace for this test, deleted afterwards.
* `run_operator`: runs a Kopf operator (a file path or `-m module`) with `kopf.testing.KopfRunner`.
* `kopf_process`: runs `kopf run …` as a separate process (for peering/HA tests).

Helpers: `wait_for`, `wait_for_object`, `wait_for_absent`, `get_object`, `request_json`,
`mark_deployment_ready`, `mark_leaderworkerset_ready`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import kopf
import kopf.testing
import kubernetes
import pytest
from kopf._core.intents.registries import SmartOperatorRegistry  # the registry with login handlers
from kubernetes.config import kube_config

from .crds import kopf_peering_crds, leaderworkerset_crd, servicemonitor_crd
from .server import StandIn

T = TypeVar("T")

REAL_CLUSTER_ENV = "E2E_REAL_CLUSTER"


# ---------------------------------------------------------------------------- waiting


def wait_for(probe: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.05, what: str = "condition") -> T:
    """Poll `probe` until it returns something truthy; return it. Fails with the last value seen."""
    deadline = time.monotonic() + timeout
    last: T = probe()
    while not last:
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last value: {last!r}")
        time.sleep(interval)
        last = probe()
    return last


# ---------------------------------------------------------------------------- raw API access


def object_path(
    api_version: str, plural: str, namespace: str | None, name: str | None = None, subresource: str | None = None
) -> str:
    prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    path = f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


def request_json(
    api: kubernetes.client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    query: Sequence[tuple[str, str]] = (),
) -> tuple[int, Any]:
    """Any API request through the kubernetes client's auth and TLS; (status, parsed JSON)."""
    _, url, headers, serialized, _ = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=list(query),
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, header_params=headers, body=serialized)
    response.read()  # type: ignore[no-untyped-call]
    return response.status, json.loads(response.data) if response.data else None


def get_object(
    api: kubernetes.client.ApiClient, api_version: str, plural: str, namespace: str | None, name: str
) -> dict[str, Any] | None:
    status, body = request_json(api, "GET", object_path(api_version, plural, namespace, name))
    if status == 404:
        return None
    if status != 200:
        raise AssertionError(f"GET {plural}/{name} answered {status}: {body}")
    return dict(body)


def wait_for_object(  # noqa: PLR0917 - reads like the API path it polls
    api: kubernetes.client.ApiClient,
    api_version: str,
    plural: str,
    namespace: str | None,
    name: str,
    predicate: Callable[[dict[str, Any]], Any] = bool,
    *,
    timeout: float = 10.0,
) -> dict[str, Any]:
    """Wait until the object exists and `predicate(object)` is truthy; return the object."""

    def probe() -> dict[str, Any] | None:
        obj = get_object(api, api_version, plural, namespace, name)
        return obj if obj is not None and predicate(obj) else None

    found = wait_for(probe, timeout=timeout, what=f"{plural}/{name} in {namespace} to satisfy the predicate")
    assert found is not None
    return found


def wait_for_absent(
    api: kubernetes.client.ApiClient,
    api_version: str,
    plural: str,
    namespace: str | None,
    name: str,
    *,
    timeout: float = 10.0,
) -> None:
    wait_for(
        lambda: get_object(api, api_version, plural, namespace, name) is None,
        timeout=timeout,
        what=f"{plural}/{name} to be gone",
    )


# ---------------------------------------------------------------------------- playing the controllers


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def mark_deployment_ready(api: kubernetes.client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """Write the status the Deployment controller writes once every replica is up to date and ready."""
    deployment = get_object(api, "apps/v1", "deployments", namespace, name)
    assert deployment is not None, f"deployment {namespace}/{name} does not exist"
    replicas = deployment["spec"].get("replicas", 1)
    now = _now()
    status = {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.",
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable",
                "message": f'ReplicaSet "{name}" has successfully progressed.',
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            },
        ],
    }
    code, body = request_json(
        api,
        "PATCH",
        object_path("apps/v1", "deployments", namespace, name, "status"),
        {"status": status},
        content_type="application/merge-patch+json",
    )
    assert code == 200, body
    return dict(body)


def mark_leaderworkerset_ready(api: kubernetes.client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    """Write the status the LeaderWorkerSet controller (sigs.k8s.io/lws) writes when all groups are ready."""
    lws = get_object(api, "leaderworkerset.x-k8s.io/v1", "leaderworkersets", namespace, name)
    assert lws is not None, f"leaderworkerset {namespace}/{name} does not exist"
    replicas = lws.get("spec", {}).get("replicas", 1)
    now = _now()
    status = {
        "replicas": replicas,
        "readyReplicas": replicas,
        "updatedReplicas": replicas,
        "hpaPodSelector": f"leaderworkerset.sigs.k8s.io/name={name},leaderworkerset.sigs.k8s.io/worker-index=0",
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "AllGroupsReady",
                "message": "All replicas are ready",
                "lastTransitionTime": now,
            },
            {
                "type": "Progressing",
                "status": "False",
                "reason": "Ready",
                "message": "Replicas are progressing",
                "lastTransitionTime": now,
            },
        ],
    }
    path = object_path("leaderworkerset.x-k8s.io/v1", "leaderworkersets", namespace, name, "status")
    code, body = request_json(api, "PATCH", path, {"status": status}, content_type="application/merge-patch+json")
    assert code == 200, body
    return dict(body)


# ---------------------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class KubeCluster:
    kubeconfig: Path
    standin: StandIn | None  # None on a real cluster


def _point_clients_at(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    kubernetes.config.load_kube_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        if os.environ.get(REAL_CLUSTER_ENV) == "1":
            kubeconfig = Path(os.environ.get("KUBECONFIG", Path.home() / ".kube" / "config"))
            _point_clients_at(kubeconfig, monkeypatch)
            yield KubeCluster(kubeconfig, None)
            return
        stock = [*kopf_peering_crds(), leaderworkerset_crd(), servicemonitor_crd()]
        with StandIn(crds=stock) as server:
            kubeconfig = server.write_kubeconfig(tmp_path_factory.mktemp("standin") / "kubeconfig")
            _point_clients_at(kubeconfig, monkeypatch)
            yield KubeCluster(kubeconfig, server)


@pytest.fixture()
def standin(kube_cluster: KubeCluster) -> StandIn:
    if kube_cluster.standin is None:
        pytest.skip("needs the API stand-in (faults, request log, garbage collection helper)")
    kube_cluster.standin.faults.clear()
    kube_cluster.standin.requests.clear()
    return kube_cluster.standin


@pytest.fixture(scope="session")
def kube_api(kube_cluster: KubeCluster) -> kubernetes.client.ApiClient:
    client: kubernetes.client.ApiClient = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kube_cluster.kubeconfig)
    )
    return client


@pytest.fixture()
def namespace(kube_api: kubernetes.client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test; deleted (with its content) afterwards."""
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = f"{stem}-{uuid.uuid4().hex[:5]}"
    core = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespace(
        kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name=name, labels={"e2e.frontier.dev/test": "true"})
        )
    )
    yield name
    with contextlib.suppress(kubernetes.client.ApiException):
        core.delete_namespace(name)


# ---------------------------------------------------------------------------- operators


@contextlib.contextmanager
def _fresh_registry(module: str | None) -> Iterator[kopf.OperatorRegistry]:
    """A fresh registry, so handlers of earlier runs (and their import cache) do not leak in."""
    previous = kopf.get_default_registry()
    if module is not None:
        for loaded in [name for name in sys.modules if name == module or name.startswith(f"{module}.")]:
            del sys.modules[loaded]
    registry = SmartOperatorRegistry()
    try:
        yield registry
    finally:
        kopf.set_default_registry(previous)


@contextlib.contextmanager
def run_kopf(
    target: str,
    *,
    namespaces: Sequence[str] = (),
    standalone: bool = True,
    extra_args: Sequence[str] = (),
    timeout: float = 30.0,
) -> Iterator[kopf.testing.KopfRunner]:
    """Run an operator in this process: `target` is a file path, or `-m package.module`."""
    module = target[3:].strip() if target.startswith("-m ") else None
    scope = [arg for ns in namespaces for arg in ("-n", ns)] or ["-A"]
    args = ["run", *scope, *(["--standalone"] if standalone else []), "--verbose", *extra_args]
    args += ["-m", module] if module else [target]
    failure: AssertionError | None = None
    with (
        _fresh_registry(module) as registry,
        kopf.testing.KopfRunner(args, timeout=timeout, registry=registry) as runner,
    ):
        try:
            yield runner
        except AssertionError as error:  # the test gave up waiting: keep what the operator did meanwhile
            failure = error
    if failure is not None:
        raise AssertionError(f"{failure}\n{_operator_log_tail(runner.output)}") from failure
    if runner.exception is not None:
        raise runner.exception
    assert runner.exit_code == 0, runner.output


# Request lines that drown the operator's own: the stand-in API server's access log and the test's polling
# through the kubernetes client (urllib3), both interleaved in this process's log.
_NOISE = ("aiohttp.access", "urllib3.connectionpo")
# Kopf's level column (`--verbose`: the level name padded to eight) for what may explain a failure.
_ALARMING = ("[WARNING ]", "[ERROR   ]", "[CRITICAL]")


def _operator_log_tail(output: str, lines: int = 60) -> str:
    """The operator's own warnings and errors, then its last log lines, without the request noise (`_NOISE`).

    The last lines alone are often the shutdown's; a warning (a failed Event post, a retried request) from
    minutes before is what explains the failure.
    """
    own = [line for line in output.splitlines() if not any(noise in line for noise in _NOISE)]
    alarming = [line for line in own if any(level in line for level in _ALARMING)]
    return (
        f"operator warnings and errors ({len(alarming)}, the first {lines // 2}):\n"
        + "\n".join(alarming[: lines // 2])
        + "\noperator log, last lines:\n"
        + "\n".join(own[-lines:])
    )


@pytest.fixture()
def run_operator(
    kube_cluster: KubeCluster,
) -> Callable[..., contextlib.AbstractContextManager[kopf.testing.KopfRunner]]:
    """`with run_operator("tests/x/op.py") as runner: …` — see `run_kopf` for the options."""
    return run_kopf


class KopfProcess:
    """`kopf run` as a child process (its own interpreter: real multi-operator peering)."""

    def __init__(self, args: Sequence[str], log_path: Path, env: Mapping[str, str]) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kopf", *args], stdout=self._log, stderr=subprocess.STDOUT, env=dict(env)
        )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_for_log(self, pattern: str, *, timeout: float = 20.0) -> str:
        def probe() -> str | None:
            found = re.search(pattern, self.log())
            return found.group(0) if found else None

        if self.process.poll() is not None:
            raise AssertionError(f"kopf exited with {self.process.returncode}:\n{self.log()}")
        found = wait_for(probe, timeout=timeout, interval=0.1, what=f"{pattern!r} in the operator log")
        assert found is not None
        return found

    def stop(self, timeout: float = 15.0) -> int:
        """Graceful stop (SIGINT, like Ctrl+C), then kill if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


@pytest.fixture()
def kopf_process(kube_cluster: KubeCluster, tmp_path: Path) -> Iterator[Callable[..., KopfProcess]]:
    """`kopf_process("run", "-A", "op.py", env={"X": "1"})` starts one; all are stopped after the test."""
    started: list[KopfProcess] = []

    def start(*args: str, env: Mapping[str, str] | None = None) -> KopfProcess:
        environment = {**os.environ, "KUBECONFIG": str(kube_cluster.kubeconfig), **(env or {})}
        process = KopfProcess(args, tmp_path / f"kopf-{len(started)}.log", environment)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
