"""Recover the P/D deployments the silicon CSV leaves out, from InferenceX's published benchmark configs.

433 SGLang P/D rows of shared/data/silicon/silicon_measurements.csv (DeepSeek-R1, copied by AIConfigurator
from SemiAnalysis InferenceX database dumps) give each role's parallelism but not how many prefill and
decode workers ran, nor whether attention-DP was on. InferenceX publishes what it ran: every benchmark is a
`search-space` entry of `.github/configs/nvidia-master.yaml` in github.com/SemiAnalysisAI/InferenceX —
input/output lengths, the concurrencies, and per role the worker count, TP, EP and attention-DP.

For each such row this script reads the config as it stood when the row was measured (the last commit of
the file at or before the row's `measured=` time; a date without a time means the end of that day) and
keeps the entries of the same model, precision, GPU and lengths that list the row's concurrency and whose
prefill TP and EP and decode TP and EP equal the row's — a decode EP equal to the prefill's matches any
decode EP, for the dumps copy the prefill's EP there (a DEP48 decode recorded with EP 4). The row is
resolved only when every such entry
describes one deployment, without speculative decoding (the CSV schema has no column for MTP) and with a
TP that is the worker's GPU count (early GB200 entries say TP 1 and leave the layout to a recipe file).

Writes operator/frontier_operator/catalog/data/silicon_deployments.csv: the row id, the ten deployment
columns in the CSV's own encoding (an attention-DP worker of N GPUs is tp 1 × attention_dp N), and the
source (InferenceX commit, config key, recipe file). The package ships that file; `perf.silicon`
prefers a fully specified twin of the same measurement inside the CSV and falls back on it.

A row that the entries do not resolve — several deployments swept through its concurrency, or one run with
MTP — is not completed, but what InferenceX published for it is still a fact: the script writes every such
deployment, one line each, to catalog/data/silicon_deployment_alternatives.csv (the same columns, plus
``speculative_decoding``). `frontier predict` predicts such a row as each of its alternatives and reports their
geometric mean; the fit never uses it (it does not say which one ran). An entry's `spec-decoding` may say
"none", which is no speculative decoding (read as MTP before 4 December 2026, which left 52 GB200 and
GB300 rows unresolved).

Each P/D entry names the srt-slurm recipe its workers ran (`CONFIG_FILE=recipes/…`): the SGLang flags of each
role. The script reads it from a clone of srt-slurm at the commit the runs cloned (`SRT_SLURM_COMMITS`) and
writes, on both files, each role's `--max-running-requests`, `--chunked-prefill-size` and
`--mem-fraction-static` (``SERVER_COLUMNS``), an MTP deployment's draft (`--speculative-num-steps` …, the
``speculative_*`` columns) and the recipe it read (``recipe``).

The schema has no column for speculative decoding either, and InferenceX benchmarks single-node SGLang with and
without MTP (DeepSeek-R1 FP8 on B200 at TP8, March 2026: without from 4 to 64 clients, with from 4 to 512). For each
aggregated row the script reads the single-node entries of the config at the row's time (same model, precision, GPU,
lengths, TP and EP, the row's concurrency in the entry's sweep); where one of them ran MTP, every such run goes to the
alternatives file, an MTP one with the draft its benchmark script passes (`SPECULATIVE_NUM_STEPS` …, in the
``speculative_*`` columns), and a row that is the same measurement filed under the architecture's other name
(`measurement_key`) gets the same lines. `perf.silicon` predicts such a row over those runs and never fits it.

Twenty aggregated GB200 rows ("tp72") predate the config's GB200 SGLang entries: `runners/launch_gb200-nv.sh`
launched them as Dynamo-SGLang P/D deployments filling the rack. The script reads that file as it stood at each
such row's time too (`launched`), and writes the deployment it ran to the supplement, which `perf.silicon` then
reads the row as.

Usage: python bench/inferencex_deployments.py --repo PATH_TO_INFERENCEX_CLONE --srt-slurm PATH_TO_SRT_SLURM_CLONE
       [--data CSV] [--out CSV] [--alternatives-out CSV]
Needs clones of SemiAnalysisAI/InferenceX (the output shipped was made from commit 843c6254f) and csahithi/srt-slurm
(from a25ed8c3d, its sa-submission-q1-2026 branch, which holds every commit `SRT_SLURM_COMMITS` names).
"""

