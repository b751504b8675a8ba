"""Parsing silicon CSV rows into SGLang configurations: the documented normalisations."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.fitting import case_residual, fittable
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.silicon import (
    DEPLOYMENT_COLUMNS,
    alternatives_of,
    campaign_of,
    complete_deployments,
    concurrency_of,
    describe_deployment,
    flag_runs_slower_than_weaker_gpus,
    outclasses,
    parse_row,
    predict_case,
    predict_row,
    read_deployment_alternatives,
    read_deployment_supplement,
    read_rows,
)
from frontier_operator.perf.types import MoeA2ABackend, Role, Speculative, SpeculativeAlgorithm
from perf_support import silicon_row


def _row(**values: str) -> dict[str, str]:
    defaults = {"backend": "sglang", "isl": "1024", "osl": "1024", "silicon_ttft_ms": "100", "silicon_tpot_ms": "10"}
    return silicon_row(**(defaults | values))


def test_double_counted_tp_is_undone_for_aggregated_rows() -> None:
    row = _row(
        model_path="deepseek-ai/DeepSeek-R1",
        system="b200_sxm",
        precision="fp4",
        mode="agg",
        gemm_quant_mode="nvfp4",
        moe_quant_mode="nvfp4",
        batch_size="64",
        tp_size="16",
        pp_size="1",
        attention_dp_size="1",
        moe_tp_size="4",
        moe_ep_size="4",
        silicon_data_source="db-dump/2026-04-27; config_id=1",
    )
    case = parse_row(row)
    w = case.config.roles[0].worker
    assert (w.tp, w.ep, w.attention_dp) == (4, 4, 1)
    assert w.weight_format == "nvfp4" and w.kv_cache_format == "fp8_e4m3"
    # InferenceX lengths: uniform on [0.8, 1] x nominal.
    assert case.workload.input_tokens.mean == pytest.approx(0.9 * 1024)
    assert case.concurrency == 64


def test_attention_dp_ranks_count_as_gpus_and_wide_ep_uses_deepep() -> None:
    row = _row(
        model_path="deepseek-ai/DeepSeek-V3",
        system="gb200",
        precision="fp8",
        mode="disagg",
        gemm_quant_mode="fp8",
        moe_quant_mode="fp8_block",
        prefill_num_workers="5",
        prefill_tp_size="1",
        prefill_attention_dp_size="8",
        prefill_moe_tp_size="1",
        prefill_moe_ep_size="8",
        decode_batch_size="16",
        decode_num_workers="1",
        decode_tp_size="1",
        decode_attention_dp_size="32",
        decode_moe_tp_size="1",
        decode_moe_ep_size="32",
        silicon_data_source="db-dump/2026-04-27; config_id=505; silicon_concurrency=512",
    )
    case = parse_row(row)
    prefill, decode = case.config.role(Role.PREFILL), case.config.role(Role.DECODE)
    assert prefill is not None and decode is not None
    assert (prefill.replicas, prefill.worker.tp, prefill.worker.attention_dp, prefill.worker.ep) == (5, 8, 8, 8)
    assert (decode.replicas, decode.worker.tp, decode.worker.attention_dp) == (1, 32, 32)
    assert decode.worker.moe_a2a_backend is MoeA2ABackend.DEEPEP
    assert case.concurrency == 512 and case.fully_specified


def _gb200_pd_as_filed(system: str = "gb200", source: str = "db-dump/2026-04-27; config_id=236") -> dict[str, str]:
    """A GB200 P/D row as InferenceX's dump files its DEP8 prefill and DEP32 decode roles: MoE TP, no EP."""
    return _row(
        model_path="deepseek-ai/DeepSeek-R1",
        system=system,
        precision="fp8",
        mode="disagg",
        moe_quant_mode="fp8_block",
        prefill_num_workers="2",
        prefill_tp_size="1",
        prefill_attention_dp_size="8",
        prefill_moe_tp_size="8",
        prefill_moe_ep_size="1",
        decode_num_workers="1",
        decode_tp_size="1",
        decode_attention_dp_size="32",
        decode_moe_tp_size="32",
        decode_moe_ep_size="1",
        silicon_data_source=f"{source}; silicon_concurrency=4096",
    )


