"""Rows of the silicon measurement CSV → (model, GPU, SGLang serving config, workload, concurrency, measured).

The CSV (shared/data/silicon/silicon_measurements.csv, schema of NVIDIA AIConfigurator's silicon sample)
describes each benchmark run in AIConfigurator's vocabulary, with a few encodings that need normalising
before SGLang semantics apply. Every rule below is a documented assumption, not a measured fact:

* **GPUs per worker.** AIConfigurator counts attention-DP ranks as GPUs: a worker is ``tp × attention_dp × pp``
  GPUs, i.e. SGLang ``--tp = tp × attention_dp`` with ``--attn-dp = attention_dp``.
* **Double-counted TP.** Some InferenceX dumps store ``tp_size = tp × ep`` with ``moe_tp = tp`` (ids say
  ``tp4_ep4`` while ``tp_size`` is 16). When ``tp_size = moe_tp × moe_ep`` exceeds one node of an aggregated
  run, the real TP is ``tp_size / moe_ep``.
* **Wide expert parallelism.** A MoE worker with expert parallelism wider than one node, or one whose
  attention heads do not split over its TP, runs SGLang's large-scale EP layout: attention-DP = EP = TP with
  DeepEP all-to-all.
* **Workers.** A P/D row without prefill/decode worker counts takes its deployment (the ten P/D columns) from
  a fully specified row of the same file with the same measurement — same backend, model architecture, GPU,
  lengths, concurrency, TTFT and TPOT to the last digit: the dumps file some runs twice, once under each
  DeepSeek name — else from the shipped supplement ``catalog/data/silicon_deployments.csv`` (recovered from the
  benchmark configs InferenceX published, by ``bench/inferencex_deployments.py``). Failing both, the row is
  not fully specified (never fitted) and is predicted over the deployments InferenceX published for its point
  (``catalog/data/silicon_deployment_alternatives.csv``, same script: several swept through its concurrency,
  or one that ran MTP, which the schema cannot state — read with the draft of its recipe): the geometric mean
  of their predictions, since it ran one of them and which is not known; with none published, one worker each.
* **Speculative decoding.** The schema has no column for it. An aggregated row at a point InferenceX ran with MTP
  (its configs at the row's date list a single-node run with ``spec-decoding: mtp`` at the same model, precision,
  GPU, lengths, TP, EP and concurrency — B200 DeepSeek-R1 FP8 TP8 ran both with and without at 4–64 clients in
  March 2026, only with above) has alternatives too: the runs published there, an MTP one with the draft its
  benchmark script passes (``--speculative-num-steps 2 --speculative-eagle-topk 1
  --speculative-num-draft-tokens 3``), predicted over them and never fitted, like a P/D row above. Where the
  data say which run a row is (the script's ``identified_runs``: a database-dump sweep that stops where the
  entry without MTP stops, and the same measurement filed elsewhere), the file keeps that run only: none for a
  run without MTP (the row is read as it is, and fitted), the MTP line for an MTP run (predicted with its draft;
  not fitted, so that the model's speculative decoding is tested on it rather than the kernels bent to it).
* **P/D runs filed as aggregated.** 20 GB200 rows say ``agg`` with a TP of 72: InferenceX launched them, before
  its configs listed GB200 SGLang runs, as Dynamo-SGLang P/D deployments filling a 72-GPU rack (three DEP8
  prefill workers and one DEP48 decode worker at 1k/1k; six DEP8 and one DEP24 at 8k/1k). Their TPOT is flat
  at 32 ms from 128 to 4,096 clients while TTFT grows to 150 s, which no aggregated worker does. The supplement
  holds the deployment of each such row (recovered by the same script from the launch script at the row's
  date), and the row is read as it.
* **Expert parallelism filed as MoE TP.** InferenceX's GB200 P/D rows of December 2025 (SGLang 0.5.5.post2; db-dump
  configs 227, 236, 252–255 and 259, and their twins) give each role as attention-DP N with MoE TP N and no EP. Their
  configs (``dsr1-fp8-gb200-dynamo-sglang`` and its FP4 sibling in ``nvidia-master.yaml`` @c040b5cf2) list every
  role as ``tp: 1, ep: 1, dp-attn: true``, the FP8 one with the note that tp, ep and dp-attn "do nothing because
  they are hardcoded" in the launch script; both name the roles DEP4 to DEP48, and the FP8 script (the Dynamo
  fork's ``gb200-fp8.sh``) passes ``--tp-size`` and ``--dp-size`` equal to the role's GPUs with
  ``--enable-deepep-moe``: expert parallelism over the role. Such a role of a GB200 InferenceX P/D row
  (attention-DP > 1, MoE TP = its GPUs, EP 1) is read as EP over its GPUs. Likewise InferenceX's aggregated
  DeepSeek-R1 NVFP4 runs on B200 from 2025-09-21 to 2025-11-10 (72 rows, db-dump configs 88 and 99 and their
  twins) are filed as MoE TP = TP with EP 1, while ``benchmarks/dsr1_fp4_b200_docker.sh`` launched every one
  with ``--enable-ep-moe`` (SGLang's EP = TP) from 27f29acbe (2025-09-21) until d8fe8f73e (#204, 2025-11-10)
  replaced the flag with ``--ep-size $EP_SIZE`` and gave the configs ``ep: 4`` and ``ep: 8``, which later rows
  carry; such a row is read as EP = TP.
* **Runs slower than a weaker GPU.** A run slower in both TTFT and TPOT than every run of its recipe (model
  architecture, harness, formats, lengths, deployment, server flags, concurrency) on a GPU it matches or beats in
  every term the model prices, by more than a quarter in one of them, measured something its GPU's terms cannot
  make: it is predicted and reported, not fitted (``not_fitted`` says why; a CSV may set that column itself). In
  the shipped file these are 19 of InferenceX's first B300 runs (April 2026, SGLang 0.5.10.post1), launched with
  the B200 recipes unchanged (InferenceX #1049, #1050): under the same recipe and concurrency, 14 runs of 8k
  prompts took 3.6–21× B200's TTFT and 1.2–3.6× its TPOT, five of 1k prompts at 16–128 clients 1.3–2.1× and
  1.01–1.4×. The other 12 B300 runs (1k prompts, mostly at 4–32 clients) match B200's and are fitted.
* **Runs without warm-up.** InferenceX's single-node harness sends two warm-up requests per client before it
  measures since 2026-01-21 (``--num-warmups`` in ``benchmarks/benchmark_lib.sh``, SemiAnalysisAI/InferenceX
  d053ae24e, #480); before, a run's first requests met a cold server (kernels compiled and loaded on first use).
  An aggregated InferenceX row measured before that date has its TTFT predicted and reported but not fitted, and
  kept out of the held-out TTFT errors that size the planner's margins (``ttft_not_fitted`` says why); its TPOT
  is fitted. On the calibration fitted before this rule, the 103 B200 rows measured then lean −0.96 in log TTFT
  (measured 2.6× the prediction; DeepSeek-R1 NVFP4 TP4 at 4 clients and 8k tokens: 5.5 s, where the same
  configuration took 0.32 s in March 2026) and the 163 measured after +0.08. P/D rows come from other harnesses
  (srt-slurm's, Dynamo's), whose warm-up is not on record: they are fitted as they are.
* **Concurrency.** ``batch_size``; else the ``silicon_concurrency=`` of ``silicon_data_source``; else decode
  batch × decode workers × decode attention-DP.
* **Formats.** ``moe_quant_mode``/``gemm_quant_mode``/``precision`` name the weight format (an empty one means
  the model's reference precision). The KV cache is FP8 for FP4 runs and on Blackwell (the published SGLang
  recipes there pass ``--kv-cache-dtype fp8_e4m3``), BF16 otherwise. Every FP4 DeepSeek run in the file is
  InferenceX's, which serves NVIDIA's FP4 export of DeepSeek-R1-0528 (``nvidia/DeepSeek-R1-0528-FP4-V2`` in its
  benchmark configs) also where the file names DeepSeek-V3: such a row is predicted with that checkpoint's
  BF16 modules (the attention's input projections and the MTP layer), not DeepSeek-V3-0324-NVFP4's.
* **Lengths.** InferenceX rows (``db-dump`` or dated ``source_file``) used ``--random-range-ratio 0.8``: lengths
  uniform on [0.8, 1]·nominal, mean 0.9·nominal; AIConfigurator's own rows use fixed lengths.
* **Run length.** InferenceX's runs send ten requests per client (``--num-prompts $((CONC * 10))`` in its
  single-node scripts, SemiAnalysisAI/InferenceX @843c6254f; srt-slurm's sa-bench ``NUM_PROMPTS_MULT``
  defaults to 10 for the P/D runs), so a tenth of what a row reports is the wave every client sends at the
  start (`queueing`). AIConfigurator's rows do not say; with fixed lengths every cycle is a wave anyway.
* **Server settings.** A row or a deployment line may state a role's server flags in the optional columns
  ``SERVER_COLUMNS`` (``decode_max_running_requests``, ``prefill_chunked_prefill_size``,
  ``decode_mem_fraction_static`` …; a chunk of -1 or 0 disables chunking, as in SGLang): the supplement and the
  alternatives carry those of the srt-slurm recipe each P/D deployment ran (``bench/inferencex_deployments.py``).
  Where none is stated, chunked-prefill size and max-running-requests are SGLang's defaults for that GPU, and
  ``--mem-fraction-static`` is 0.90, the value the published InferenceMAX SGLang recipes pass (B200 DSR1:
  0.89, jyothisambolu/InferenceMAX README.md @01de5489), raised to 0.95 when the weights alone take more
  than 85 % of the GPU (a recipe that fits DeepSeek-R1 FP8 on four B200s must have done so).
* **Scheduler receive interval.** InferenceX's single-node SGLang DeepSeek-R1 recipes for B200 and B300
  (``benchmarks/single_node/fixed_seq_len/dsr1_{fp4,fp8}_{b200,b300}[_mtp].sh``; the rule below is the same
  in every version from January to June 2026, when the file's runs were made) launch with
  ``--scheduler-recv-interval``: 30 from 16 clients on, 10 below, and 10 for FP8 at TP4 whatever the
  clients. The server then takes new requests in every 10 or 30 decode iterations only
  (`queueing.closed_loop_aggregated`). Their H200 recipes leave SGLang's default, 1; a P/D worker's (some
  srt-slurm recipes set 10) is not modelled.
* **Speculative decoding without the overlap scheduler.** InferenceX's single-node DeepSeek-R1 FP8 MTP scripts for
  B200 and B300 (``dsr1_fp8_b200_mtp.sh`` at @12ba0ae07, the runs of March and April 2026, and both still at
  @843c6254f) set ``SGLANG_ENABLE_SPEC_V2=1`` as a shell variable without ``export``, so the server they launch
  never sees it; their FP4 B200 and FP8 H200 scripts export it. SGLang before 0.5.11 defaults it to off and then
  turns the overlap scheduler off for EAGLE/MTP ("Overlap scheduler is disabled when spec v2 is off",
  ``server_args.py`` of 0.5.9 and 0.5.10; 0.5.11 defaults it on): the host prepares each iteration and processes
  its results between the forwards instead of behind them (`PerformanceModel.predict_at_concurrency`,
  ``overlap_schedule``). The srt-slurm P/D recipes set the variable in the workers' environment.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.models import find_model
from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.formats import resolve_formats
from frontier_operator.perf.memory import (
    DEFAULT_MAX_RUNNING_PER_RANK,
    GB,
    default_chunked_prefill_size,
    weights_per_gpu_bytes,
)
from frontier_operator.perf.model import ConcurrencyPrediction, PerformanceModel
from frontier_operator.perf.types import (
    LengthDistribution,
    MoeA2ABackend,
    Role,
    RoleDeployment,
    ServingConfig,
    Speculative,
    SpeculativeAlgorithm,
    WorkerConfig,
    Workload,
)

SCHEMA_COLUMNS = (
    "id",
    "silicon_data_source",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "gemm_quant_mode",
    "moe_quant_mode",
    "batch_size",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    "prefill_batch_size",
    "prefill_num_workers",
    "prefill_tp_size",
    "prefill_pp_size",
    "prefill_attention_dp_size",
    "prefill_moe_tp_size",
    "prefill_moe_ep_size",
    "decode_batch_size",
    "decode_num_workers",
    "decode_tp_size",
    "decode_pp_size",
    "decode_attention_dp_size",
    "decode_moe_tp_size",
    "decode_moe_ep_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)
REQUIRED_COLUMNS = ("model_path", "system", "mode", "isl", "osl")
DEPLOYMENT_COLUMNS = tuple(
    f"{role}_{name}"
    for role in ("prefill", "decode")
    for name in ("num_workers", "tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
)
# An alternative's draft, when its source states it (`read_deployment_alternatives`); empty otherwise.
DRAFT_COLUMNS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
# A role's server flags, when a row or a deployment line states them (module docstring); empty otherwise.
SERVER_FLAGS = ("max_running_requests", "chunked_prefill_size", "mem_fraction_static")
SERVER_COLUMNS = tuple(f"{role}_{flag}" for role in ("prefill", "decode") for flag in SERVER_FLAGS)
DEPLOYMENT_SUPPLEMENT_PATH = Path(__file__).resolve().parents[1] / "catalog" / "data" / "silicon_deployments.csv"
DEPLOYMENT_ALTERNATIVES_PATH = DEPLOYMENT_SUPPLEMENT_PATH.with_name("silicon_deployment_alternatives.csv")

# InferenceX's client draws lengths uniformly on [0.8, 1] x nominal (--random-range-ratio 0.8), and sends ten
# requests per client (module docstring).
RANGE_RATIO = 0.8
REQUESTS_PER_CLIENT = 10
# GPUs whose InferenceX DeepSeek recipes set --scheduler-recv-interval (module docstring), and its values.
RECV_INTERVAL_SYSTEMS = ("b200_sxm", "b300_sxm")
RECV_INTERVAL_FROM_16_CLIENTS = 30
RECV_INTERVAL_BELOW_16_CLIENTS = 10
# Systems whose InferenceX P/D roles ran DeepEP expert parallelism over every GPU of the role while the dumps
# file them as MoE TP (module docstring).
DEP_FILED_AS_MOE_TP_SYSTEMS = ("gb200",)
# (system, precision) of InferenceX's single-node MTP scripts that never export SGLANG_ENABLE_SPEC_V2, and the first
# SGLang release whose EAGLE/MTP worker overlaps without it (module docstring, "Speculative decoding without the
# overlap scheduler").
SPEC_V2_NOT_EXPORTED = (("b200_sxm", "fp8"), ("b300_sxm", "fp8"))
SPEC_OVERLAP_BY_DEFAULT_SINCE = (0, 5, 11)
_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
# (system, precision, first and last day measured) of InferenceX aggregated runs whose launch script set
# `--enable-ep-moe` while the dumps file MoE TP = TP and EP 1 (module docstring).
EP_FLAG_FILED_AS_MOE_TP = (("b200_sxm", "fp4", "2025-09-21", "2025-11-10"),)
# The FP4 DeepSeek checkpoint InferenceX's runs load (module docstring, "Formats").
INFERENCEX_FP4_CHECKPOINT = "nvidia/DeepSeek-R1-0528-FP4-v2"
RECIPE_MEM_FRACTION = 0.90
TIGHT_MEM_FRACTION = 0.95
TIGHT_WEIGHT_SHARE = 0.85
_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")
_MEASURED = re.compile(r"measured=(\d{4}-\d{2}-\d{2})")
# InferenceX's single-node harness sends warm-up requests (2 per client) before it measures since this date
# (SemiAnalysisAI/InferenceX d053ae24e, #480); before it, a run's first requests met a cold server.
INFERENCEX_WARMUP_SINCE = "2026-01-21"
# A run more than this many times slower than every run of its recipe on a GPU it outclasses is not fitted
# (module docstring, "Runs slower than a weaker GPU"); the column that says so, and why.
SLOWER_THAN_WEAKER_GPU = 1.25
NOT_FITTED_COLUMN = "not_fitted"


@dataclass(frozen=True)
class SiliconCase:
    row_id: str
    backend: str
    model_path: str
    arch: ModelArch
    gpu: GpuSpec
    config: ServingConfig
    workload: Workload
    concurrency: float
    measured_ttft_ms: float | None
    measured_tpot_ms: float | None
    # False when the row leaves part of the deployment to our assumptions (P/D worker counts missing);
    # such rows are predicted but not used to fit coefficients.
    fully_specified: bool = True
    # The deployments published for a row that does not say which of them ran (`read_deployment_alternatives`):
    # the row is predicted as each, and reported as their geometric mean (`predict_case`).
    alternatives: tuple[ServingConfig, ...] = ()
    # The aggregated server's --scheduler-recv-interval, where the benchmark's recipe set one.
    scheduler_recv_interval: int = 1
    # False where the benchmark's server ran speculative decoding without SGLang's overlap scheduler (module docstring).
    speculative_overlap: bool = True
    # The run's requests per client, where its harness is known (module docstring).
    requests_per_client: int | None = None
    # Why the row is predicted but not fitted, though fully specified (its ``not_fitted`` column).
    not_fitted: str | None = None
    # Why the row's TTFT is predicted but not fitted (nor counted in the margins) while its TPOT is.
    ttft_not_fitted: str | None = None
    # The measurement campaign (`campaign_of`): runs of one deployment in different campaigns ran different engines.
    campaign: str = ""


def read_rows(path: Path, required: tuple[str, ...] = REQUIRED_COLUMNS) -> list[dict[str, str]]:
    """The CSV as dictionaries; raises ValueError when a required column is missing."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
        return [dict(row) for row in reader]


