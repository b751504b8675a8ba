"""bench/inferencex_deployments.py: what InferenceX published about the runs the dumps leave incomplete."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

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


def _r1_aggregated(concurrency: str, dump: str, measured: str, **values: str) -> dict[str, str]:
    """A DeepSeek-R1 FP8 row the dumps file as aggregated, at `concurrency` clients."""
    source = f"source_file={dump}.csv; silicon_concurrency={concurrency}; measured={measured}"
    defaults = {"model_path": "deepseek-ai/DeepSeek-R1", "precision": "fp8", "mode": "agg", "isl": "1024"}
    return silicon_row(**{"backend": "sglang", **defaults, "osl": "1024", "silicon_data_source": source, **values})


def _filed(isl: str, concurrency: str, **values: str) -> dict[str, str]:
    return _r1_aggregated(
        concurrency, "2026-04-06", "2025-11-17", **{"system": "gb200", "isl": isl, "tp_size": "72", **values}
    )


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


# dsr1-fp8-b200-sglang and its -mtp twin as nvidia-master.yaml listed them in March 2026 (abridged, 1k/1k only).
_R1_FP8_B200 = {
    "model": "deepseek-ai/DeepSeek-R1-0528",
    "model-prefix": "dsr1",
    "runner": "b200",
    "precision": "fp8",
    "framework": "sglang",
}
SINGLE_NODE_CONFIG = {
    "dsr1-fp8-b200-sglang": {
        **_R1_FP8_B200,
        "seq-len-configs": [
            {"isl": 1024, "osl": 1024, "search-space": [{"tp": 8, "ep": 1, "conc-start": 4, "conc-end": 64}]}
        ],
    },
    "dsr1-fp8-b200-sglang-mtp": {
        **_R1_FP8_B200,
        "seq-len-configs": [
            {
                "isl": 1024,
                "osl": 1024,
                "search-space": [{"tp": 8, "ep": 1, "conc-start": 4, "conc-end": 384, "spec-decoding": "mtp"}],
            }
        ],
    },
    "dsr1-fp8-b200-dynamo-sglang": {"framework": "dynamo-sglang", "disagg": True, "precision": "fp8"},
}

# The draft lines of benchmarks/single_node/dsr1_fp8_b200_mtp.sh at InferenceX@12ba0ae07.
MTP_SCRIPT = """
# MTP (Multi-Token Prediction) Config - EAGLE speculative decoding
SPECULATIVE_NUM_STEPS=2
SPECULATIVE_DRAFT_TOKENS=3
SPECULATIVE_EAGLE_TOPK=1
"""


def _aggregated(concurrency: str, **values: str) -> dict[str, str]:
    b200 = {"id": f"r1-c{concurrency}", "system": "b200_sxm", "tp_size": "8", "moe_ep_size": "1"}
    measured = {"silicon_ttft_ms": "183.18", "silicon_tpot_ms": "8.75996"}
    return _r1_aggregated(concurrency, "2026-03-25", "2026-03-25", **{**b200, **measured, **values})


def test_a_sweep_doubles_from_its_start_and_ends_at_its_end() -> None:
    script = _script()
    assert script._concurrencies({"conc-start": 4, "conc-end": 64}) == [4, 8, 16, 32, 64]
    assert script._concurrencies({"conc-start": 4, "conc-end": 384}) == [4, 8, 16, 32, 64, 128, 256, 384]
    assert script._concurrencies({"conc-list": [1, 3]}) == [1, 3]
    assert script._concurrencies({"conc-start": 8, "conc-end": 4}) == []


def test_an_aggregated_point_run_with_and_without_mtp_lists_both_runs() -> None:
    script = _script()
    plain_sweep = frozenset((1024, 1024, concurrency) for concurrency in (4, 8, 16, 32, 64))
    mtp_sweep = plain_sweep | {(1024, 1024, concurrency) for concurrency in (128, 256, 384)}
    both = [("", "dsr1-fp8-b200-sglang", plain_sweep), ("mtp", "dsr1-fp8-b200-sglang-mtp", mtp_sweep)]
    assert script.published_aggregated(_aggregated("16"), SINGLE_NODE_CONFIG) == both
    # Above 64 clients only the MTP run swept the point; at 5 clients nothing did.
    assert script.published_aggregated(_aggregated("128"), SINGLE_NODE_CONFIG) == [both[1]]
    assert script.published_aggregated(_aggregated("5"), SINGLE_NODE_CONFIG) == []
    # Another TP, GPU or precision is another run.
    assert script.published_aggregated(_aggregated("16", tp_size="4"), SINGLE_NODE_CONFIG) == []
    assert script.published_aggregated(_aggregated("16", system="h200_sxm"), SINGLE_NODE_CONFIG) == []
    assert script.published_aggregated(_aggregated("16", precision="fp4"), SINGLE_NODE_CONFIG) == []


def test_an_mtp_run_takes_its_draft_from_the_benchmark_script_it_ran() -> None:
    script = _script()
    entry = SINGLE_NODE_CONFIG["dsr1-fp8-b200-sglang-mtp"]
    assert script.benchmark_script(entry, "mtp") == "benchmarks/single_node/dsr1_fp8_b200_mtp.sh"
    assert script.benchmark_script(entry, "") == "benchmarks/single_node/dsr1_fp8_b200.sh"
    assert script.draft_settings(MTP_SCRIPT) == {
        "speculative_num_steps": "2",
        "speculative_eagle_topk": "1",
        "speculative_num_draft_tokens": "3",
    }
    assert set(script.draft_settings("python3 -m sglang.launch_server").values()) == {""}


def test_the_same_measurement_filed_under_the_other_name_gets_the_same_alternatives() -> None:
    script = _script()
    r1 = _aggregated("4")
    v3 = _aggregated("4", id="v3-twin", model_path="deepseek-ai/DeepSeek-V3")
    other = _aggregated("4", id="other", silicon_tpot_ms="6.70325")
    line = {"id": r1["id"], "speculative_decoding": "mtp", "source": "InferenceX@12ba0ae07 dsr1-fp8-b200-sglang-mtp"}
    out = script.with_twins([line], [r1, v3, other])
    assert [(copy["id"], copy["source"]) for copy in out] == [
        (r1["id"], line["source"]),
        ("v3-twin", f"{line['source']} (twin {r1['id']})"),
    ]


def _dumped(concurrency: str, tpot: str, **values: str) -> dict[str, str]:
    """A row of database dump config 87, which files DeepSeek-R1 runs as DeepSeek-V3."""
    source = f"db-dump/2026-04-27; config_id=87; silicon_concurrency={concurrency}; measured=2026-04-17"
    v3 = {"id": f"v3-c{concurrency}", "model_path": "deepseek-ai/DeepSeek-V3", "silicon_data_source": source}
    return _aggregated(concurrency, **{**v3, "silicon_tpot_ms": tpot, **values})


def test_a_dumped_sweep_that_stops_where_the_plain_entry_stops_tells_which_run_each_row_is() -> None:
    script = _script()
    plain = frozenset((1024, 1024, concurrency) for concurrency in (4, 8))
    runs = {"": plain, "mtp": plain | {(1024, 1024, 16)}}
    dumped = [_dumped("4", "8.75996"), _dumped("8", "10.807")]
    # The files hold both runs at 4 clients (the plain one printed with one digit more) and the MTP run alone at 16.
    plain_c4 = _aggregated("4", id="r1-plain", silicon_tpot_ms="8.759960000001")
    mtp_c4 = _aggregated("4", id="r1-mtp", silicon_tpot_ms="6.70325")
    mtp_c16 = _aggregated("16", id="r1-c16")
    rows = [*dumped, plain_c4, mtp_c4, mtp_c16]
    sweeps = {"r1-plain": runs, "r1-mtp": runs, "r1-c16": {"mtp": runs["mtp"]}}
    # (v3-c8 ran at a point MTP did not reach: it has no alternatives, and nothing to resolve.)
    assert script.identified_runs(rows, sweeps) == {
        "v3-c4": "",
        "r1-plain": "",
        "r1-mtp": "mtp",
        "r1-c16": "mtp",
    }
    # A dumped sweep that also ran a point only MTP swept says nothing: the pair stays unknown.
    extra = _dumped("16", "12.0")
    assert script.identified_runs([*rows, extra], sweeps) == {"r1-c16": "mtp"}
    # What the script writes: nothing for a plain run, the MTP line for an MTP one, every line where unknown.
    lines = [{"id": "r", "speculative_decoding": run} for run in ("", "mtp")]
    assert [script._kept(line, "") for line in lines] == [False, False]
    assert [script._kept(line, "mtp") for line in lines] == [False, True]
    assert [script._kept(line, None) for line in lines] == [True, True]


def _pd_space(speculative: str, concurrencies: list[int], recipe: str) -> dict[str, object]:
    """A P/D search-space entry: one TP4 prefill worker, two TP4 decode workers."""
    role = {"tp": 4, "ep": 1, "dp-attn": False}
    prefill = {**role, "num-worker": 1, "additional-settings": [f"CONFIG_FILE={recipe}"]}
    return {
        "spec-decoding": speculative,
        "conc-list": concurrencies,
        "prefill": prefill,
        "decode": {**role, "num-worker": 2},
    }


# dsr1-fp4-gb200-dynamo-sglang as nvidia-master.yaml listed it in March 2026 (abridged; the MTP entry is made up to
# share a point with the plain one). Its plain entries say `spec-decoding: "none"`.
PD_CONFIG = {
    "dsr1-fp4-gb200-dynamo-sglang": {
        "model": "nvidia/DeepSeek-R1-0528-NVFP4-v2",
        "runner": "gb200",
        "precision": "fp4",
        "framework": "dynamo-sglang",
        "disagg": True,
        "seq-len-configs": [
            {
                "isl": 1024,
                "osl": 1024,
                "search-space": [
                    _pd_space("none", [4, 8, 32], "recipes/gb200-fp4/1k1k/low-latency.yaml"),
                    _pd_space("mtp", [32, 64], "recipes/gb200-fp4/1k1k/low-latency-mtp.yaml"),
                ],
            }
        ],
    }
}


def _pd_row(concurrency: str) -> dict[str, str]:
    layout = {"prefill_tp_size": "4", "prefill_moe_ep_size": "1", "decode_tp_size": "4", "decode_moe_ep_size": "1"}
    values = {"system": "gb200", "precision": "fp4", "mode": "disagg", **layout}
    return _r1_aggregated(concurrency, "2026-03-25", "2026-03-25", **values)


def test_an_entry_whose_speculative_decoding_is_none_ran_without_it() -> None:
    script = _script()
    plain_only = script.published(_pd_row("8"), PD_CONFIG)
    assert [speculative for _, _, speculative, _ in plain_only] == [False]
    assert script.resolve(plain_only) == plain_only[0]  # one deployment, without MTP: the row's
    both = script.published(_pd_row("32"), PD_CONFIG)
    assert [speculative for _, _, speculative, _ in both] == [False, True]  # same layout, two runs
    assert script.resolve(both) is None
    mtp_only = script.published(_pd_row("64"), PD_CONFIG)
    assert [speculative for _, _, speculative, _ in mtp_only] == [True]
    assert script.resolve(mtp_only) is None
    assert script._speculative({"spec-decoding": "none"}) == script._speculative({}) == ""


# The server flags of srt-slurm's recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-1p2d.yaml (abridged).
RECIPE = """
backend:
  sglang_config:
    prefill:
      mem-fraction-static: 0.85
      chunked-prefill-size: 32768
      max-running-requests: 512
    decode:
      mem-fraction-static: 0.85
      chunked-prefill-size: 32768
      max-running-requests: 512
      speculative-algorithm: "EAGLE"
      speculative-num-steps: 1
      speculative-eagle-topk: 1
      speculative-num-draft-tokens: 2
