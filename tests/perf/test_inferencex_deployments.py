"""bench/inferencex_deployments.py: the GB200 rack runs that the dumps file as aggregated."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from perf_support import silicon_row

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "inferencex_deployments.py"

# The Dynamo-SGLang branch of InferenceX's runners/launch_gb200-nv.sh as it stood in November 2025 (abridged).
LAUNCH = """
else # if statement at the top - search for "FRAMEWORK_DIFF_IF_STATEMENT #2"
    # Launch jobs based on ISL/OSL
    if [ "$ISL" = "1024" ] && [ "$OSL" = "1024" ]; then
        concurrency_list="1024x2048x4096x4608x4864x4992x5120x5376x5632x6144x8192"
        bash ./submit_disagg.sh 6 3 12 1 8 $ISL $OSL $concurrency_list inf
    elif [ "$ISL" = "8192" ] && [ "$OSL" = "1024" ]; then
        concurrency_list="128x256x384x448x512x576x1024x2048x4096"
        bash ./submit_disagg.sh 12 6 6 1 8 $ISL $OSL $concurrency_list inf
    else
"""


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("inferencex_deployments", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _filed(isl: str, concurrency: str, **values: str) -> dict[str, str]:
    row = silicon_row(
        backend="sglang",
        model_path="deepseek-ai/DeepSeek-R1",
        system="gb200",
        precision="fp8",
        mode="agg",
        isl=isl,
        osl="1024",
        tp_size="72",
        silicon_data_source=f"source_file=2026-04-06.csv; silicon_concurrency={concurrency}; measured=2025-11-17",
    )
    row.update(values)
    return row


def test_a_rack_run_is_the_launch_scripts_deployment_for_its_lengths_and_concurrency() -> None:
    script = _script()
    # 1k/1k: 6 prefill trays for 3 workers, 12 decode trays for 1, four GPUs a tray: 3 × DEP8 → DEP48.
    assert script.launched(_filed("1024", "4992"), LAUNCH) == (
        (3, 8, 8, True),
        (1, 48, 48, True),
        False,
        "runners/launch_gb200-nv.sh submit_disagg.sh 6 3 12 1",
    )
    prefill, decode, _, _ = script.launched(_filed("8192", "448"), LAUNCH)
    assert (prefill, decode) == ((6, 8, 8, True), (1, 24, 24, True))
    line = script._line("row", "450d834a9abc", script.launched(_filed("8192", "448"), LAUNCH))
    assert [line[c] for c in script.DEPLOYMENT_COLUMNS] == ["6", "1", "8", "1", "8", "1", "1", "24", "1", "24"]


def test_a_row_the_launch_script_did_not_run_is_left_alone() -> None:
    script = _script()
    assert script.launched(_filed("1024", "3000"), LAUNCH) is None  # not in the concurrency list
    assert script.launched(_filed("2048", "1024"), LAUNCH) is None  # no run of these lengths
    assert script.launched(_filed("1024", "1024", tp_size="8"), LAUNCH) is None  # not the rack's 72 GPUs
    assert script.launched(_filed("1024", "1024", precision="fp4"), LAUNCH) is None  # the branch loads FP8
    assert script.launched(_filed("1024", "1024", system="b200_sxm"), LAUNCH) is None