from __future__ import annotations

import argparse
import bisect
import csv
import datetime as dt
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from frontier_operator.perf.silicon import (
    DEPLOYMENT_ALTERNATIVES_PATH,
    DEPLOYMENT_COLUMNS,
    DEPLOYMENT_SUPPLEMENT_PATH,
    DRAFT_COLUMNS,
    SERVER_COLUMNS,
    SERVER_FLAGS,
    architecture_of,
    measurement_key,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "silicon" / "silicon_measurements.csv"
CONFIG_PATH = ".github/configs/nvidia-master.yaml"
FRAMEWORK = "dynamo-sglang"
SINGLE_NODE_FRAMEWORK = "sglang"
_DRAFT_VARIABLES = ("SPECULATIVE_NUM_STEPS", "SPECULATIVE_EAGLE_TOPK", "SPECULATIVE_DRAFT_TOKENS")
_MEASURED = re.compile(r"measured=(\d{4}-\d{2}-\d{2})(T[0-9:.]+)?Z?")
_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")

# One role as InferenceX states it: (workers, tp, ep, attention-DP).
Role = tuple[int, int, int, bool]


class FileHistory:
    """One file of the repository at any moment of its history."""

    def __init__(self, repo: Path, path: str) -> None:
        self.repo, self.path = repo, path
        log = subprocess.run(
            ["git", "-C", str(repo), "log", "--format=%H %cI", "--", path],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        stamped = zip(log[::2], log[1::2], strict=True)
        pairs = sorted((dt.datetime.fromisoformat(when), commit) for commit, when in stamped)
        self.times = [when for when, _ in pairs]
        self.commits = [commit for _, commit in pairs]
        self._texts: dict[str, str] = {}

    def commit_at(self, when: dt.datetime) -> str | None:
        index = bisect.bisect_right(self.times, when) - 1
        return self.commits[index] if index >= 0 else None

    def text(self, commit: str) -> str:
        """The file at `commit`; "" where that commit deleted it."""
        if commit not in self._texts:
            self._texts[commit] = show(self.repo, commit, self.path)
        return self._texts[commit]


class ConfigHistory:
    """nvidia-master.yaml at any moment of the repository's history (parsed once per commit)."""

    def __init__(self, repo: Path) -> None:
        self.file = FileHistory(repo, CONFIG_PATH)
        self._parsed: dict[str, dict[str, Any]] = {}

    def at(self, when: dt.datetime) -> tuple[str, dict[str, Any]] | None:
        commit = self.file.commit_at(when)
        if commit is None:
            return None
        if commit not in self._parsed:
            try:
                self._parsed[commit] = yaml.safe_load(self.file.text(commit)) or {}
            except yaml.YAMLError:
                self._parsed[commit] = {}
        return commit, self._parsed[commit]


def measured_at(source: str) -> dt.datetime | None:
    match = _MEASURED.search(source)
    if match is None:
        return None
    day = dt.datetime.fromisoformat(match.group(1)).replace(tzinfo=dt.UTC)
    clock = (match.group(2) or "").lstrip("T")
    if not clock or clock.startswith("00:00:00"):
        return day + dt.timedelta(days=1) - dt.timedelta(seconds=1)
    return dt.datetime.fromisoformat(f"{match.group(1)}T{clock}").replace(tzinfo=dt.UTC)


def _role(entry: dict[str, Any]) -> Role:
    return (int(entry.get("num-worker") or 1), int(entry["tp"]), int(entry.get("ep") or 1), bool(entry.get("dp-attn")))


def _encode(role: Role) -> list[str]:
    """The CSV's encoding: workers, tp, attention_dp, moe_tp, moe_ep (an attention-DP worker is tp 1 × dp N)."""
    workers, tp, ep, attention_dp = role
    moe_tp = 1 if ep > 1 else tp
    if attention_dp:
        return [str(workers), "1", str(tp), str(moe_tp), str(ep)]
    return [str(workers), str(tp), "1", str(moe_tp), str(ep)]


def _int(row: dict[str, str], key: str) -> int:
    return int(float(row.get(key) or 0))


def _same_model(entry_model: str, model_path: str) -> bool:
    """An entry's checkpoint is a release of the row's model: FP8 entries name the upstream repository
    (deepseek-ai/DeepSeek-R1-0528), FP4 ones NVIDIA's quantised one (nvidia/DeepSeek-R1-0528-NVFP4-v2) or a
    local name (deepseek-r1-fp4), so the organisation is dropped and case ignored."""
    return entry_model.rsplit("/", 1)[-1].lower().startswith(model_path.rsplit("/", 1)[-1].lower())


# A deployment InferenceX ran at a row's point: (prefill, decode, speculative decoding, source).
Published = tuple[Role, Role, bool, str]


def _spaces_at(
    row: dict[str, str], config: dict[str, Any], framework: str, disagg: bool
) -> Iterator[tuple[str, dict[str, Any], int]]:
    """(config key, search-space entry, the row's concurrency) for every search space of the config's entries of
    `framework` (P/D or not) at the row's model, precision, GPU and lengths; the caller matches the rest."""
    gpu = row["system"].removesuffix("_sxm")
    concurrency = _concurrency(row)
    if concurrency is None:
        return
    for key, entry in config.items():
        if not isinstance(entry, dict) or entry.get("framework") != framework or bool(entry.get("disagg")) != disagg:
            continue
        if entry.get("precision") != row["precision"] or not _same_model(str(entry.get("model")), row["model_path"]):
            continue
        if str(entry.get("runner", "")).split("-")[0] != gpu:
            continue
        for lengths in entry.get("seq-len-configs") or []:
            if (lengths.get("isl"), lengths.get("osl")) == (_int(row, "isl"), _int(row, "osl")):
                yield from ((key, space, concurrency) for space in lengths.get("search-space") or [])


# The srt-slurm commit the runs of each InferenceX config commit cloned: the last commit of ishandhanani/srt-slurm's
# branch sa-submission-q1-2026 before the InferenceX commit. That repository cannot be cloned any more; csahithi/
# srt-slurm keeps the branch's history up to 12 February 2026 (its sahithi/test-multiple-runners, whose merges
# are the original branch's) and a rebased copy of the rest (its sa-submission-q1-2026, original author dates).
SRT_SLURM_COMMITS = {
    "8a02464b8": "6a960e1df740d5f91b392cdde6f206202506456c",
    "04b564b39": "6a960e1df740d5f91b392cdde6f206202506456c",
    "fcc04aaa2": "6a960e1df740d5f91b392cdde6f206202506456c",
    "2767db504": "6a960e1df740d5f91b392cdde6f206202506456c",
    "37f353be2": "0f0c12cd6b0dd62e71b0c7ab4f247727bb54e954",
    "46e0b5ff0": "f4e23a064de780247609f0f0fba0d1f85a6f1f47",
    "84b7df683": "e6fcc4300a05013b68936580c938147e43394ee4",
    "3282fdeba": "05382c32a95aa2ae3cfbf609035632f00b073a79",
    "8cdf35781": "cf934ae489d84f3aace3c4b1f0d5eca53d4ce62f",
    "78d48618f": "b92b1f60608bf35331591e4ccac7882b7f3748aa",
    "ee032b37f": "b92b1f60608bf35331591e4ccac7882b7f3748aa",
    "593fb431a": "4bc2a36457d94ba0e04b3365e837369a14ebd030",
}


def recipe_settings(srt_slurm: Path, source: str, inferencex_commit: str) -> dict[str, str]:
    """The server flags (``SERVER_COLUMNS``) and the decode worker's draft (``DRAFT_COLUMNS``) of the srt-slurm
    recipe a P/D deployment's `source` names (`CONFIG_FILE=recipes/…` in its search-space entry), as the runs of
    `inferencex_commit` cloned it (`SRT_SLURM_COMMITS`), read from a clone of csahithi/srt-slurm; with `recipe`
    (commit and path). Empty values for what it does not say."""
    empty = dict.fromkeys((*SERVER_COLUMNS, *DRAFT_COLUMNS, "recipe"), "")
    match = re.search(r"CONFIG_FILE=(\S+)", source)
    commit = SRT_SLURM_COMMITS.get(inferencex_commit[:9])
    if match is None or commit is None:
        return empty
    try:
        roles = (yaml.safe_load(show(srt_slurm, commit, match.group(1))) or {})["backend"]["sglang_config"]
    except (yaml.YAMLError, KeyError, TypeError):
        return empty
    return {**empty, **recipe_flags(roles), "recipe": f"srt-slurm@{commit[:9]} {match.group(1)}"}


def recipe_flags(roles: dict[str, Any]) -> dict[str, str]:
    """A recipe's `sglang_config` (per role, SGLang's flags by name) in the supplement's columns."""
    out = {}
    for role in ("prefill", "decode"):
        flags = roles.get(role) or {}
        for name in SERVER_FLAGS:
            value = flags.get(name.replace("_", "-"))
            out[f"{role}_{name}"] = "" if value is None else str(value)
    decode = roles.get("decode") or {}
    if decode.get("speculative-algorithm"):
        for column in DRAFT_COLUMNS:
            out[column] = str(decode.get(column.replace("_", "-"), ""))
    return out


def _speculative(space: dict[str, Any]) -> str:
    """A search-space entry's speculative decoding, "" for none: the configs write `spec-decoding: "none"` as
    often as they leave it out, and "none" is a true string."""
    speculative = str(space.get("spec-decoding") or "")
    return "" if speculative == "none" else speculative


def published(row: dict[str, str], config: dict[str, Any]) -> list[Published]:
    """Every distinct deployment of the config's search-space entries that matches the row, in config order."""
    found: dict[tuple[Role, Role, bool], str] = {}
    for key, space, concurrency in _spaces_at(row, config, FRAMEWORK, disagg=True):
        if concurrency not in (space.get("conc-list") or []):
            continue
        prefill, decode = _role(space["prefill"]), _role(space["decode"])
        row_prefill_ep, row_decode_ep = _int(row, "prefill_moe_ep_size"), _int(row, "decode_moe_ep_size")
        if (prefill[1], prefill[2], decode[1]) != (
            _int(row, "prefill_tp_size"),
            row_prefill_ep,
            _int(row, "decode_tp_size"),
        ) or decode[2] not in (row_decode_ep, decode[2] if row_decode_ep == row_prefill_ep else None):
            continue
        settings = space["prefill"].get("additional-settings") or []
        source = f"{key} {' '.join(str(s) for s in settings)}".strip()
        found.setdefault((prefill, decode, _speculative(space) != ""), source)
    return [(prefill, decode, speculative, source) for (prefill, decode, speculative), source in found.items()]


def _concurrencies(space: dict[str, Any]) -> list[int]:
    """The concurrencies a search-space entry sweeps: its list, or conc-start doubling up to conc-end (InferenceX's
    utils/matrix_logic/generate_sweep_configs.py, default step 2; the last step is cut to conc-end)."""
    if space.get("conc-list"):
        return [int(c) for c in space["conc-list"]]
    start, end = int(space.get("conc-start") or 0), int(space.get("conc-end") or 0)
    if not 0 < start <= end:
        return []
    out = []
    while start < end:
        out.append(start)
        start *= 2
    return [*out, end]


Point = tuple[int, int, int]  # input length, output length, concurrency


def published_aggregated(row: dict[str, str], config: dict[str, Any]) -> list[tuple[str, str, frozenset[Point]]]:
    """(speculative decoding, config key, the points that entry sweeps at the row's TP and EP) of every distinct
    single-node SGLang run the config lists at an aggregated row's point: same model, precision, GPU, lengths,
    TP and EP, the row's concurrency in the sweep. Speculative decoding is the entry's `spec-decoding` ("" when
    none)."""
    found: dict[str, str] = {}
    row_tp, row_ep = _int(row, "tp_size"), _int(row, "moe_ep_size") or 1
    for key, space, concurrency in _spaces_at(row, config, SINGLE_NODE_FRAMEWORK, disagg=False):
        if concurrency not in _concurrencies(space):
            continue
        if (int(space["tp"]), int(space.get("ep") or 1)) != (row_tp, row_ep):
            continue
        found.setdefault(_speculative(space), key)
    return sorted((speculative, key, _swept(config[key], row_tp, row_ep)) for speculative, key in found.items())


def _swept(entry: dict[str, Any], tp: int, ep: int) -> frozenset[Point]:
    return frozenset(
        (int(lengths["isl"]), int(lengths["osl"]), concurrency)
        for lengths in entry.get("seq-len-configs") or []
        for space in lengths.get("search-space") or []
        if (int(space["tp"]), int(space.get("ep") or 1)) == (tp, ep)
        for concurrency in _concurrencies(space)
    )


def draft_settings(script: str) -> dict[str, str]:
    """The draft of an MTP benchmark script (`SPECULATIVE_NUM_STEPS=2` …) in the alternatives' draft columns;
    empty values when the script does not state them."""
    out = {}
    for column, variable in zip(DRAFT_COLUMNS, _DRAFT_VARIABLES, strict=True):
        match = re.search(rf"^\s*{variable}=(\d+)\s*$", script, re.MULTILINE)
        out[column] = match.group(1) if match else ""
    return out


def benchmark_script(entry: dict[str, Any], speculative: str) -> str:
    """The single-node script InferenceX's runners launch for an entry (runners/launch_b200-nb.sh:
    `benchmarks/single_node/${EXP_NAME%%_*}_${PRECISION}_b200${FRAMEWORK_SUFFIX}${SPEC_SUFFIX}.sh`; SGLang has no
    framework suffix)."""
    gpu = str(entry.get("runner", "")).split("-")[0]
    suffix = "_mtp" if speculative == "mtp" else ""
    return f"benchmarks/single_node/{entry.get('model-prefix')}_{entry.get('precision')}_{gpu}{suffix}.sh"


def show(repo: Path, commit: str, path: str) -> str:
    """A file of the repository at a commit; "" when it did not exist there."""
    command = ["git", "-C", str(repo), "show", f"{commit}:{path}"]
    shown = subprocess.run(command, capture_output=True, text=True, check=False)
    return shown.stdout if shown.returncode == 0 else ""


def aggregated_alternatives(
    row: dict[str, str], history: ConfigHistory, repo: Path
) -> tuple[list[dict[str, str]], dict[str, frozenset[Point]]]:
    """Alternatives lines for an aggregated row that InferenceX ran, at its point, with speculative decoding (alone
    or beside a run without): one line per published run, an MTP one with its script's draft; and each run's
    sweep by its speculative decoding. A row whose point only ran without speculative decoding gets none — it is
    what the row says."""
    when = measured_at(row.get("silicon_data_source") or "")
    config = history.at(when) if when else None
    if config is None:
        return [], {}
    commit, parsed = config
    found = published_aggregated(row, parsed)
    if not any(speculative for speculative, _, _ in found):
        return [], {}
    lines = []
    for speculative, key, _ in found:
        script = benchmark_script(parsed[key], speculative)
        draft = draft_settings(show(repo, commit, script)) if speculative else dict.fromkeys(DRAFT_COLUMNS, "")
        lines.append(
            {
                "id": row["id"],
                **dict.fromkeys(DEPLOYMENT_COLUMNS, ""),
                "speculative_decoding": speculative,
                **draft,
                "source": f"InferenceX@{commit[:9]} {key} {script}",
            }
        )
    return lines, {speculative: sweep for speculative, _, sweep in found}


def identified_runs(rows: list[dict[str, str]], sweeps: dict[str, dict[str, frozenset[Point]]]) -> dict[str, str]:
    """Row id → the speculative decoding ("" for none) of the run it is, where the data say which; `sweeps` holds
    each aggregated row's runs (`aggregated_alternatives`), and a row that is the same measurement filed under the
    architecture's other name (`_run_key`) shares them.

    The database dumps group one benchmark run's rows under a `config_id`. A group whose points are exactly the
    sweep of the entry without speculative decoding, where the MTP entry sweeps other points too, is that
    entry's run (B200 DeepSeek-R1 FP8 TP8, April 2026: 4–64 clients and 8k/1k at 4 only, where MTP ran to 512).
    A row that is the same measurement is that run too, and a different result at the same point is the other
    run, with MTP. A point only one entry swept is that entry's run.
    """
    key_of = {row["id"]: _run_key(row) for row in rows}
    runs_of = {key_of[row_id]: runs for row_id, runs in sweeps.items()}
    runs_of.pop(None, None)
    listed = [row for row in rows if key_of[row["id"]] in runs_of]
    groups: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        config_id = re.search(r"config_id=(\d+)", row.get("silicon_data_source") or "")
        if config_id is not None:
            dump = (row.get("silicon_data_source") or "").split(";")[0]
            groups.setdefault(f"{dump} {config_id.group(1)}", []).append(row)
    plain = set()
    for members in groups.values():
        runs = next((runs_of[key] for row in members if (key := key_of[row["id"]]) in runs_of), {})
        if {_point(row) for row in members} == runs.get("") != runs.get("mtp"):
            plain |= {key_of[row["id"]] for row in members}
    plain_points = {_point_of_deployment(row) for row in listed if key_of[row["id"]] in plain}
    out: dict[str, str] = {}
    for row in listed:
        runs = runs_of[key_of[row["id"]]]
        if len(runs) == 1:
            (out[row["id"]],) = runs
        elif key_of[row["id"]] in plain:
            out[row["id"]] = ""
        elif _point_of_deployment(row) in plain_points:
            out[row["id"]] = "mtp"
    return out


def _run_key(row: dict[str, str]) -> tuple[str, ...] | None:
    """`measurement_key` with the results to 12 significant digits: the dumps and the files print one run's
    float with or without its last digit (22.52931171204235 and 22.529311712042354 ms)."""
    results = {metric: f"{float(row[metric]):.12g}" for metric in ("silicon_ttft_ms", "silicon_tpot_ms") if row[metric]}
    return measurement_key({**row, **results})


def _kept(line: dict[str, str], run: str | None) -> bool:
    """Whether an alternatives line stays: all of them where the run is not known, none where it ran without MTP
    (the row says all there is), the MTP line where it ran MTP."""
    return run is None or run == line["speculative_decoding"] != ""


def _concurrency(row: dict[str, str]) -> int | None:
    """The clients of an InferenceX row (`silicon_concurrency=` in its source), if it says."""
    match = _CONCURRENCY.search(row.get("silicon_data_source") or "")
    return int(match.group(1)) if match else None


def _point(row: dict[str, str]) -> Point:
    return _int(row, "isl"), _int(row, "osl"), _concurrency(row) or 0


def _point_of_deployment(row: dict[str, str]) -> tuple[object, ...]:
    """Where a run was measured: the architecture, GPU, precision, TP and EP, and its point."""
    fields = tuple(row[field] for field in ("system", "precision", "tp_size", "moe_ep_size"))
    return (architecture_of(row), *fields, *_point(row))


def with_twins(lines: list[dict[str, str]], rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """`lines` plus a copy for every aggregated row that is the same measurement as a row they name, filed again
    under the other name of its architecture (the dumps file DeepSeek-R1 runs as DeepSeek-V3 too)."""
    by_id = {row["id"]: row for row in rows}
    named: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for line in lines:
        key = measurement_key(by_id[line["id"]])
        if key is not None:
            named.setdefault(key, []).append(line)
    out = list(lines)
    listed = {line["id"] for line in lines}
    for row in rows:
        key = measurement_key(row)
        if row["id"] in listed or row["mode"] != "agg" or key is None or key not in named:
            continue
        twin = named[key][0]["id"]
        copies = [line for line in named[key] if line["id"] == twin]
        out.extend({**line, "id": row["id"], "source": f"{line['source']} (twin {twin})"} for line in copies)
    return out


def _states_layout(deployment: Published) -> bool:
    # Early GB200 entries say TP 1 and leave the layout to a recipe file: they describe no deployment.
    prefill, decode, _, _ = deployment
    return prefill[1] > 1 and decode[1] > 1


def resolve(found: list[Published]) -> Published | None:
    """The row's deployment when every matching search-space entry (`published`) describes one, stating its
    layout, without speculative decoding."""
    if len(found) != 1 or found[0][2] or not _states_layout(found[0]):
        return None
    return found[0]


def _line(row_id: str, commit: str, deployment: Published) -> dict[str, str]:
    """A deployment as a line of the supplement or the alternatives file, in the CSV's own encoding."""
    prefill, decode, _, source = deployment
    recorded = dict(zip(DEPLOYMENT_COLUMNS, _encode(prefill) + _encode(decode), strict=True))
    return {"id": row_id, **recorded, "source": f"InferenceX@{commit[:9]} {source}"}


# Until InferenceX listed its GB200 SGLang runs in nvidia-master.yaml, they were launched from this script, whose
# Dynamo-SGLang branch loads DeepSeek-R1-0528 (FP8) and runs one P/D deployment per ISL/OSL through Dynamo's
# `submit_disagg.sh PREFILL_NODES PREFILL_WORKERS DECODE_NODES DECODE_WORKERS ...` over a concurrency list. The dumps
# file those runs as aggregated, with the run's GPU count as TP ("tp72").
LAUNCH_PATH = "runners/launch_gb200-nv.sh"
LAUNCH_MODEL = "deepseek-r1-0528"
# Dynamo's SGLang recipes for GB200 (github.com/ai-dynamo/dynamo, components/backends/sglang/slurm_jobs):
# `submit_disagg.sh` counts trays of four GPUs, and both workers of `scripts/gb200-fp8.sh` run attention-DP with
# DeepEP over all their GPUs (`--tp-size N --dp-size N --enable-dp-attention --enable-deepep-moe`), as
# InferenceX's later recipes of the same shapes state (recipes/gb200-fp8/1k1k/mid-curve.yaml: 3 × DEP8 → DEP48).
DYNAMO_GPUS_PER_NODE = 4
_DYNAMO_SGLANG_RUN = re.compile(
    r'\[ "\$ISL" = "(\d+)" \] && \[ "\$OSL" = "(\d+)" \]; then\s+'
    r'concurrency_list="([\dx]+)"\s+bash \./submit_disagg\.sh (\d+) (\d+) (\d+) (\d+) '
)


def launched(row: dict[str, str], script: str) -> Published | None:
    """The Dynamo-SGLang run of the GB200 launch script (`LAUNCH_PATH`, as it stood) that measured an aggregated
    row: same lengths, the row's concurrency in its list, and as many GPUs as the row's TP."""
    concurrency_match = _CONCURRENCY.search(row.get("silicon_data_source") or "")
    if (
        row["system"] != "gb200"
        or row["precision"] != "fp8"
        or not _same_model(LAUNCH_MODEL, row["model_path"])
        or concurrency_match is None
    ):
        return None
    for match in _DYNAMO_SGLANG_RUN.finditer(script):
        isl, osl, concurrencies, *counts = match.groups()
        prefill_nodes, prefill_workers, decode_nodes, decode_workers = (int(c) for c in counts)
        if (int(isl), int(osl)) != (_int(row, "isl"), _int(row, "osl")):
            continue
        if concurrency_match.group(1) not in concurrencies.split("x"):
            continue
        if (prefill_nodes + decode_nodes) * DYNAMO_GPUS_PER_NODE != _int(row, "tp_size"):
            continue
        prefill_gpus = prefill_nodes * DYNAMO_GPUS_PER_NODE // prefill_workers
        decode_gpus = decode_nodes * DYNAMO_GPUS_PER_NODE // decode_workers
        prefill: Role = (prefill_workers, prefill_gpus, prefill_gpus, True)
        decode: Role = (decode_workers, decode_gpus, decode_gpus, True)
        source = f"{LAUNCH_PATH} submit_disagg.sh {' '.join(counts)}"
        return prefill, decode, False, source
    return None


def _write(path: Path, fieldnames: list[str], rows: list[dict[str, str]]) -> None:
    """`rows` in `fieldnames`' columns (a supplement line leaves out the draft columns its recipe has too)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fieldnames, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, type=Path, help="a clone of SemiAnalysisAI/InferenceX")
    parser.add_argument(
        "--srt-slurm", required=True, type=Path, help="a clone of csahithi/srt-slurm (SRT_SLURM_COMMITS)"
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEPLOYMENT_SUPPLEMENT_PATH)
    parser.add_argument("--alternatives-out", type=Path, default=DEPLOYMENT_ALTERNATIVES_PATH)
    args = parser.parse_args(argv)
    history = ConfigHistory(args.repo)
    launches = FileHistory(args.repo, LAUNCH_PATH)
    with args.data.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    out: list[dict[str, str]] = []
    ambiguous: list[dict[str, str]] = []
    speculative: list[dict[str, str]] = []
    sweeps: dict[str, dict[str, frozenset[Point]]] = {}
    candidates = relabelled = 0
    for row in rows:
        if row["backend"] == "sglang" and row["mode"] == "agg":
            when = measured_at(row.get("silicon_data_source") or "")
            commit = launches.commit_at(when) if when else None
            run = launched(row, launches.text(commit)) if commit else None
            if commit and run is not None:
                out.append(_line(row["id"], commit, run))
                relabelled += 1
            else:
                lines, runs = aggregated_alternatives(row, history, args.repo)
                speculative.extend(lines)
                if runs:
                    sweeps[row["id"]] = runs
            continue
        if row["backend"] != "sglang" or row["mode"] != "disagg" or row["decode_num_workers"]:
            continue
        candidates += 1
        when = measured_at(row.get("silicon_data_source") or "")
        config = history.at(when) if when else None
        if config is None:
            continue
        commit, parsed = config
        found = published(row, parsed)
        resolved = resolve(found)
        if resolved is not None:
            out.append({**_line(row["id"], commit, resolved), **recipe_settings(args.srt_slurm, resolved[3], commit)})
            continue
        # What InferenceX ran at an unresolved row's point: every matching deployment that states its layout.
        ambiguous.extend(
            {
                **_line(row["id"], commit, deployment),
                "speculative_decoding": "mtp" if deployment[2] else "",
                # The draft of a P/D run lives in the recipe file the config names.
                **recipe_settings(args.srt_slurm, deployment[3], commit),
            }
            for deployment in found
            if _states_layout(deployment)
        )
    _write(args.out, ["id", *DEPLOYMENT_COLUMNS, *SERVER_COLUMNS, "source", "recipe"], out)
    speculative = with_twins(speculative, rows)
    at_speculative_points = len({line["id"] for line in speculative})
    # A row whose run is known keeps that run's line only; one known to have run without MTP keeps none.
    known = identified_runs(rows, sweeps)
    speculative = [line for line in speculative if _kept(line, known.get(line["id"]))]
    columns = ["id", *DEPLOYMENT_COLUMNS, "speculative_decoding", *DRAFT_COLUMNS, *SERVER_COLUMNS, "source", "recipe"]
    _write(args.alternatives_out, columns, ambiguous + speculative)
    rows_with_alternatives = len({line["id"] for line in ambiguous})
    print(
        f"resolved {len(out) - relabelled} of {candidates} P/D rows without worker counts; wrote {args.out}; "
        f"{rows_with_alternatives} more with {len(ambiguous)} published alternatives; wrote {args.alternatives_out}; "
        f"{relabelled} aggregated rows are the P/D runs of {LAUNCH_PATH}; "
        f"{at_speculative_points} aggregated rows ran at a point InferenceX ran with speculative decoding: "
        f"{sum(1 for run in known.values() if run)} ran MTP, {sum(1 for run in known.values() if not run)} without, "
        f"{at_speculative_points - len(known)} unknown ({len(speculative)} alternatives lines)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