"""


def _git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    return subprocess.run(["git", "-C", str(repo), *identity, *args], capture_output=True, text=True, check=True).stdout


def test_a_p_d_deployment_reads_the_recipe_its_runners_cloned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script()
    recipe = "recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-1p2d.yaml"
    (tmp_path / recipe).parent.mkdir(parents=True)
    (tmp_path / recipe).write_text(RECIPE)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "recipe")
    cloned = _git(tmp_path, "rev-parse", "HEAD").strip()
    (tmp_path / recipe).write_text(RECIPE.replace("512", "1024"))  # a later change the run did not see
    _git(tmp_path, "commit", "-q", "-am", "later")
    monkeypatch.setitem(script.SRT_SLURM_COMMITS, "593fb431a", cloned)
    source = f"dsr1-fp8-b200-dynamo-sglang-mtp CONFIG_FILE={recipe}"
    settings = script.recipe_settings(tmp_path, source, "593fb431abcdef")
    assert settings["recipe"] == f"srt-slurm@{cloned[:9]} {recipe}"
    assert [settings[f"{role}_max_running_requests"] for role in ("prefill", "decode")] == ["512", "512"]
    assert settings["decode_chunked_prefill_size"] == "32768" and settings["decode_mem_fraction_static"] == "0.85"
    assert [settings[column] for column in script.DRAFT_COLUMNS] == ["1", "1", "2"]
    # No recipe named, a run whose clone is not known, or a recipe missing there: nothing stated.
    assert set(script.recipe_settings(tmp_path, "dsr1-fp8-b200-dynamo-sglang", "593fb431a").values()) == {""}
    assert set(script.recipe_settings(tmp_path, source, "000000000").values()) == {""}
    assert set(script.recipe_settings(tmp_path, "key CONFIG_FILE=recipes/none.yaml", "593fb431a").values()) == {""}
    # A recipe without a draft states none.
    assert script.recipe_flags({"decode": {"max-running-requests": 64}})["decode_max_running_requests"] == "64"
    assert "speculative_num_steps" not in script.recipe_flags({"decode": {"max-running-requests": 64}})