def test_gb200_expert_parallelism_filed_as_moe_tp_is_read_as_the_deepep_it_ran() -> None:
    case = parse_row(_gb200_pd_as_filed())
    prefill, decode = case.config.role(Role.PREFILL), case.config.role(Role.DECODE)
    assert prefill is not None and decode is not None
    assert (prefill.worker.tp, prefill.worker.attention_dp, prefill.worker.ep) == (8, 8, 8)
    assert (decode.worker.tp, decode.worker.attention_dp, decode.worker.ep) == (32, 32, 32)
    assert decode.worker.moe_a2a_backend is MoeA2ABackend.DEEPEP
    # Only InferenceX's GB200 P/D rows: the same encoding elsewhere keeps its MoE TP.
    for other in (_gb200_pd_as_filed(system="b200_sxm"), _gb200_pd_as_filed(source="aic-run")):
        kept = parse_row(other).config.role(Role.PREFILL)
        assert kept is not None and kept.worker.ep == 1 and kept.worker.moe_a2a_backend is MoeA2ABackend.NONE


def _b200_nvfp4_as_filed(measured: str, precision: str = "fp4") -> dict[str, str]:
    """An aggregated DeepSeek-R1 TP8 run on B200 as InferenceX's dump files it: MoE TP 8, EP 1."""
    return _row(
        model_path="deepseek-ai/DeepSeek-R1",
        system="b200_sxm",
        precision=precision,
        mode="agg",
        moe_quant_mode="nvfp4",
        tp_size="8",
        moe_tp_size="8",
        moe_ep_size="1",
        silicon_data_source=f"db-dump/2026-04-27; config_id=99; silicon_concurrency=64; measured={measured}T00:00:00Z",
    )


def test_b200_nvfp4_runs_launched_with_the_ep_moe_flag_are_read_as_expert_parallel() -> None:
    (worker,) = [r.worker for r in parse_row(_b200_nvfp4_as_filed("2025-11-10")).config.roles]
    assert (worker.tp, worker.ep, worker.moe_a2a_backend) == (8, 8, MoeA2ABackend.NONE)
    # After d8fe8f73e the configs state their EP; before 27f29acbe, and the FP8 script, had no flag.
    for other in (
        _b200_nvfp4_as_filed("2025-11-11"),
        _b200_nvfp4_as_filed("2025-09-20"),
        _b200_nvfp4_as_filed("2025-11-02", precision="fp8"),
    ):
        (kept,) = [r.worker for r in parse_row(other).config.roles]
        assert kept.ep == 1


def test_a_rows_campaign_is_its_engine_release_else_the_month_it_was_measured() -> None:
    assert campaign_of(_row(backend_version="0.5.9", silicon_data_source="measured=2026-03-02T00:00:00Z")) == "0.5.9"
    assert campaign_of(_b200_nvfp4_as_filed("2025-11-10")) == "measured 2025-11"
    assert campaign_of(_row()) == ""
    assert parse_row(_b200_nvfp4_as_filed("2025-11-02")).campaign == "measured 2025-11"


def test_missing_worker_counts_default_to_one_and_mark_the_row() -> None:
    row = _row(
        model_path="deepseek-ai/DeepSeek-R1",
        system="h200_sxm",
        precision="fp8",
        mode="disagg",
        moe_quant_mode="fp8_block",
        prefill_tp_size="8",
        decode_tp_size="8",
        silicon_data_source="source_file=2026-03-25.csv; silicon_concurrency=64",
    )
    case = parse_row(row)
    assert [r.replicas for r in case.config.roles] == [1, 1]
    assert not case.fully_specified


SILICON = Path(__file__).resolve().parents[3] / "shared" / "data" / "silicon" / "silicon_measurements.csv"
# DEP8 prefill ×2, DEP32 decode ×1, in the CSV's encoding (an attention-DP worker is tp 1 × attention_dp N).
_DEPLOYED = dict(zip(DEPLOYMENT_COLUMNS, ("2", "1", "8", "1", "8", "1", "1", "32", "1", "32"), strict=True))


def _r1_pd_row(row_id: str, tpot: str, **values: str) -> dict[str, str]:
    """A DeepSeek-R1 P/D row as the dumps file it: worker counts and attention-DP missing."""
    as_filed = {
        "id": row_id,
        "model_path": "deepseek-ai/DeepSeek-R1",
        "system": "gb200",
        "precision": "fp8",
        "mode": "disagg",
        "moe_quant_mode": "fp8_block",
        "prefill_tp_size": "8",
        "prefill_moe_ep_size": "8",
        "decode_tp_size": "32",
        "decode_moe_ep_size": "8",
        "silicon_tpot_ms": tpot,
        "silicon_data_source": "source_file=2026-03-25.csv; silicon_concurrency=2048",
    }
    return _row(**{**as_filed, **values})


