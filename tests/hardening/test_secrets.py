"""A planted Hugging Face token never leaves its Secret: not into status, Events, the operator's logs (at
--verbose, Kopf's most talkative level) or any object the operator writes; the engine pods reference
the Secret with `secretKeyRef`, and the operator never even reads Secrets (its ClusterRole grants none).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import kubernetes

from hardening_support import ready_when_marked
from k8s_standin.fixtures import request_json, wait_for, wait_for_object
from operator_support import FT, create, engine_deployments, has_condition, target_document

HF_TOKEN = "hf_PlantedTokenDoNotLeak0123456789abcdef"
API_KEY = "sk-planted-api-key-DoNotLeak-9876543210"
OPERATOR_ENV = {"FRONTIER_RECHECK_SECONDS": "1", "FRONTIER_METRICS_PORT": "0", "FRONTIER_RETRY_SECONDS": "1"}
# Everything the operator writes or could echo, by API path prefix and plural.
WRITTEN = {
    "frontiertargets": "/apis/frontier.dev/v1alpha1",
    "events": "/api/v1",
    "deployments": "/apis/apps/v1",
    "services": "/api/v1",
    "serviceaccounts": "/api/v1",
    "roles": "/apis/rbac.authorization.k8s.io/v1",
    "rolebindings": "/apis/rbac.authorization.k8s.io/v1",
    "poddisruptionbudgets": "/apis/policy/v1",
    "leaderworkersets": "/apis/leaderworkerset.x-k8s.io/v1",
    "configmaps": "/api/v1",
}


def _secret(api: kubernetes.client.ApiClient, namespace: str, name: str, key: str, value: str) -> None:
    kubernetes.client.CoreV1Api(api).create_namespaced_secret(
        namespace, {"metadata": {"name": name}, "type": "Opaque", "stringData": {key: value}}
    )


def _with_secrets(name: str, gpu: str = "H100") -> Any:
    def mutate(document: dict[str, Any]) -> None:
        document["metadata"]["name"] = name
        document["spec"]["hardware"]["pools"][0]["gpu"] = gpu
        document["spec"]["serving"] = {
            "hfTokenSecretRef": {"name": "hf-token"},
            "env": [{"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "api-keys", "key": "openai"}}}],
        }

    return mutate


def _leaks(text: str) -> list[str]:
    forms = {
        "token": HF_TOKEN,
        "api key": API_KEY,
        "token (base64)": base64.b64encode(HF_TOKEN.encode()).decode(),
        "api key (base64)": base64.b64encode(API_KEY.encode()).decode(),
        "token (fragment)": HF_TOKEN[3:20],
    }
    return [what for what, form in forms.items() if form in text]


def test_a_planted_token_stays_in_its_secret(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, standin: Any, kopf_process: Any
) -> None:
    _secret(kube_api, namespace, "hf-token", "token", HF_TOKEN)
    _secret(kube_api, namespace, "api-keys", "openai", API_KEY)
    operator = kopf_process(
        "run", "--standalone", "-n", namespace, "--verbose", "-m", "frontier_operator.main", env=OPERATOR_ENV
    )
    create(kube_api, target_document("llama-70b-chat", namespace, _with_secrets("gated")))
    create(kube_api, target_document("llama-70b-chat", namespace, _with_secrets("refused", gpu="H900")))
    create(kube_api, target_document("kimi-k25-batch", namespace, _with_secrets("with-router")))  # router, Role

    wait_for(lambda: ready_when_marked(kube_api, namespace, "gated"), timeout=60, what="gated Ready")
    wait_for(lambda: ready_when_marked(kube_api, namespace, "with-router"), timeout=60, what="with-router Ready")
    wait_for_object(kube_api, *FT, namespace, "refused", has_condition("PlanFeasible", "False", "InvalidSpec"))
    operator.stop()

    # The pods reference the Secrets; no value is inlined.
    for target in ("gated", "with-router"):
        for deployment in engine_deployments(kube_api, namespace, target):
            (container, *_) = deployment["spec"]["template"]["spec"]["containers"]
            env = {variable["name"]: variable for variable in container["env"]}
            assert env["HF_TOKEN"] == {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
            }
            assert env["OPENAI_API_KEY"]["valueFrom"] == {"secretKeyRef": {"name": "api-keys", "key": "openai"}}
            assert "value" not in env["HF_TOKEN"] and "value" not in env["OPENAI_API_KEY"]

    # Nowhere else: every object of every kind the operator writes or echoes, and its log.
    for plural, prefix in WRITTEN.items():
        status, body = request_json(kube_api, "GET", f"{prefix}/namespaces/{namespace}/{plural}")
        if status == 404:
            continue
        assert status == 200, body
        assert body["items"] or plural in ("roles", "rolebindings", "leaderworkersets", "configmaps", "serviceaccounts")
        assert _leaks(json.dumps(body)) == [], f"{plural} carry a planted secret"
    log = operator.log()
    assert "gated" in log and "Handler 'reconcile_on_change' succeeded" in log  # the log is the real one
    assert _leaks(log) == [], "the operator log carries a planted secret"

    # The operator never asked for a Secret: nothing to leak from.
    by_operator = [r for r in standin.requests.find() if r.user_agent.startswith(("frontier-operator/", "kopf/"))]
    assert by_operator and not [r for r in by_operator if r.resource == "secrets"]
