import json

import pytest

from frontier_operator.perf.codec import ConfigDecodeError, config_from_dict, config_to_dict
from frontier_operator.perf.types import (
    MoeA2ABackend,
    Role,
    RoleDeployment,
    ServingConfig,
    Speculative,
    SpeculativeAlgorithm,
    WorkerConfig,
)

PREFILL = WorkerConfig("H200", 8, "fp8", "fp8_e4m3", tp=8, max_running_requests=16, chunked_prefill_size=16384)
DECODE = WorkerConfig(
    "H200",
    8,
    "fp8",
    "fp8_e4m3",
    tp=16,
    max_running_requests=512,
    chunked_prefill_size=8192,
    attention_dp=16,
    ep=16,
    moe_a2a_backend=MoeA2ABackend.DEEPEP,
    speculative=Speculative(SpeculativeAlgorithm.NEXTN, 3, 1, 4),
)
DISAGGREGATED = ServingConfig(
    "GLM-5", (RoleDeployment(Role.PREFILL, PREFILL, 2), RoleDeployment(Role.DECODE, DECODE, 1)), "mooncake"
)


def test_a_config_survives_json() -> None:
    assert config_from_dict(json.loads(json.dumps(config_to_dict(DISAGGREGATED)))) == DISAGGREGATED


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d["roles"][0]["worker"].pop("tp"), "config.roles[0].worker.tp"),
        (lambda d: d["roles"][1]["worker"].update(tp="16"), "config.roles[1].worker.tp"),
        (lambda d: d["roles"][1]["worker"].update(ep=0), "config.roles[1].worker.ep"),
        (lambda d: d["roles"][0].update(role="router"), "config.roles[0].role"),
        (lambda d: d["roles"][0]["worker"].update(tensorParallel=8), "config.roles[0].worker.tensorParallel"),
        (lambda d: d["roles"][1]["worker"]["speculative"].update(algorithm="MTP"), "speculative.algorithm"),
        (lambda d: d.update(roles=[]), "config.roles"),
    ],
)
def test_broken_plan_files_name_the_bad_key(mutate: object, path: str) -> None:
    data = config_to_dict(DISAGGREGATED)
    mutate(data)  # type: ignore[operator]
    with pytest.raises(ConfigDecodeError) as caught:
        config_from_dict(data)
    assert caught.value.path.endswith(path)