def test_a_row_without_workers_takes_the_deployment_of_its_fully_specified_twin() -> None:
    twin = _r1_pd_row("v3-twin", "17.25", **_DEPLOYED)
    twin["model_path"] = "deepseek-ai/DeepSeek-V3"
    bare = _r1_pd_row("r1-bare", "17.25")
    other = _r1_pd_row("r1-other", "17.26")  # another measurement: no twin, not in the supplement
    completed = complete_deployments([twin, bare, other], supplement={})
    assert completed[0] is twin and completed[2] is other
    assert {c: completed[1][c] for c in DEPLOYMENT_COLUMNS} == _DEPLOYED
    assert completed[1]["deployment_source"] == "twin v3-twin"
    case = parse_row(completed[1])
    assert case.fully_specified and [r.replicas for r in case.config.roles] == [2, 1]
    assert case.config.roles[1].worker.attention_dp == 32
    assert not parse_row(completed[2]).fully_specified


def test_twins_that_disagree_complete_nothing_and_the_supplement_comes_second() -> None:
    first = _r1_pd_row("a", "17.25", **_DEPLOYED)
    second = _r1_pd_row("b", "17.25", **{**_DEPLOYED, "prefill_num_workers": "3"})
    bare = _r1_pd_row("bare", "17.25")
    assert "deployment_source" not in complete_deployments([first, second, bare], supplement={})[2]
    supplement = {"bare": {**_DEPLOYED, "decode_num_workers": "2", "source": "InferenceX@abc key"}}
    completed = complete_deployments([first, second, bare], supplement)[2]
    assert completed["decode_num_workers"] == "2" and completed["deployment_source"] == "InferenceX@abc key"
    # A twin, when there is one, wins over the supplement.
    assert complete_deployments([first, bare], supplement)[1]["decode_num_workers"] == "1"


@pytest.mark.skipif(not SILICON.is_file(), reason="shared silicon data not present")
def test_the_shipped_supplement_names_rows_without_workers_and_agrees_with_their_twins() -> None:
    rows = read_rows(SILICON)
    supplement = read_deployment_supplement()
    by_id = {row["id"]: row for row in rows}
    assert len(supplement) >= 50
    for row_id in supplement:
        assert row_id in by_id and not by_id[row_id]["decode_num_workers"]
    # The aggregated rows it lists are the GB200 rack runs: their TP is the deployment's GPU count.
    filed_as_aggregated = [by_id[row_id] for row_id in supplement if by_id[row_id]["mode"] == "agg"]
    assert len(filed_as_aggregated) == 20
    for row in filed_as_aggregated:
        case = parse_row(complete_deployments([row], supplement)[0])
        assert row["system"] == "gb200" and case.config.total_gpus == int(row["tp_size"]) == 72
    from_twins = complete_deployments(rows, supplement={})
    checked = 0
    for row in from_twins:
        if row.get("deployment_source", "").startswith("twin") and row["id"] in supplement:
            checked += 1
            assert {c: row[c] for c in DEPLOYMENT_COLUMNS} == {c: supplement[row["id"]][c] for c in DEPLOYMENT_COLUMNS}
    assert checked >= 40  # the two sources overlap on enough rows for the check to mean something


def test_an_aggregated_row_the_supplement_lists_is_read_as_the_p_d_run_it_was() -> None:
    filed = _row(
        id="gb200-rack",
        model_path="deepseek-ai/DeepSeek-R1",
        system="gb200",
        precision="fp8",
        mode="agg",
        moe_quant_mode="fp8_block",
        batch_size="2048",
        tp_size="72",
        moe_tp_size="72",
        moe_ep_size="1",
    )
    # Three DEP8 prefill workers and one DEP48 decode worker: the 72 GPUs the row calls TP.
    run = dict(zip(DEPLOYMENT_COLUMNS, ("3", "1", "8", "1", "8", "1", "1", "48", "1", "48"), strict=True))
    launch = "InferenceX@abc runners/launch_gb200-nv.sh"
    supplement = {"gb200-rack": {**run, "source": launch}}
    as_filed = parse_row(complete_deployments([filed], supplement={})[0])
    assert [r.role for r in as_filed.config.roles] == [Role.UNIFIED]
    completed = complete_deployments([filed], supplement)[0]
    assert completed["mode"] == "disagg" and completed["deployment_source"] == launch
    case = parse_row(completed)
    assert case.fully_specified and case.concurrency == 2048
    prefill, decode = case.config.roles
    assert (prefill.role, prefill.replicas, prefill.worker.attention_dp, prefill.worker.ep) == (Role.PREFILL, 3, 8, 8)
    assert (decode.role, decode.replicas, decode.worker.attention_dp, decode.worker.ep) == (Role.DECODE, 1, 48, 48)
    assert case.config.total_gpus == 72


