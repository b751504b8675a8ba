"""Properties of the rendered fleet that the golden files show but do not explain."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from frontier_operator.perf.types import Role, RoleDeployment, ServingConfig
from frontier_operator.render import OwnerRef, RenderRequest, Variant, render_fleet, resolve_layout
from frontier_operator.render.names import MAX_OBJECT_NAME, object_name, revision_hash, service_name
from frontier_operator.render.pods import grace_seconds
from frontier_operator.render.traffic import service_share
from frontier_operator.render.yaml_dump import dump, dump_all
from render_support import golden_cases, make_target, pool_document, target_document, worker


def fleet(
    replicas: int = 1,
    *,
    gpu: str = "H200",
    tp: int = 4,
    rdma: bool = False,
    serving: dict[str, Any] | None = None,
    name: str = "chat",
    pd: bool = False,
) -> list[dict[str, Any]]:
    document = target_document("Llama-3.1-70B-Instruct", pool_document(gpu, rdma=rdma), serving=serving, name=name)
    w = worker(gpu, "bf16", "auto", tp)
    roles = (
        (RoleDeployment(Role.PREFILL, w, 1), RoleDeployment(Role.DECODE, w, replicas))
        if pd
        else (RoleDeployment(Role.UNIFIED, w, replicas),)
    )
    config = ServingConfig("Llama-3.1-70B-Instruct", roles)
    return render_fleet(RenderRequest(target=make_target(document), config=config, pool_name="pool"))


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def engine_container(workload: dict[str, Any], template: str = "leaderTemplate") -> dict[str, Any]:
    spec = workload["spec"]
    pod = spec["template"] if workload["kind"] == "Deployment" else spec["leaderWorkerTemplate"][template]
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


@pytest.mark.parametrize("value", ["on", "off", "yes", "No", "y", "N", "true", "null", "~", "1e3", "0755", "12", ""])
def test_bool_like_and_number_like_strings_stay_strings(value: str) -> None:
    text = dump({"value": value})
    assert yaml.safe_load(text) == {"value": value}
    assert '"' in text


def test_plain_strings_stay_plain_and_no_aliases() -> None:
    shared = {"port": "http"}
    text = dump_all([{"a": "sglang", "b": shared, "c": shared}])
    assert text == "---\na: sglang\nb:\n  port: http\nc:\n  port: http\n"


def test_single_replica_needs_no_router_and_serves_from_the_engine() -> None:
    objects = fleet(replicas=1)
    assert [obj["kind"] for obj in objects] == ["Service", "Deployment", "PodDisruptionBudget", "PodMonitor"]
    labels = of_kind(objects, "Deployment")[0]["spec"]["template"]["metadata"]["labels"]
    assert labels["frontier.dev/entrypoint"] == "true"


def test_several_replicas_get_a_cache_aware_router_in_front() -> None:
    objects = fleet(replicas=3)
    engine, router = of_kind(objects, "Deployment")
    assert "frontier.dev/entrypoint" not in engine["spec"]["template"]["metadata"]["labels"]
    assert router["spec"]["template"]["metadata"]["labels"]["frontier.dev/entrypoint"] == "true"
    args = engine_container(router)["args"]
    assert args[args.index("--policy") + 1] == "cache_aware"
    assert {obj["kind"] for obj in objects} >= {"ServiceAccount", "Role", "RoleBinding"}


def test_stable_addresses_need_no_permissions_and_use_leader_names() -> None:
    objects = fleet(replicas=2, serving={"router": {"workerDiscovery": "stable-addresses"}})
    assert not of_kind(objects, "Role")
    (lws,) = of_kind(objects, "LeaderWorkerSet")
    router = of_kind(objects, "Deployment")[0]
    args = engine_container(router)["args"]
    name = lws["metadata"]["name"]
    assert f"http://{name}-1.{name}.serving.svc:30000" in args
    assert router["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_multi_node_replica_is_a_leader_worker_set_with_rank_wiring() -> None:
    (lws,) = of_kind(fleet(tp=16, rdma=True), "LeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
    args = engine_container(lws)["args"]
    assert args[args.index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
    assert args[args.index("--dist-init-addr") + 1] == "$(LWS_LEADER_ADDRESS):20000"
    worker_container = engine_container(lws, "workerTemplate")
    assert worker_container["args"] == args
    assert worker_container["readinessProbe"]["httpGet"]["path"] == "/ping"
    assert engine_container(lws)["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert "frontier.dev/leader" not in template["workerTemplate"]["metadata"]["labels"]
    resources = engine_container(lws)["resources"]["limits"]
    assert resources["nvidia.com/gpu"] == 8
    assert resources["rdma/ib"] == 1
    assert engine_container(lws)["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]


def test_amd_pool_gets_the_rocm_image_and_amd_gpus() -> None:
    container = engine_container(of_kind(fleet(gpu="MI300X"), "Deployment")[0])
    assert "rocm" in container["image"]
    assert container["resources"]["limits"]["amd.com/gpu"] == 4
    assert "nvidia.com/gpu" not in container["resources"]["limits"]


def test_no_rdma_means_mooncake_over_tcp_and_no_rdma_devices() -> None:
    objects = fleet(pd=True)
    for workload in of_kind(objects, "Deployment")[:2]:
        container = engine_container(workload)
        args = container["args"]
        assert args[args.index("--disaggregation-transfer-backend") + 1] == "mooncake_tcp"
        assert "rdma/ib" not in container["resources"]["limits"]
        assert "add" not in container["securityContext"]["capabilities"]


def test_pd_pins_one_page_size_and_announces_the_bootstrap_port() -> None:
    prefill, decode = of_kind(fleet(pd=True, gpu="B200"), "Deployment")[:2]
    pages = [
        engine_container(w)["args"][engine_container(w)["args"].index("--page-size") + 1] for w in (prefill, decode)
    ]
    assert pages == ["64", "64"]
    assert prefill["spec"]["template"]["metadata"]["annotations"] == {"sglang.ai/bootstrap-port": "8998"}
    assert "annotations" not in decode["spec"]["template"]["metadata"]


def test_hf_token_comes_from_the_secret_and_is_never_inline() -> None:
    objects = fleet(serving={"hfTokenSecretRef": {"name": "hf", "key": "token"}})
    env = engine_container(of_kind(objects, "Deployment")[0])["env"]
    token = next(variable for variable in env if variable["name"] == "HF_TOKEN")
    assert token == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}


def test_owner_references_and_variant_follow_the_request() -> None:
    case = golden_cases()[0]
    owner = OwnerRef("frontier.dev/v1alpha1", "FrontierTarget", "t", "uid-1")
    objects = render_fleet(replace(case.request(), owner=owner, variant=Variant.CANARY))
    for obj in objects:
        assert obj["metadata"]["ownerReferences"] == [owner.to_dict()]
        if "frontier.dev/revision" in obj["metadata"]["labels"]:
            assert obj["metadata"]["labels"]["frontier.dev/variant"] == "canary"
    assert all("ownerReferences" not in obj["metadata"] for obj in render_fleet(case.request()))


def test_revision_changes_with_the_engine_config_but_not_with_replicas() -> None:
    case = next(case for case in golden_cases() if case.name == "llama-70b-chat")
    request = case.request()
    (role,) = request.config.roles
    scaled = replace(request, config=replace(request.config, roles=(replace(role, replicas=5),)))
    batch = replace(
        request,
        config=replace(request.config, roles=(replace(role, worker=replace(role.worker, max_running_requests=7)),)),
    )
    assert resolve_layout(scaled).revision == resolve_layout(request).revision
    assert resolve_layout(batch).revision != resolve_layout(request).revision
    assert revision_hash("a", {"unified": ["x"]}) != revision_hash("b", {"unified": ["x"]})


def test_long_names_are_shortened_deterministically_and_stay_distinct() -> None:
    long_a, long_b = "a" * 200 + "-one", "a" * 200 + "-two"
    names = {object_name(long_a, "0123abcd", "prefill"), object_name(long_b, "0123abcd", "prefill")}
    assert len(names) == 2
    assert all(len(name) <= MAX_OBJECT_NAME and name.endswith("-0123abcd-prefill") for name in names)
    assert service_name("7b.chat") == "ft-7b-chat"
    objects = fleet(name="x" * 120 + ".example")
    assert all(len(value) <= 63 for obj in objects for value in obj["metadata"]["labels"].values())


def test_grace_period_covers_the_longest_allowed_generation() -> None:
    # 2 s TTFT bound + 4k output tokens at the 30 ms TPOT bound + 15 s preStop = 140 s.
    target = make_target(target_document("Llama-3.1-70B-Instruct", pool_document("H200", rdma=False)))
    assert grace_seconds(target.spec) == 2 + 4000 * 0.03 + 15


# --------------------------------------------------------------------------------------- canary share


def _entry_pods(objects: list[dict[str, Any]]) -> int:
    """Pods the target's Service selects: Deployments whose pods carry the entry-point label."""
    selector = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "chat")["spec"][
        "selector"
    ]
    return sum(
        int(o["spec"]["replicas"])
        for o in of_kind(objects, "Deployment")
        if selector.items() <= o["spec"]["template"]["metadata"]["labels"].items()
    )