def read_deployment_supplement(path: Path = DEPLOYMENT_SUPPLEMENT_PATH) -> dict[str, dict[str, str]]:
    """Row id → the deployment columns recorded for it elsewhere, and their ``source`` (module docstring)."""
    return {row["id"]: row for row in read_rows(path, ("id", *DEPLOYMENT_COLUMNS, "source"))}


def read_deployment_alternatives(path: Path = DEPLOYMENT_ALTERNATIVES_PATH) -> dict[str, list[dict[str, str]]]:
    """Row id → the deployments published for that point, one of which ran (module docstring, "Workers")."""
    out: dict[str, list[dict[str, str]]] = {}
    for row in read_rows(path, ("id", *DEPLOYMENT_COLUMNS, "speculative_decoding", *DRAFT_COLUMNS, "source")):
        out.setdefault(row["id"], []).append(row)
    return out


def alternatives_of(row: Mapping[str, str], alternatives: Mapping[str, list[dict[str, str]]]) -> list[dict[str, str]]:
    """The published alternatives of a row that still lacks its worker counts, or of an aggregated row (after
    `complete_deployments`)."""
    return alternatives.get(row.get("id", ""), []) if _lacks_workers(row) or not _is_disagg(row) else []


def _draft(line: Mapping[str, str]) -> Speculative | None:
    """The MTP draft an alternative states, if it states one (P/D alternatives do not: read without it)."""
    values = [(line.get(column) or "").strip() for column in DRAFT_COLUMNS]
    if line.get("speculative_decoding") != "mtp" or not all(values):
        return None
    steps, topk, draft_tokens = (int(value) for value in values)
    return Speculative(SpeculativeAlgorithm.NEXTN, steps, topk, draft_tokens)