def _published(row_id: str, decode_workers: str, speculative: str = "") -> dict[str, str]:
    return {
        **_DEPLOYED,
        "id": row_id,
        "decode_num_workers": decode_workers,
        "speculative_decoding": speculative,
        "source": f"InferenceX@abc 1p{decode_workers}d",
    }


def test_a_row_that_ran_one_of_several_published_deployments_is_predicted_as_their_geometric_mean() -> None:
    bare = _r1_pd_row("bare", "17.25")
    published = {"bare": [_published("bare", "1"), _published("bare", "3", "mtp")]}
    found = alternatives_of(bare, published)
    assert [line["decode_num_workers"] for line in found] == ["1", "3"]
    assert describe_deployment(bare, found) == "one of 2P1D, 2P3D+MTP (InferenceX@abc 1p1d, …)"
    case = parse_row(bare, found)
    # Which one ran is not known: the row is predicted, never fitted.
    assert not case.fully_specified
    assert [[r.replicas for r in config.roles] for config in case.alternatives] == [[2, 1], [2, 3]]
    model = PerformanceModel.default()
    each = [predict_row(model, case, config) for config in case.alternatives]
    ttft_s, tpot_s = predict_case(model, case)
    assert ttft_s == pytest.approx((each[0].ttft_s * each[1].ttft_s) ** 0.5)
    assert tpot_s == pytest.approx((each[0].tpot_s * each[1].tpot_s) ** 0.5)
    # Three decode workers share the clients that one serves alone: the mean lies strictly between the two.
    assert each[1].tpot_s < tpot_s < each[0].tpot_s
    # Without alternatives, the same row is read as one worker of each role, as before.
    alone = parse_row(bare)
    assert alone.alternatives == () and [r.replicas for r in alone.config.roles] == [1, 1]
    direct = model.predict_at_concurrency(
        alone.arch, alone.gpu, alone.config, alone.workload, alone.concurrency, requests_per_client=10
    )
    assert predict_case(model, alone) == (direct.ttft_s, direct.tpot_s)


def test_a_completed_row_has_no_alternatives() -> None:
    twin = _r1_pd_row("v3-twin", "17.25", **_DEPLOYED)
    bare = _r1_pd_row("r1-bare", "17.25")
    completed = complete_deployments([twin, bare], supplement={})[1]
    assert alternatives_of(completed, {"r1-bare": [_published("r1-bare", "3")]}) == []


def test_an_aggregated_row_at_a_point_that_also_ran_mtp_is_predicted_over_both_runs() -> None:
    row = _row(
        id="r1-c4",
        model_path="deepseek-ai/DeepSeek-R1",
        system="b200_sxm",
        precision="fp8",
        mode="agg",
        tp_size="8",
        moe_ep_size="1",
        silicon_data_source="source_file=2026-03-25.csv; silicon_concurrency=4",
    )
    plain = {"id": "r1-c4", **dict.fromkeys(DEPLOYMENT_COLUMNS, ""), "speculative_decoding": "", "source": "IX plain"}
    draft = {"speculative_num_steps": "2", "speculative_eagle_topk": "1", "speculative_num_draft_tokens": "3"}
    mtp = {**plain, "speculative_decoding": "mtp", **draft, "source": "IX mtp"}
    found = alternatives_of(row, {"r1-c4": [plain, mtp]})
    assert found == [plain, mtp]
    assert describe_deployment(row, found) == "one of aggregated, aggregated+MTP 2/1/3 (IX plain, …)"
    case = parse_row(row, found)
    assert not case.fully_specified
    without, drafted = (config.roles[0].worker for config in case.alternatives)
    assert without.speculative is None and without.tp == 8
    assert drafted.speculative == Speculative(SpeculativeAlgorithm.NEXTN, 2, 1, 3)
    model = PerformanceModel.default()
    each = [predict_row(model, case, config) for config in case.alternatives]
    assert each[1].tpot_s < each[0].tpot_s  # four clients: the drafts pay for themselves
    assert predict_case(model, case)[1] == pytest.approx((each[0].tpot_s * each[1].tpot_s) ** 0.5)
    # A P/D alternative that ran MTP but states no draft (its recipe was not read) is read without it.
    pd_mtp = {**_published("bare", "3", "mtp"), **dict.fromkeys(draft, "")}
    (config,) = parse_row(_r1_pd_row("bare", "17.25"), [pd_mtp]).alternatives
    assert all(role.worker.speculative is None for role in config.roles)


