"""Golden manifests: `frontier render` of every example (and a few variants) is exactly the reviewed YAML.

Each `tests/golden/<case>/` holds a `plan.json` (the configuration, so the files do not move when the
planner's choice does), an optional `target.yaml` (else `examples/<case>.yaml`), and one YAML file per
object as `frontier render -o DIR` writes them. After a deliberate change, regenerate and review:

    make golden        # = FRONTIER_UPDATE_GOLDEN=1 .venv/bin/pytest tests/render/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from frontier_operator.cli_render import write_objects
from frontier_operator.render import render_fleet
from frontier_operator.render.yaml_dump import dump_all
from render_support import EXAMPLES, GoldenCase, golden_cases

UPDATE = os.environ.get("FRONTIER_UPDATE_GOLDEN") == "1"
CASES = golden_cases()


def rendered_files(case: GoldenCase, tmp_path: Path) -> dict[str, str]:
    write_objects(render_fleet(case.request(), with_route=True), str(tmp_path))
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(tmp_path.glob("*.yaml"))}


def golden_files(case: GoldenCase) -> dict[str, str]:
    return {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted(case.directory.glob("*.yaml"))
        if path.name != "target.yaml"
    }


def test_every_example_has_a_golden_case() -> None:
    assert {path.stem for path in EXAMPLES.glob("*.yaml")} <= {case.name for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_render_matches_golden(case: GoldenCase, tmp_path: Path) -> None:
    rendered = rendered_files(case, tmp_path)
    if UPDATE:
        for stale in set(golden_files(case)) - set(rendered):
            (case.directory / stale).unlink()
        for name, text in rendered.items():
            (case.directory / name).write_text(text, encoding="utf-8")
    expected = golden_files(case)
    assert sorted(rendered) == sorted(expected), "objects added or removed; run `make golden` and review"
    for name, text in rendered.items():
        assert text == expected[name], f"{case.name}/{name} differs; run `make golden` and review the diff"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_rendering_is_byte_identical_from_run_to_run(case: GoldenCase) -> None:
    assert dump_all(render_fleet(case.request())) == dump_all(render_fleet(case.request()))
