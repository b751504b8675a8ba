"""The package lives in the folder `operator/` without shadowing the standard library's `operator`."""

import importlib.resources
import operator
import subprocess
import sys
from pathlib import Path

import frontier_operator

ROOT = Path(__file__).resolve().parents[1]


def test_the_standard_library_operator_module_still_resolves() -> None:
    assert operator.add(1, 2) == 3
    assert not hasattr(operator, "__path__"), "stdlib operator is a module, not our folder"
    assert Path(operator.__file__ or "").parent != ROOT / "operator"
    assert not (ROOT / "operator" / "__init__.py").exists(), "an __init__.py here would shadow the stdlib"


def test_the_package_imports_from_the_operator_folder() -> None:
    assert Path(frontier_operator.__file__).parent == ROOT / "operator" / "frontier_operator"


def test_the_installed_console_script_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import operator, frontier_operator.cli as c; assert operator.mul(2, 3) == 6"],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr


def test_shipped_data_files_are_package_data() -> None:
    catalog = importlib.resources.files("frontier_operator.catalog") / "data"
    shipped = {entry.name for entry in catalog.iterdir()}
    assert {"models.yaml", "gpus.yaml", "quantization.yaml"} <= shipped