def test_a_deployment_line_brings_the_server_flags_of_its_recipe() -> None:
    bare = _r1_pd_row("bare", "17.25")
    default_prefill, default_decode = (
        role.worker for role in parse_row(bare, [_published("bare", "3")]).alternatives[0].roles
    )
    recipe = {
        "prefill_chunked_prefill_size": "-1",
        "decode_max_running_requests": "16",
        "decode_mem_fraction_static": "0.75",
        "speculative_num_steps": "2",
        "speculative_eagle_topk": "1",
        "speculative_num_draft_tokens": "3",
    }
    (config,) = parse_row(bare, [{**_published("bare", "3", "mtp"), **recipe}]).alternatives
    prefill, decode = (role.worker for role in config.roles)
    assert prefill.chunked_prefill_size == 0 != default_prefill.chunked_prefill_size  # -1: chunking off
    assert (prefill.max_running_requests, prefill.mem_fraction_static) == (
        default_prefill.max_running_requests,
        default_prefill.mem_fraction_static,
    )
    assert (decode.max_running_requests, decode.mem_fraction_static) == (16, 0.75)
    assert decode.chunked_prefill_size == default_decode.chunked_prefill_size
    assert decode.speculative == Speculative(SpeculativeAlgorithm.NEXTN, 2, 1, 3)
    # A supplement line's flags come with the deployment it completes.
    supplement = {"bare": {**_DEPLOYED, "decode_max_running_requests": "64", "source": "InferenceX@abc key"}}
    completed = parse_row(complete_deployments([bare], supplement)[0])
    assert completed.fully_specified and completed.config.roles[1].worker.max_running_requests == 64
    with pytest.raises(UnpredictableConfig, match="decode_mem_fraction_static is not a number"):
        parse_row({**bare, **_DEPLOYED, "decode_mem_fraction_static": "most"})


@pytest.mark.skipif(not SILICON.is_file(), reason="shared silicon data not present")
def test_the_shipped_alternatives_belong_to_rows_no_fact_completes() -> None:
    rows = read_rows(SILICON)
    by_id = {row["id"]: row for row in rows}
    supplement = read_deployment_supplement()
    published = read_deployment_alternatives()
    completed = {row["id"]: row for row in complete_deployments(rows, supplement)}
    still_open = [row_id for row_id in published if not completed[row_id].get("deployment_source")]
    assert len(still_open) >= 150
    for row_id, lines in published.items():
        assert not by_id[row_id]["decode_num_workers"] and row_id not in supplement
        # A single alternative is published only when it ran MTP: otherwise it would be a fact in the supplement.
        assert len(lines) > 1 or lines[0]["speculative_decoding"] == "mtp"
    # Every P/D line that names a recipe states what the recipe says, and an MTP one its draft.
    lines = [line for row_lines in published.values() for line in row_lines] + list(supplement.values())
    named = [line for line in lines if "CONFIG_FILE=" in line["source"]]
    assert len(named) >= 600 and all(line["recipe"] and line["decode_mem_fraction_static"] for line in named)
    assert all(line["speculative_num_steps"] for line in named if line.get("speculative_decoding") == "mtp")


def test_concurrency_falls_back_to_the_decode_batch() -> None:
    assert concurrency_of(_row(decode_batch_size="48", decode_num_workers="11")) == 528