def _shape(line: Mapping[str, str]) -> str:
    """ "2P3D", "aggregated", with "+MTP" when it ran MTP, and its draft when known (steps/top-k/draft tokens)."""
    workers = line["prefill_num_workers"], line["decode_num_workers"]
    layout = f"{workers[0]}P{workers[1]}D" if workers[0] else "aggregated"
    if not line["speculative_decoding"]:
        return layout
    draft = _draft(line)
    known = f" {draft.num_steps}/{draft.eagle_topk}/{draft.num_draft_tokens}" if draft is not None else ""
    return f"{layout}+MTP{known}"


def describe_deployment(row: Mapping[str, str], alternatives: list[dict[str, str]]) -> str:
    """Where a completed row's deployment came from (`pred_deployment`): its ``deployment_source`` ("" when the
    row gave it), or over its alternatives "one of 1P3D, 1P4D+MTP (<source>, …)"."""
    if not alternatives:
        return row.get("deployment_source", "")
    shapes = [_shape(line) for line in alternatives]
    if len(alternatives) == 1:
        return f"{shapes[0]} ({alternatives[0]['source']})"
    return f"one of {', '.join(shapes)} ({alternatives[0]['source']}, …)"


def _is_disagg(row: Mapping[str, str]) -> bool:
    return (row.get("mode") or "").strip().lower() == "disagg"