@pytest.mark.parametrize(
    ("stable_replicas", "canary_replicas", "router_replicas", "pd"),
    [(1, 1, 1, False), (3, 1, 1, False), (3, 1, 3, False), (3, 2, 3, False), (1, 2, 2, False), (2, 1, 2, True)],
)
def test_the_canary_share_the_loop_plans_with_is_the_one_the_rendered_service_gives(
    stable_replicas: int, canary_replicas: int, router_replicas: int, pd: bool
) -> None:
    serving = {"router": {"replicas": router_replicas}}
    stable = fleet(stable_replicas, serving=serving, rdma=pd, pd=pd)
    canary = fleet(canary_replicas, serving=serving, rdma=pd, pd=pd)
    mine, theirs = _entry_pods(canary), _entry_pods(stable)
    assert mine >= 1 and theirs >= 1

    def config(replicas: int) -> ServingConfig:
        w = worker("H200", "bf16", "auto", 4)
        roles = (
            (RoleDeployment(Role.PREFILL, w, 1), RoleDeployment(Role.DECODE, w, replicas))
            if pd
            else (RoleDeployment(Role.UNIFIED, w, replicas),)
        )
        return ServingConfig("Llama-3.1-70B-Instruct", roles)

    share = service_share(config(stable_replicas), config(canary_replicas), router_replicas)
    assert share == pytest.approx(mine / (mine + theirs))