def test_unknown_models_and_gpus_are_unpredictable() -> None:
    with pytest.raises(UnpredictableConfig, match="not in the catalog"):
        parse_row(_row(model_path="acme/NoSuchModel", system="h100_sxm", mode="agg", tp_size="1", batch_size="1"))
    with pytest.raises(UnpredictableConfig, match="GPU system"):
        parse_row(_row(model_path="Qwen/Qwen3-32B", system="tpu_v9", mode="agg", tp_size="1", batch_size="1"))
    with pytest.raises(UnpredictableConfig, match="mode"):
        parse_row(_row(model_path="Qwen/Qwen3-32B", system="h100_sxm", mode="mixed", tp_size="1", batch_size="1"))


def _inferencex_agg(
    system: str, precision: str, tp: str, clients: str, source: str = "db-dump/2026-04-27"
) -> dict[str, str]:
    quant = "nvfp4" if precision == "fp4" else "fp8"
    return _row(
        model_path="deepseek-ai/DeepSeek-R1",
        system=system,
        precision=precision,
        mode="agg",
        gemm_quant_mode=quant,
        moe_quant_mode=quant,
        batch_size=clients,
        tp_size=tp,
        pp_size="1",
        attention_dp_size="1",
        moe_tp_size=tp,
        moe_ep_size="1",
        silicon_data_source=f"{source}; config_id=1",
    )


@pytest.mark.parametrize(
    ("system", "precision", "tp", "clients", "interval"),
    [
        ("b200_sxm", "fp8", "8", "8", 10),  # the recipes' 10 below 16 clients ...
        ("b200_sxm", "fp8", "8", "16", 30),  # ... and 30 from 16 on
        ("b300_sxm", "fp4", "4", "128", 30),
        ("b200_sxm", "fp8", "4", "32", 10),  # FP8 at TP4: always 10
        ("h200_sxm", "fp8", "8", "64", 1),  # the H200 recipes leave SGLang's default
    ],
)
def test_inferencex_blackwell_deepseek_rows_ran_with_their_recipes_receive_interval(
    system: str, precision: str, tp: str, clients: str, interval: int
) -> None:
    assert parse_row(_inferencex_agg(system, precision, tp, clients)).scheduler_recv_interval == interval


def test_rows_of_other_sources_and_p_d_rows_keep_the_default_receive_interval() -> None:
    aiconfigurator = _inferencex_agg("b200_sxm", "fp8", "8", "64", source="source_file=/data/b200_sxm/sglang/x.csv")
    assert parse_row(aiconfigurator).scheduler_recv_interval == 1
    pd = _r1_pd_row(
        "r1_pd", "10", system="b200_sxm", silicon_data_source="db-dump/2026-04-27; config_id=1; silicon_concurrency=64"
    )
    assert parse_row(pd).scheduler_recv_interval == 1


def test_a_row_is_predicted_with_its_receive_interval() -> None:
    """The recipe's interval holds arrivals back: the first token comes later than on a default server, at the
    same decode pace."""
    model = PerformanceModel.default()
    case = parse_row(_inferencex_agg("b200_sxm", "fp8", "8", "64"))
    assert case.scheduler_recv_interval == 30
    default_server = model.predict_at_concurrency(
        case.arch, case.gpu, case.config, case.workload, case.concurrency, requests_per_client=case.requests_per_client
    )
    ttft_s, tpot_s = predict_case(model, case)
    assert ttft_s > default_server.ttft_s
    assert tpot_s == pytest.approx(default_server.tpot_s, rel=0.02)


def test_inferencex_runs_send_ten_requests_per_client_and_include_their_first_wave() -> None:
    """InferenceX's scripts send 10 × concurrency prompts: a row's mean includes the wave all clients send at
    the start. AIConfigurator's rows do not say how long they ran (their fixed lengths keep every cycle a wave)."""
    case = parse_row(_inferencex_agg("h200_sxm", "fp8", "8", "64"))
    assert case.requests_per_client == 10
    own_run = _inferencex_agg("h200_sxm", "fp8", "8", "64", source="source_file=/Users/someone/qwen3.csv")
    assert parse_row(own_run).requests_per_client is None
    model = PerformanceModel.default()
    steady = model.predict_at_concurrency(case.arch, case.gpu, case.config, case.workload, case.concurrency)
    ttft_s, _ = predict_case(model, case)
    assert ttft_s > steady.ttft_s
    with pytest.raises(UnpredictableConfig, match="at least one request"):
        model.predict_at_concurrency(
            case.arch, case.gpu, case.config, case.workload, case.concurrency, requests_per_client=0.5
        )