def _lacks_workers(row: Mapping[str, str]) -> bool:
    return _is_disagg(row) and not all((row.get(f"{role}_num_workers") or "").strip() for role in ("prefill", "decode"))


def measurement_key(row: Mapping[str, str]) -> tuple[str, ...] | None:
    """What identifies one run: two rows equal on it are the same measurement filed twice.

    The model counts by architecture: the dumps file DeepSeek-R1 runs again as DeepSeek-V3.
    """
    fields = ("backend", "system", "isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms")
    key = tuple((row.get(f) or "").strip() for f in fields)
    if not key[-1] or not key[-2]:
        return None
    try:
        return (*key, str(concurrency_of(row)), architecture_of(row))
    except UnpredictableConfig:
        return None


def architecture_of(row: Mapping[str, str]) -> str:
    """The row's model architecture by catalog name, else its model path as written."""
    model_path = (row.get("model_path") or "").strip()
    arch = find_model(model_path)
    return arch.architecture if arch is not None else model_path


def complete_deployments(
    rows: list[dict[str, str]], supplement: Mapping[str, Mapping[str, str]]
) -> list[dict[str, str]]:
    """The rows, each P/D row without worker counts completed from its twin or the supplement when known, and
    each aggregated row the supplement lists read as the P/D run it was.

    A completed row also carries ``deployment_source``: ``twin <id>`` or the supplement's source.
    """
    twins: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for row in rows:
        if _is_disagg(row) and not _lacks_workers(row) and (key := measurement_key(row)) is not None:
            twins.setdefault(key, []).append(row)
    out = []
    for row in rows:
        recorded_run = supplement.get(row.get("id", ""))
        if not _is_disagg(row) and recorded_run is not None:
            # A P/D run the dumps file as aggregated: read as the deployment the supplement recovered for it.
            out.append(_deployed(row, recorded_run, recorded_run.get("source") or "supplement"))
            continue
        if not _lacks_workers(row):
            out.append(row)
            continue
        key = measurement_key(row)
        found = twins.get(key, []) if key is not None else []
        recorded: Mapping[str, str]
        if len({tuple(twin.get(c, "") for c in DEPLOYMENT_COLUMNS) for twin in found}) == 1:
            source, recorded = f"twin {found[0].get('id', '')}", found[0]
        elif row.get("id", "") in supplement:
            recorded = supplement[row["id"]]
            source = recorded.get("source") or "supplement"
        else:
            out.append(row)
            continue
        out.append(_deployed(row, recorded, source))
    return out


