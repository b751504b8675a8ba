"""A corpus of malformed and hostile FrontierTargets: each is refused — by the CRD schema or its CEL rules
at `kubectl apply`, or by the operator (API models, catalog, planner, renderer) with a structured error —
and nothing crashes, hangs or answers with a megabyte.

Three sources: hand-written cases (each with the layers that must refuse it), a wrong JSON type at
every field of every example (the schema and the models must both refuse, naming that field), and
hypothesis (random hostile values anywhere in the tree, random trees, fuzzed config.json): never a crash,
always a structured, bounded refusal. Raw YAML hazards (duplicate keys, alias bombs, deep nesting,
Python tags) live as files in `corpus/` and go through `frontier validate|plan|render`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontier_operator.api import SpecInvalid, load_target_file
from frontier_operator.cli import build_parser, main
from frontier_operator.planner.types import Infeasible
from frontier_operator.reconcile.core import Planned
from hardening_support import (
    CORPUS,
    EXAMPLES,
    MAX_DECISION_SECONDS,
    MAX_ERROR_CHARS,
    ROOT,
    dotted,
    example,
    leaves,
    replaced,
    structural_problems,
    verdict,
)
from hostile_corpus import CASES, DUMPER, HF_CONFIGS, Case, hf_config, inline_model, pool, put, with_spec
from schema_tools import openapi_schema, walk_schema


def test_the_corpus_is_large_and_names_are_unique() -> None:
    assert len({c.name for c in CASES}) == len(CASES)
    assert len(CASES) + len(RAW_FILES) >= 100


@pytest.mark.parametrize("hostile", CASES, ids=lambda c: c.name)
def test_each_hostile_target_is_refused_where_expected(hostile: Case) -> None:
    found = verdict(hostile.document)
    assert found.layers == hostile.refused_by, found.describe()
    assert found.outcome is not None
    assert not isinstance(found.outcome, Planned) or found.layers == {"crd"}
    assert structural_problems(found.outcome) == []
    assert found.seconds < MAX_DECISION_SECONDS


# --------------------------------------------------------------------- a wrong type at every field


def _wrong_type_cases() -> list[tuple[str, str, Any, tuple[str | int, ...]]]:
    cases = []
    for name in EXAMPLES:
        document = example(name)
        for path, value in leaves(document["spec"], ("spec",)):
            if "inline" in path:
                continue  # config.json is free-form: its keys are judged by the catalog (cases above)
            wrong: Any = ["a", "list"] if isinstance(value, dict) else {"an": "object"}
            cases.append((name, dotted(path), wrong, path))
    return cases


WRONG_TYPES = _wrong_type_cases()


@pytest.mark.parametrize(("name", "where", "wrong", "path"), WRONG_TYPES, ids=[f"{c[0]}:{c[1]}" for c in WRONG_TYPES])
def test_a_wrong_type_anywhere_is_refused_by_the_schema_and_the_models_at_that_field(
    name: str, where: str, wrong: Any, path: tuple[str | int, ...]
) -> None:
    document = replaced(example(name), path, wrong)
    found = verdict(document)
    assert {"crd", "model"} <= found.layers, found.describe()
    assert any(message.startswith(where) for message in found.messages["crd"]), found.messages["crd"]
    assert any(message.startswith(where) for message in found.messages["model"]), found.messages["model"]
    assert found.outcome is not None and structural_problems(found.outcome) == []


# ---------------------------------------------------------------------------------------- hypothesis

HOSTILE_TEXT = st.sampled_from(
    ["NaN", "nan", "inf", "-inf", "Infinity", "1e309", "-1", "0", "", " ", "\x00", "\u202e", "🚀", "9" * 400]
)
HOSTILE_NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**9, 1e308, -0.0]),
)
HOSTILE_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    HOSTILE_NUMBERS,
    HOSTILE_TEXT,
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8).map(lambda s: s * 20_000),
)
HOSTILE_VALUES = st.recursive(
    HOSTILE_LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
# The models are strict ("8" is not 8, "yes" is not true), as the schema is; the one leniency left:
# a plain number where the schema wants an integer or a unit string (a rate, a price): `2.5` for `2.5/s`.
_NUMBER_FOR_INT_OR_STRING = re.compile(r"Invalid value: -?[0-9.e+-]+ is not valid under any of the given schemas$")


def _lax(message: str) -> bool:
    return bool(_NUMBER_FOR_INT_OR_STRING.search(message))


SPEC_NODES = [(name, path) for name in EXAMPLES for path, _ in leaves(example(name)["spec"], ("spec",))]
# 100 examples per property in `make test`; FRONTIER_HOSTILE_EXAMPLES=3000 digs deeper.
HOSTILE_EXAMPLES = int(os.environ.get("FRONTIER_HOSTILE_EXAMPLES", "100"))
HYPOTHESIS = settings(
    max_examples=HOSTILE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _assert_refused_or_planned_cleanly(document: Any) -> None:
    found = verdict(document)  # a crash fails the test with the example hypothesis found
    assert found.outcome is not None
    assert structural_problems(found.outcome) == [], found.describe()
    assert found.seconds < MAX_DECISION_SECONDS
    # Defence in depth: what the API server would refuse, the operator refuses too (a stale CRD, a
    # direct write to etcd, `frontier plan` on a file never applied).
    if {"crd", "cel"} & found.layers and not {"model", "catalog"} & found.layers:
        lax = [m for m in found.messages.get("crd", []) if _lax(m)]
        assert "cel" not in found.layers and lax == found.messages["crd"], found.describe()


@HYPOTHESIS
@given(node=st.sampled_from(SPEC_NODES), value=HOSTILE_VALUES)
def test_a_hostile_value_anywhere_in_the_tree_never_crashes_the_operator(
    node: tuple[str, tuple[str | int, ...]], value: Any
) -> None:
    name, path = node
    _assert_refused_or_planned_cleanly(replaced(example(name), path, value))


@HYPOTHESIS
@given(spec=HOSTILE_VALUES)
def test_a_random_tree_as_the_spec_never_crashes_the_operator(spec: Any) -> None:
    document = example()
    document["spec"] = spec
    _assert_refused_or_planned_cleanly(document)


CONFIG_KEYS = sorted(hf_config())


# Half as many: a config.json that stays readable is a new model, planned from scratch (~0.1 s each).
@settings(HYPOTHESIS, max_examples=max(1, HOSTILE_EXAMPLES // 2))
@given(
    base=st.sampled_from(sorted(p.name for p in HF_CONFIGS.iterdir() if p.is_dir())),
    key=st.one_of(st.sampled_from(CONFIG_KEYS), st.text(max_size=30)),
    value=HOSTILE_VALUES,
)
def test_a_hostile_config_json_is_a_catalog_refusal_never_a_crash(base: str, key: str, value: Any) -> None:
    config = hf_config(base)
    config[key] = value
    found = verdict(inline_model(config))
    assert found.outcome is not None
    assert structural_problems(found.outcome) == [], found.describe()
    assert found.seconds < MAX_DECISION_SECONDS


# ------------------------------------------------------------------- valid but extreme: the planner

EXTREMES = {
    "a-million-token-prompts-within-context": with_spec(
        {
            "model": {"name": "Llama-3.1-8B-Instruct"},
            "workload": {
                "requestRate": "1/s",
                "inputTokens": {"mean": "100k", "max": "128Ki"},
                "outputTokens": {"mean": 1},
            },
        }
    ),
    "a-million-requests-per-second": put("spec.workload.requestRate", "1000000/s"),
    "a-trillion-parameters-on-one-gpu": with_spec(
        {"model": {"name": "Kimi-K2.5"}, "hardware": {"pools": pool(maxGpus=1)}}
    ),
    "a-hundred-thousand-gpus": put("spec.hardware.pools", pool(maxGpus=100_000)),
    "eight-pools-of-every-gpu": put(
        "spec.hardware.pools",
        [
            {"name": f"p{i}", "gpu": gpu, "maxGpus": 100_000}
            for i, gpu in enumerate(["H100", "H200", "B200", "B300", "GB200", "GB300", "MI300X", "MI355X"])
        ],
        base="glm5-agentic-coding",
    ),
    "one-request-per-hour": put("spec.workload.requestRate", "1/h"),
    "an-hour-long-slo": put("spec.slo", {"e2e": {"p99": "1h"}}),
    "a-one-token-workload": put(
        "spec.workload", {"requestRate": "1/s", "inputTokens": {"mean": 1}, "outputTokens": {"mean": 1}}
    ),
    "ten-thousand-outputs": put("spec.workload.outputTokens", {"mean": "10k", "p90": "20k", "max": "64k"}),
}


@pytest.mark.parametrize("name", sorted(EXTREMES))
def test_the_planner_answers_extreme_valid_targets_in_bounded_time(name: str) -> None:
    found = verdict(EXTREMES[name])
    assert not {"crd", "cel", "model", "catalog"} & found.layers, found.describe()
    assert isinstance(found.outcome, Planned | Infeasible), found.describe()
    assert structural_problems(found.outcome) == []
    assert found.seconds < MAX_DECISION_SECONDS, f"{name}: {found.seconds:.1f} s"


@settings(max_examples=40, deadline=None)
@given(
    rate=st.floats(min_value=1e-6, max_value=1e9),
    input_tokens=st.integers(min_value=1, max_value=10**7),
    output_tokens=st.integers(min_value=1, max_value=10**6),
    bound_ms=st.floats(min_value=1e-6, max_value=3.6e6),
    max_gpus=st.integers(min_value=1, max_value=100_000),
    gpu=st.sampled_from(["H100", "H200", "B200", "GB300", "MI355X"]),
)
def test_the_planner_never_raises_on_valid_extremes(
    *, rate: float, input_tokens: int, output_tokens: int, bound_ms: float, max_gpus: int, gpu: str
) -> None:
    document = with_spec(
        {
            "slo": {"tpot": {"p50": f"{bound_ms:.6f}ms"}},
            "workload": {
                "requestRate": f"{rate:.6f}/s",
                "inputTokens": {"mean": input_tokens},
                "outputTokens": {"mean": output_tokens},
            },
            "hardware": {"pools": pool(gpu=gpu, maxGpus=max_gpus)},
            "search": {},
        }
    )
    found = verdict(document)
    assert isinstance(found.outcome, Planned | Infeasible) or found.layers <= {"model"}, found.describe()
    assert structural_problems(found.outcome) == [] if found.outcome is not None else True
    assert found.seconds < MAX_DECISION_SECONDS


# ------------------------------------------------------------------------------ raw YAML and the CLI

RAW_FILES = sorted(CORPUS.glob("*.yaml"))


def _expected_layer(path: Path) -> str:
    found = re.search(r"^# refused-by: (\w+)", path.read_text(encoding="utf-8", errors="replace"), re.MULTILINE)
    assert found, f"{path.name} must say `# refused-by: LAYER`"
    return found.group(1)


@pytest.mark.parametrize("path", RAW_FILES, ids=lambda p: p.stem)
def test_raw_yaml_hazards_are_refused_on_load_with_a_structured_error(path: Path) -> None:
    expected = _expected_layer(path)
    if expected == "yaml":
        with pytest.raises(SpecInvalid) as caught:
            load_target_file(path)
        (error,) = caught.value.errors
        assert error.path == str(path) and error.message and error.hint
        assert len(str(error)) < MAX_ERROR_CHARS + len(str(path))
    else:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert expected in verdict(document).layers


def _cli_files(tmp_path: Path) -> list[tuple[str, Path, str]]:
    """Every hand-written case as a file (YAML can carry NaN and inf; JSON cannot), and the raw files."""
    files = []
    for hostile in CASES:
        if hostile.name == "configmap-missing":
            continue  # the CLI reads no ConfigMaps: it says so (exit 2) — covered by its own test below
        path = tmp_path / f"{hostile.name}.yaml"
        path.write_text(yaml.dump(hostile.document, Dumper=DUMPER, allow_unicode=True), encoding="utf-8")
        files.append((hostile.name, path, _cli_layer(hostile.refused_by)))
    files += [(path.stem, path, _expected_layer(path)) for path in RAW_FILES]
    return files


def _cli_layer(layers: frozenset[str]) -> str:
    for layer in ("model", "catalog", "planner", "render"):
        if layer in layers:
            return layer
    return "crd-only"


# What each command answers per refusing layer: 2 invalid input, 3 infeasible, 0 nothing to refuse.
EXIT_CODES = {
    "yaml": {"validate": 2, "plan": 2, "render": 2, "simulate": 2},
    "model": {"validate": 2, "plan": 2, "render": 2, "simulate": 2},
    "catalog": {"validate": 2, "plan": 2, "render": 2, "simulate": 2},
    "planner": {"validate": 0, "plan": 3, "render": 3, "simulate": 3},
    # The twin simulates the plan's configuration; it renders no pods, so a flag the renderer refuses is moot.
    "render": {"validate": 0, "plan": 0, "render": 2, "simulate": 0},
}
# Extra arguments per command: the shortest simulation (a few simulated minutes, no oracle sizing).
EXTRA_ARGS = {"simulate": ["--hours", "0.05", "--no-oracle"]}


def _commands() -> list[str]:
    registered = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    return [command for command in ("validate", "plan", "render", "simulate") if command in registered]


def test_the_cli_refuses_every_hostile_file_with_its_exit_code_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tally: dict[tuple[str, int], int] = {}
    for name, path, layer in _cli_files(tmp_path):
        if layer == "crd-only":
            continue
        for command in _commands():
            argv = [command, str(path)] if command == "validate" else [command, "-f", str(path)]
            argv += EXTRA_ARGS.get(command, [])
            code = main(argv)  # an exception here is the crash we are looking for
            out, err = capsys.readouterr()
            expected = EXIT_CODES[layer].get(command, 2)
            assert code == expected, f"frontier {command} {name}: exit {code}, expected {expected}\n{err[-2000:]}"
            assert "Traceback" not in out + err
            if code:
                # Invalid input is explained on stderr; an infeasible plan is the report on stdout.
                said = err if code == 2 else out + err
                assert said.strip(), f"frontier {command} {name}: exit {code} without a message"
                assert len(err) < 20_000, f"frontier {command} {name}: {len(err)} characters of error"
            tally[(command, code)] = tally.get((command, code), 0) + 1
    assert sum(tally.values()) >= 3 * 100


def test_the_cli_says_it_cannot_read_a_configmap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (hostile,) = [c for c in CASES if c.name == "configmap-missing"]
    path = tmp_path / "configmap.yaml"
    path.write_text(yaml.safe_dump(hostile.document), encoding="utf-8")
    for argv in (["plan", "-f", str(path)], ["render", "-f", str(path)]):
        assert main(argv) == 2
        assert "configMapRef" in capsys.readouterr().err


# One process per command (each start costs ~0.7 s): the in-process test above covers every file.
SUBPROCESS_SAMPLE = [
    ("validate", "duplicate-percentile"),
    ("plan", "alias-bomb"),
    ("render", "deep-nesting"),
    ("plan", "python-object-tag"),
    ("simulate", "duplicate-spec"),
]


@pytest.mark.parametrize(("command", "stem"), SUBPROCESS_SAMPLE)
def test_the_cli_as_a_process_exits_2_with_a_message(command: str, stem: str) -> None:
    path = str(CORPUS / f"{stem}.yaml")
    argv = [command, path] if command == "validate" else [command, "-f", path]
    done = subprocess.run(
        [sys.executable, "-m", "frontier_operator.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and f"{path}: invalid" in done.stderr


# ------------------------------------------------------------------------------- the CRD itself


def test_cel_rules_name_only_fields_the_schema_declares() -> None:
    """A real API server type-checks every rule against the schema and refuses the CRD otherwise;
    cel-python does not, so a field the rules name but the schema spells differently (`e2e` against the
    generated `e2E`, found by this corpus) passed every other test."""
    for path, node in walk_schema(openapi_schema()):
        for check in node.get("x-kubernetes-validations", []):
            for name in re.findall(r"\bself\.(\w+)\b(?!\s*\()", check["rule"]):
                assert name in node.get("properties", {}), f"{path}: rule {check['rule']!r} names {name!r}"