@pytest.mark.parametrize(
    ("gpu", "other", "expected"),
    [
        ("b300_sxm", "b200_sxm", True),  # as fast or faster in every term
        ("b200_sxm", "b300_sxm", False),  # B300's FP4 peak, memory and NICs are higher
        ("h200_sxm", "h100_sxm", True),
        ("b200_sxm", "gb200", False),  # GB200 runs at higher clocks
        ("gb300", "b300_sxm", True),
        ("h100_sxm", "h100_sxm", False),  # a GPU does not outclass itself
    ],
)
def test_a_gpu_outclasses_another_only_when_it_matches_or_beats_it_in_every_term(
    gpu: str, other: str, expected: bool
) -> None:
    first, second = find_gpu(gpu), find_gpu(other)
    assert first is not None and second is not None
    assert outclasses(first, second) is expected


def _timed(row: dict[str, str], ttft: str, tpot: str) -> dict[str, str]:
    return {
        **row,
        "id": f"{row['system']}_c{row['batch_size']}_{ttft}",
        "silicon_ttft_ms": ttft,
        "silicon_tpot_ms": tpot,
    }


def test_a_run_slower_than_its_recipe_on_a_weaker_gpu_is_predicted_but_not_fitted() -> None:
    """B300's first InferenceX runs reused B200's recipes and ran 8k prompts up to five times slower: no B300
    term can make that, so the fit must not learn it. Rows that merely trade one latency for the other, or are
    within 25 %, are fitted."""
    weaker = _timed(_inferencex_agg("b200_sxm", "fp4", "4", "16"), "650", "15")
    slow = _timed(_inferencex_agg("b300_sxm", "fp4", "4", "16"), "2900", "31")
    traded = _timed(_inferencex_agg("b300_sxm", "fp4", "4", "16"), "900", "12")  # a later first token, faster after
    close = _timed(_inferencex_agg("b300_sxm", "fp4", "4", "16"), "780", "16")  # 1.2x and 1.07x
    other_clients = _timed(_inferencex_agg("b300_sxm", "fp4", "4", "32"), "2900", "31")  # another recipe point
    flagged = flag_runs_slower_than_weaker_gpus([weaker, slow, traded, close, other_clients])
    reasons = [row.get("not_fitted", "") for row in flagged]
    assert reasons[0] == reasons[2] == reasons[3] == reasons[4] == ""
    assert "TTFT 4.46x, TPOT 2.07x the slowest of 1 run(s) of the same recipe on B200" in reasons[1]
    cases = [parse_row(row) for row in flagged]
    assert cases[1].not_fitted == reasons[1] and cases[1].fully_specified
    assert [c.row_id for c in fittable(cases)] == [
        "b200_sxm_c16_650",
        "b300_sxm_c16_900",
        "b300_sxm_c16_780",
        "b300_sxm_c32_2900",
    ]
    # The weaker GPU's run is never the one flagged, however the two compare.
    assert "not_fitted" not in flag_runs_slower_than_weaker_gpus([_timed(weaker, "6500", "150"), slow])[0]


def test_an_inferencex_run_before_its_harness_warmed_up_the_server_is_fitted_on_tpot_only() -> None:
    """Before 2026-01-21 InferenceX's harness sent no warm-up requests: a run's first requests met a cold
    server, which its mean TTFT carries and no model term prices. Its TPOT is fitted; its TTFT is not."""
    cold = _timed(
        _inferencex_agg("b200_sxm", "fp4", "4", "4", "db-dump/2026-04-27; measured=2025-11-10T00:00:00Z"),
        "5504",
        "13.6",
    )
    warm = _timed(
        _inferencex_agg("b200_sxm", "fp4", "4", "4", "db-dump/2026-04-27; measured=2026-03-25T00:00:00Z"), "317", "9.2"
    )
    undated = _timed(_inferencex_agg("b200_sxm", "fp4", "4", "4"), "317", "9.2")
    cold_case, warm_case, undated_case = (parse_row(row) for row in (cold, warm, undated))
    assert cold_case.ttft_not_fitted is not None and "2025-11-10" in cold_case.ttft_not_fitted
    assert warm_case.ttft_not_fitted is None and undated_case.ttft_not_fitted is None
    # P/D runs come from another harness, and a source other than InferenceX's from another benchmark.
    pd = _gb200_pd_as_filed(source="db-dump/2026-04-27; config_id=236; measured=2025-12-21T00:00:00Z")
    aic = {**cold, "silicon_data_source": "aic-run; measured=2025-11-10T00:00:00Z"}
    assert parse_row(pd).ttft_not_fitted is None and parse_row(aic).ttft_not_fitted is None
    residual = case_residual(PerformanceModel.default(), cold_case)
    assert residual is not None and residual.ttft is None and residual.tpot is not None
    assert fittable([cold_case, warm_case]) == [cold_case, warm_case]


