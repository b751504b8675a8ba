"""Golden manifests of a sweep: `render_sweep` of the golden cases is exactly the reviewed YAML.

`tests/golden/<case>/sweep/` holds one file per object of a sweep deployment of the case's configuration with a
fixed two-level benchmark. Regenerate with `make golden` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from frontier_operator.cli_render import write_objects
from frontier_operator.render.benchmark import BenchmarkLevel, BenchmarkSpec, render_sweep
from render_support import GoldenCase, golden_cases

UPDATE = os.environ.get("FRONTIER_UPDATE_GOLDEN") == "1"
# An aggregated single replica, a router in front of replicas, and P/D with label discovery.
CASES = [c for c in golden_cases() if c.name in ("llama-70b-chat", "qwen3-32b-disagg", "deepseek-r1-low-latency")]
SPEC = BenchmarkSpec(
    sweep_id="0a1b2c",
    levels=(BenchmarkLevel(16, 200, 300.0), BenchmarkLevel(64, 640, 420.0)),
    input_mean=2048.0,
    output_mean=512.0,
    input_cv=0.2,
    output_cv=0.3,
    input_max=8192,
    output_max=2048,
)


def _files(directory: Path) -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(directory.glob("*.yaml"))}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_sweep_render_matches_golden(case: GoldenCase, tmp_path: Path) -> None:
    write_objects(render_sweep(case.request(), SPEC), str(tmp_path))
    rendered = _files(tmp_path)
    golden = case.directory / "sweep"
    if UPDATE:
        golden.mkdir(exist_ok=True)
        for stale in set(_files(golden)) - set(rendered):
            (golden / stale).unlink()
        for name, text in rendered.items():
            (golden / name).write_text(text, encoding="utf-8")
    expected = _files(golden)
    assert sorted(rendered) == sorted(expected), "objects added or removed; run `make golden` and review"
    for name, text in rendered.items():
        assert text == expected[name], f"{case.name}/sweep/{name} differs; run `make golden` and review the diff"


def test_the_cases_exist() -> None:
    assert len(CASES) == 3