def flag_runs_slower_than_weaker_gpus(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows, each one slower in both TTFT and TPOT than every run of its recipe (`_recipe_key`) on a GPU it
    outclasses (`outclasses`), in one of them by more than `SLOWER_THAN_WEAKER_GPU` times, carrying
    ``not_fitted`` with the comparison (module docstring, "Runs slower than a weaker GPU")."""
    runs = [_timed_run(row) for row in rows]
    by_recipe: dict[tuple[str, ...], list[tuple[GpuSpec, float, float]]] = {}
    for run in runs:
        if run is not None:
            by_recipe.setdefault(run[0], []).append(run[1:])
    out = []
    for row, run in zip(rows, runs, strict=True):
        reason = None
        if run is not None and not (row.get(NOT_FITTED_COLUMN) or "").strip():
            key, gpu, ttft, tpot = run
            reason = _slower_than_weaker(gpu, ttft, tpot, [r for r in by_recipe[key] if outclasses(gpu, r[0])])
        out.append(row if reason is None else {**row, NOT_FITTED_COLUMN: reason})
    return out


def _timed_run(row: Mapping[str, str]) -> tuple[tuple[str, ...], GpuSpec, float, float] | None:
    """(recipe, GPU, TTFT, TPOT) of a row that names all four, else None."""
    key, gpu = _recipe_key(row), find_gpu((row.get("system") or "").strip())
    try:
        ttft, tpot = _float(row, "silicon_ttft_ms"), _float(row, "silicon_tpot_ms")
    except UnpredictableConfig:
        return None
    if key is None or gpu is None or not ttft or not tpot:
        return None
    return key, gpu, ttft, tpot


def _slower_than_weaker(
    gpu: GpuSpec, ttft: float, tpot: float, weaker: list[tuple[GpuSpec, float, float]]
) -> str | None:
    """Why a run of `gpu` is not fitted beside the `weaker` GPUs' runs of its recipe, or None if it may be."""
    if not weaker:
        return None
    slowest_ttft, slowest_tpot = max(run[1] for run in weaker), max(run[2] for run in weaker)
    # Slower in both: a run that trades one for the other (MTP: a later first token, faster tokens after it) is
    # a different run, not a slow one.
    if ttft <= slowest_ttft or tpot <= slowest_tpot:
        return None
    if max(ttft / slowest_ttft, tpot / slowest_tpot) <= SLOWER_THAN_WEAKER_GPU:
        return None
    names = ", ".join(sorted({run[0].name for run in weaker}))
    return (
        f"TTFT {ttft / slowest_ttft:.2f}x, TPOT {tpot / slowest_tpot:.2f}x the slowest of {len(weaker)} run(s) "
        f"of the same recipe on {names}, which {gpu.name} matches or beats in every term"
    )


def outclasses(gpu: GpuSpec, other: GpuSpec) -> bool:
    """Whether `gpu` (another GPU) matches or beats `other` in every term the model prices: memory, HBM bandwidth,
    each dense tensor-core peak, scale-up and scale-out bandwidth."""
    if gpu.name == other.name or any((gpu.tflops(f) or 0.0) < peak for f, peak in other.dense_tflops):
        return False
    return (
        gpu.memory_gb >= other.memory_gb
        and gpu.hbm_bandwidth_tbs >= other.hbm_bandwidth_tbs
        and gpu.scale_up_bandwidth_gbs >= other.scale_up_bandwidth_gbs
        and gpu.scale_out_bandwidth_gbs >= other.scale_out_bandwidth_gbs
    )


# The columns that make two runs the same recipe whatever the GPU (`_recipe_key`).
_RECIPE_COLUMNS = (
    "backend",
    "precision",
    "gemm_quant_mode",
    "moe_quant_mode",
    "mode",
    "isl",
    "osl",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    *DEPLOYMENT_COLUMNS,
    *SERVER_COLUMNS,
)


def _recipe_key(row: Mapping[str, str]) -> tuple[str, ...] | None:
    """What makes two runs the same recipe whatever the GPU: model architecture, backend, harness, formats,
    lengths, deployment, server flags and concurrency."""
    try:
        shared = (str(concurrency_of(row)), architecture_of(row), str(_is_inferencex(row)))
    except UnpredictableConfig:
        return None
    return (*((row.get(f) or "").strip().lower() for f in _RECIPE_COLUMNS), *shared)


def _deployed(row: dict[str, str], recorded: Mapping[str, str], source: str) -> dict[str, str]:
    """`row` as the P/D deployment `recorded` (its ten deployment columns, and the server flags it states), which
    came from `source`."""
    deployment = {c: recorded.get(c, "") for c in (*DEPLOYMENT_COLUMNS, *SERVER_COLUMNS)}
    return {**row, "mode": "disagg", **deployment, "deployment_source": source}


def _int(row: Mapping[str, str], key: str) -> int | None:
    text = (row.get(key) or "").strip()
    if not text:
        return None
    try:
        return int(float(text))
    except ValueError as error:
        raise UnpredictableConfig(f"column {key} is not a number: {text!r}") from error


def _float(row: Mapping[str, str], key: str) -> float | None:
    text = (row.get(key) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError as error:
        raise UnpredictableConfig(f"column {key} is not a number: {text!r}") from error
    return value if math.isfinite(value) else None


def weight_format_of(row: Mapping[str, str], arch: ModelArch) -> str:
    moe = (row.get("moe_quant_mode") or "").strip()
    gemm = (row.get("gemm_quant_mode") or "").strip()
    precision = (row.get("precision") or "").strip()
    for candidate in ((moe or gemm) if arch.is_moe else (gemm or moe), precision):
        if candidate:
            return candidate
    return arch.native_dtype


def kv_format_of(weight_format: str, gpu: GpuSpec) -> str:
    if "fp4" in weight_format.lower() or gpu.arch in ("sm100", "sm103"):
        return "fp8_e4m3"
    return "bf16"


def _as_served(row: Mapping[str, str], arch: ModelArch, weight_format: str) -> ModelArch:
    """`arch` with the BF16 modules of the checkpoint the row's run loaded (module docstring, "Formats")."""
    if "fp4" not in weight_format.lower() or not _is_inferencex(row) or not arch.name.startswith("DeepSeek"):
        return arch
    served = find_model(INFERENCEX_FP4_CHECKPOINT)
    if served is None or served.kept_in_bf16 == arch.kept_in_bf16:
        return arch
    return _with_bf16_modules_of(arch, served)


@cache
def _with_bf16_modules_of(arch: ModelArch, served: ModelArch) -> ModelArch:
    # One object per pair: the performance model memoises its hardware per architecture object.
    return replace(arch, kept_in_bf16=served.kept_in_bf16)


def _is_inferencex(row: Mapping[str, str]) -> bool:
    source = row.get("silicon_data_source") or ""
    return source.startswith("db-dump") or source.startswith("source_file=20")


def _worker(
    arch: ModelArch,
    gpu: GpuSpec,
    *,
    tp: int,
    pp: int,
    attention_dp: int,
    moe_tp: int,
    ep: int,
    weight_format: str,
    aggregated: bool,
) -> WorkerConfig:
    sglang_tp = tp * attention_dp
    if aggregated and arch.is_moe and ep > 1 and moe_tp > 1 and tp == moe_tp * ep and tp > gpu.gpus_per_node:
        sglang_tp, attention_dp = tp // ep, 1
    attention_tp = sglang_tp // max(1, attention_dp)
    heads_split = arch.num_attention_heads % max(1, attention_tp) == 0
    wide = not heads_split or (sglang_tp > gpu.gpus_per_node and ep > 1)
    if arch.is_moe and wide:
        attention_dp, ep = sglang_tp, sglang_tp
    if not arch.is_moe:
        ep = 1
    elif sglang_tp % max(1, ep):
        ep = math.gcd(sglang_tp, ep)
    a2a = MoeA2ABackend.DEEPEP if arch.is_moe and attention_dp > 1 and ep > 1 else MoeA2ABackend.NONE
    worker = WorkerConfig(
        gpu=gpu.name,
        gpus_per_node=gpu.gpus_per_node,
        weight_format=weight_format,
        kv_cache_format=kv_format_of(weight_format, gpu),
        tp=sglang_tp,
        max_running_requests=DEFAULT_MAX_RUNNING_PER_RANK * max(1, attention_dp),
        chunked_prefill_size=default_chunked_prefill_size(gpu),
        pp=pp,
        attention_dp=max(1, attention_dp),
        ep=max(1, ep),
        moe_a2a_backend=a2a,
        mem_fraction_static=RECIPE_MEM_FRACTION,
    )
    formats = resolve_formats(arch, gpu, worker.weight_format, worker.kv_cache_format)
    weights_gb = weights_per_gpu_bytes(arch, formats, worker) / GB
    if weights_gb > TIGHT_WEIGHT_SHARE * gpu.memory_gb:
        worker = replace(worker, mem_fraction_static=TIGHT_MEM_FRACTION)
    return worker


def _role_worker(
    row: Mapping[str, str], prefix: str, arch: ModelArch, gpu: GpuSpec, weight_format: str, *, aggregated: bool
) -> WorkerConfig:
    tp = _int(row, f"{prefix}tp_size")
    if tp is None:
        raise UnpredictableConfig(f"column {prefix}tp_size is empty")
    attention_dp = _int(row, f"{prefix}attention_dp_size") or 1
    moe_tp = _int(row, f"{prefix}moe_tp_size") or 1
    ep = _int(row, f"{prefix}moe_ep_size") or 1
    if _ep_filed_as_moe_tp(row, tp=tp, attention_dp=attention_dp, moe_tp=moe_tp, ep=ep, aggregated=aggregated):
        moe_tp, ep = 1, moe_tp
    worker = _worker(
        arch,
        gpu,
        tp=tp,
        pp=_int(row, f"{prefix}pp_size") or 1,
        attention_dp=attention_dp,
        moe_tp=moe_tp,
        ep=ep,
        weight_format=weight_format,
        aggregated=aggregated,
    )
    return _with_stated_flags(worker, row, prefix)


def _ep_filed_as_moe_tp(
    row: Mapping[str, str], *, tp: int, attention_dp: int, moe_tp: int, ep: int, aggregated: bool
) -> bool:
    """An InferenceX role whose launch script ran expert parallelism over all its GPUs, filed as MoE TP over them
    and no EP (module docstring, "Expert parallelism filed as MoE TP"): a P/D role with attention-DP on a system of
    ``DEP_FILED_AS_MOE_TP_SYSTEMS``, or an aggregated run of ``EP_FLAG_FILED_AS_MOE_TP``."""
    if not _is_inferencex(row) or ep != 1 or moe_tp != tp * attention_dp or moe_tp == 1:
        return False
    system = (row.get("system") or "").strip().lower()
    if not aggregated:
        return attention_dp > 1 and system in DEP_FILED_AS_MOE_TP_SYSTEMS
    measured = _measured_day(row)
    precision = (row.get("precision") or "").strip().lower()
    return (
        attention_dp == 1
        and measured is not None
        and any(
            system == flagged and precision == flagged_precision and first <= measured <= last
            for flagged, flagged_precision, first, last in EP_FLAG_FILED_AS_MOE_TP
        )
    )


def _with_stated_flags(worker: WorkerConfig, row: Mapping[str, str], prefix: str) -> WorkerConfig:
    """`worker` with the server flags the row states for its role (``SERVER_COLUMNS``)."""
    changes: dict[str, Any] = {}
    for flag in SERVER_FLAGS:
        text = (row.get(f"{prefix}{flag}") or "").strip()
        if not text:
            continue
        try:
            value = float(text) if flag == "mem_fraction_static" else int(text)
        except ValueError:
            raise UnpredictableConfig(f"column {prefix}{flag} is not a number: {text!r}") from None
        # SGLang's -1 turns chunking off, which the model reads from 0.
        changes[flag] = max(0, value) if flag == "chunked_prefill_size" else value
    return replace(worker, **changes)


def concurrency_of(row: Mapping[str, str]) -> float:
    batch = _int(row, "batch_size")
    if batch:
        return float(batch)
    match = _CONCURRENCY.search(row.get("silicon_data_source") or "")
    if match:
        return float(match.group(1))
    decode_batch = _int(row, "decode_batch_size")
    if decode_batch:
        workers = _int(row, "decode_num_workers") or 1
        ranks = _int(row, "decode_attention_dp_size") or 1
        return float(decode_batch * workers * ranks)
    raise UnpredictableConfig("no concurrency: batch_size, silicon_concurrency and decode_batch_size are all empty")


def parse_row(row: Mapping[str, str], alternatives: list[dict[str, str]] | None = None) -> SiliconCase:
    """Raises UnpredictableConfig (with a reason) when the row names something outside the catalog or is incomplete.

    `alternatives`: the deployments published for the row's point (`alternatives_of`); each is read as the row
    completed with its deployment columns (P/D) and its MTP draft where it states one (those that cannot run are
    left out). The case keeps them in `alternatives` and is not fully specified, so never fitted: which one ran
    is not known, or (a single MTP line) it ran speculative decoding (module docstring).
    """
    if alternatives:
        case = parse_row(row)
        configs = []
        for line in alternatives:
            try:
                stated = {c: line[c] for c in (*DEPLOYMENT_COLUMNS, *SERVER_COLUMNS) if line.get(c)}
                config = parse_row({**row, **stated}).config
            except UnpredictableConfig:
                continue
            draft = _draft(line)
            if draft is not None:
                drafted = tuple(replace(r, worker=replace(r.worker, speculative=draft)) for r in config.roles)
                config = replace(config, roles=drafted)
            configs.append(config)
        return replace(case, alternatives=tuple(configs), fully_specified=False)
    model_path = (row.get("model_path") or "").strip()
    arch = find_model(model_path)
    if arch is None:
        raise UnpredictableConfig(f"model {model_path!r} is not in the catalog")
    system = (row.get("system") or "").strip()
    gpu = find_gpu(system)
    if gpu is None:
        raise UnpredictableConfig(f"GPU system {system!r} is not in the catalog")
    isl, osl = _int(row, "isl"), _int(row, "osl")
    if not isl or not osl:
        raise UnpredictableConfig("isl and osl must be positive")
    weight_format = weight_format_of(row, arch)
    arch = _as_served(row, arch, weight_format)
    mode = (row.get("mode") or "").strip().lower()
    if mode == "agg":
        worker = _role_worker(row, "", arch, gpu, weight_format, aggregated=True)
        roles: tuple[RoleDeployment, ...] = (RoleDeployment(Role.UNIFIED, worker, 1),)
        transfer = None
        specified = True
    elif mode == "disagg":
        prefill = _role_worker(row, "prefill_", arch, gpu, weight_format, aggregated=False)
        decode = _role_worker(row, "decode_", arch, gpu, weight_format, aggregated=False)
        roles = (
            RoleDeployment(Role.PREFILL, prefill, _int(row, "prefill_num_workers") or 1),
            RoleDeployment(Role.DECODE, decode, _int(row, "decode_num_workers") or 1),
        )
        transfer = "nixl"
        specified = bool(_int(row, "prefill_num_workers")) and bool(_int(row, "decode_num_workers"))
    else:
        raise UnpredictableConfig(f"mode {mode!r} is neither agg nor disagg")
    scale, cv = (1.0, 0.0)
    inferencex = _is_inferencex(row)
    if inferencex:
        # Uniform on [r, 1]: mean (1 + r)/2, standard deviation (1 − r)/√12.
        scale = (1 + RANGE_RATIO) / 2
        cv = (1 - RANGE_RATIO) / math.sqrt(12) / scale
    workload = Workload(
        request_rate_per_s=0.0,
        input_tokens=LengthDistribution(mean=isl * scale, cv=cv, max=isl),
        output_tokens=LengthDistribution(mean=osl * scale, cv=cv, max=osl),
        kind="random",
    )
    concurrency = concurrency_of(row)
    return SiliconCase(
        row_id=(row.get("id") or "").strip(),
        backend=(row.get("backend") or "").strip().lower(),
        model_path=model_path,
        arch=arch,
        gpu=gpu,
        config=ServingConfig(model=arch.name, roles=roles, transfer_backend=transfer),
        workload=workload,
        concurrency=concurrency,
        measured_ttft_ms=_float(row, "silicon_ttft_ms"),
        measured_tpot_ms=_float(row, "silicon_tpot_ms"),
        fully_specified=specified,
        scheduler_recv_interval=scheduler_recv_interval_of(row, arch, roles, concurrency),
        speculative_overlap=speculative_overlap_of(row, mode),
        requests_per_client=REQUESTS_PER_CLIENT if inferencex else None,
        not_fitted=(row.get(NOT_FITTED_COLUMN) or "").strip() or None,
        ttft_not_fitted=cold_first_requests(row, mode),
        campaign=campaign_of(row),
    )


def speculative_overlap_of(row: Mapping[str, str], mode: str) -> bool:
    """Whether the row's server ran speculative decoding, had it any, with SGLang's overlap scheduler (module
    docstring, "Speculative decoding without the overlap scheduler")."""
    system = (row.get("system") or "").strip().lower()
    precision = (row.get("precision") or "").strip().lower()
    if mode != "agg" or not _is_inferencex(row) or (system, precision) not in SPEC_V2_NOT_EXPORTED:
        return True
    return not _release_before(row, SPEC_OVERLAP_BY_DEFAULT_SINCE)


def _release_before(row: Mapping[str, str], release: tuple[int, ...]) -> bool:
    """Whether the row names an engine release older than `release` (False when it names none)."""
    found = _RELEASE.match((row.get("backend_version") or "").strip())
    return found is not None and tuple(int(part) for part in found.groups()) < release


def campaign_of(row: Mapping[str, str]) -> str:
    """The engine release the row names, else the month it was measured ("" when it says neither).

    One deployment measured in two campaigns is two engines: InferenceX's B200 DeepSeek-R1 runs of November 2025
    took a median 1.17× (NVFP4, 33 pairs) and 1.45× (FP8, 15 pairs) the TPOT of the same recipe, lengths and
    concurrency in March 2026 (SGLang 0.5.9).
    """
    release = (row.get("backend_version") or "").strip()
    if release:
        return release
    measured = _measured_day(row)
    return f"measured {measured[:7]}" if measured else ""


def cold_first_requests(row: Mapping[str, str], mode: str) -> str | None:
    """Why an InferenceX single-node run's TTFT includes a cold server's first requests, or None (module
    docstring, "Runs without warm-up")."""
    measured = _measured_day(row)
    if mode != "agg" or not _is_inferencex(row) or measured is None or measured >= INFERENCEX_WARMUP_SINCE:
        return None
    return (
        f"measured {measured}, before InferenceX's harness sent warm-up requests ({INFERENCEX_WARMUP_SINCE}): "
        "its first requests met a cold server"
    )


def _measured_day(row: Mapping[str, str]) -> str | None:
    """The day the row's source says it was measured (`measured=YYYY-MM-DD…`), as YYYY-MM-DD, if it says."""
    found = _MEASURED.search(row.get("silicon_data_source") or "")
    return found.group(1) if found else None


def scheduler_recv_interval_of(
    row: Mapping[str, str], arch: ModelArch, roles: tuple[RoleDeployment, ...], concurrency: float
) -> int:
    """The `--scheduler-recv-interval` the row's benchmark recipe launched its server with (module docstring)."""
    system = (row.get("system") or "").strip().lower()
    if not _is_inferencex(row) or system not in RECV_INTERVAL_SYSTEMS or not arch.name.startswith("DeepSeek"):
        return 1
    if len(roles) != 1 or roles[0].role is not Role.UNIFIED:
        return 1
    worker = roles[0].worker
    if worker.weight_format == "fp8" and worker.tp == 4:
        return RECV_INTERVAL_BELOW_16_CLIENTS
    return RECV_INTERVAL_FROM_16_CLIENTS if concurrency >= 16 else RECV_INTERVAL_BELOW_16_CLIENTS


def predict_row(
    model: PerformanceModel, case: SiliconCase, config: ServingConfig | None = None
) -> ConcurrencyPrediction:
    """The model at the row's concurrency, for its deployment (or `config`, one of its alternatives), with the
    server flags its benchmark ran with."""
    deployed = config or case.config
    speculative = any(role.worker.speculative is not None for role in deployed.roles)
    return model.predict_at_concurrency(
        case.arch,
        case.gpu,
        deployed,
        case.workload,
        case.concurrency,
        recv_interval=case.scheduler_recv_interval,
        overlap_schedule=case.speculative_overlap or not speculative,
        requests_per_client=case.requests_per_client,
    )


def predict_case(model: PerformanceModel, case: SiliconCase) -> tuple[float, float]:
    """(TTFT, TPOT) in seconds at the row's concurrency. A row with published alternatives gets the geometric
    mean over those the model can predict: it ran one of them, and which is not known."""
    if not case.alternatives:
        p = predict_row(model, case)
        return p.ttft_s, p.tpot_s
    logs: list[tuple[float, float]] = []
    for config in case.alternatives:
        try:
            p = predict_row(model, case, config)
        except UnpredictableConfig:
            continue
        logs.append((math.log(p.ttft_s), math.log(p.tpot_s)))
    if not logs:
        return predict_case(model, replace(case, alternatives=()))
    return math.exp(sum(t for t, _ in logs) / len(logs)), math.exp(sum(t for _, t in logs) / len(logs))


def iter_cases(rows: list[dict[str, str]], backend: str | None = None) -> Iterator[tuple[int, SiliconCase]]:
    """(index, case) for every parseable row of `backend` (all backends when None); unparseable rows are skipped."""
    for index, row in enumerate(rows):
        if backend is not None and (row.get("backend") or "").strip().lower() != backend:
            continue
        try:
            yield index, parse_row(row)
        except UnpredictableConfig:
            continue