def test_inferencex_fp4_deepseek_runs_are_read_with_the_checkpoint_they_loaded() -> None:
    # The dump files twins of its DeepSeek-R1 FP4 runs under DeepSeek-V3; InferenceX served R1-0528's "v2" export,
    # whose attention output projection is FP4, not DeepSeek-V3-0324-NVFP4 with all of its attention in BF16.
    served = dict(parse_row(_b200_nvfp4_as_filed("2026-03-02")).arch.kept_in_bf16)
    assert served == {"nvfp4": ("attention_inputs", "draft")}
    twin = parse_row({**_b200_nvfp4_as_filed("2026-03-02"), "model_path": "deepseek-ai/DeepSeek-V3"})
    assert twin.arch.name == "DeepSeek-V3" and dict(twin.arch.kept_in_bf16) == served
    # Another source, or another format, keeps the catalog's export.
    for other in (
        {
            **_b200_nvfp4_as_filed("2026-03-02"),
            "model_path": "deepseek-ai/DeepSeek-V3",
            "silicon_data_source": "own; silicon_concurrency=64",
        },
        {
            **_b200_nvfp4_as_filed("2026-03-02", precision="fp8"),
            "model_path": "deepseek-ai/DeepSeek-V3",
            "moe_quant_mode": "fp8_block",
        },
    ):
        assert dict(parse_row(other).arch.kept_in_bf16) == {"nvfp4": ("attention", "draft")}


@pytest.mark.parametrize(
    ("system", "precision", "release", "mode", "overlapped"),
    [
        ("b200_sxm", "fp8", "0.5.9", "agg", False),  # its MTP script never exports SGLANG_ENABLE_SPEC_V2
        ("b300_sxm", "fp8", "0.5.10.post1", "agg", False),
        ("b200_sxm", "fp8", "0.5.11", "agg", True),  # on by default from 0.5.11
        ("b200_sxm", "fp8", "", "agg", True),  # no release named: nothing says it was off
        ("b200_sxm", "fp4", "0.5.9", "agg", True),  # the FP4 and H200 scripts export it
        ("h200_sxm", "fp8", "0.5.9", "agg", True),
        ("b200_sxm", "fp8", "0.5.9", "disagg", True),  # the srt-slurm recipes put it in the workers' environment
    ],
)
def test_inferencex_fp8_blackwell_mtp_runs_before_0_5_11_ran_without_the_overlap_scheduler(
    system: str, precision: str, release: str, mode: str, overlapped: bool
) -> None:
    source = "source_file=2026-03-25.csv; silicon_concurrency=64"
    row = _inferencex_agg(system, precision, "8", "64", source=source)
    if mode == "disagg":
        row = _r1_pd_row("r1_pd", "10", system=system, silicon_data_source=source)
    assert parse_row({**row, "backend_version": release}).speculative_overlap is overlapped


def test_a_speculative_run_without_the_overlap_scheduler_pays_the_host_per_request_and_a_plain_one_does_not() -> None:
    """The serial host work grows with the batch: a small share of an iteration at 8 clients, a larger one at 512;
    the same row without a draft is predicted as on any server."""
    model = PerformanceModel.default()
    draft = Speculative(SpeculativeAlgorithm.NEXTN, 2, 1, 3)
    shares = []
    for clients in ("8", "512"):
        case = parse_row({**_inferencex_agg("b200_sxm", "fp8", "8", clients), "backend_version": "0.5.9"})
        role = case.config.roles[0]
        drafted = replace(case.config, roles=(replace(role, worker=replace(role.worker, speculative=draft)),))
        serial = predict_row(model, case, drafted)
        overlapped = predict_row(model, replace(case, speculative_overlap=True), drafted)
        assert serial.tpot_s > overlapped.tpot_s and serial.ttft_s >= overlapped.ttft_s
        shares.append(serial.tpot_s / overlapped.tpot_s - 1.0)
        assert predict_row(model, case) == predict_row(model, replace(case, speculative_overlap=True))
    assert 0.0 < shares[0] < shares[1] < 0.15
