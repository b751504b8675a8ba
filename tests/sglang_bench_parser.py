"""SGLang 0.5.23's own argument parser of `python -m sglang.benchmark.serving`, without importing the module.

`sglang/benchmark/serving.py` builds its parser inside `cli_main()`, which then parses `sys.argv` and runs the
benchmark, and the module imports `transformers` and, through `sglang.benchmark.datasets`, Hugging Face
`datasets` (with pyarrow and pandas) at import time — none of which the parser needs. So the parser is taken
from SGLang's source file itself: `cli_main`'s statements up to `args = parser.parse_args()` are compiled as a
function, with the module-level definitions they use taken from the same file (the argparse type helpers, the
`LoRAPathAction`, the flush-cache timeout constant, the backend names — the keys of `ASYNC_REQUEST_FUNCS`) and
`GOODPUT_SLO_METRICS` imported from `sglang.benchmark.goodput` (which imports only msgspec). Every
`add_argument` call is SGLang's, unmodified; the post-parse checks `cli_main` runs
(`_validate_parsed_gsp_args` and the `--rust-worker-threads` rule) are applied too.

The source comes with the `sglang==0.5.23` wheel that `scripts/install-sglang-parser.sh` installs (no extra
packages), located with `importlib.util.find_spec` (which does not import the module).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import math
import typing
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

_PARSE_CALL = "args = parser.parse_args()"
_HELPERS = ("_finite_positive_float", "_goodput_slo", "_validate_parsed_gsp_args", "LoRAPathAction")
_CONSTANTS = ("_DEFAULT_SGLANG_FLUSH_CACHE_TIMEOUT",)


def serving_source() -> Path:
    spec = importlib.util.find_spec("sglang.benchmark")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("sglang.benchmark")
    return Path(next(iter(spec.submodule_search_locations))) / "serving.py"


def _module_level(tree: ast.Module) -> dict[str, ast.stmt]:
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node
    return found


def _backend_names(node: ast.stmt) -> dict[str, None]:
    """The keys of the `ASYNC_REQUEST_FUNCS` dict literal (its values are request functions, not needed)."""
    assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
    return {ast.literal_eval(key): None for key in node.value.keys if key is not None}


@cache
def _builder() -> tuple[Any, Any]:
    tree = ast.parse(serving_source().read_text(encoding="utf-8"))
    defs = _module_level(tree)
    cli_main = defs["cli_main"]
    assert isinstance(cli_main, ast.FunctionDef)
    statements = [ast.unparse(s) for s in cli_main.body]
    stop = statements.index(_PARSE_CALL)
    namespace: dict[str, Any] = {
        "argparse": argparse,
        "ArgumentParser": argparse.ArgumentParser,
        "math": math,
        "Tuple": typing.Tuple,  # noqa: UP006 - the source's own annotation
        "ASYNC_REQUEST_FUNCS": _backend_names(defs["ASYNC_REQUEST_FUNCS"]),
        "GOODPUT_SLO_METRICS": importlib.import_module("sglang.benchmark.goodput").GOODPUT_SLO_METRICS,
    }
    for name in _CONSTANTS:
        node = defs[name]
        assert isinstance(node, ast.Assign)
        namespace[name] = ast.literal_eval(node.value)
    helpers = ast.Module(body=[defs[name] for name in _HELPERS], type_ignores=[])
    exec(compile(helpers, str(serving_source()), "exec"), namespace)
    body = [*cli_main.body[:stop], ast.parse("return parser").body[0]]
    function = ast.FunctionDef(
        name="build_parser", args=cli_main.args, body=body, decorator_list=[], returns=None, type_params=[]
    )
    module = ast.fix_missing_locations(ast.Module(body=[function], type_ignores=[]))
    exec(compile(module, str(serving_source()), "exec"), namespace)
    return namespace["build_parser"], namespace["_validate_parsed_gsp_args"]


def benchmark_parser() -> argparse.ArgumentParser:
    build, _validate = _builder()
    parser: argparse.ArgumentParser = build()
    # The real parser allows abbreviations; ours must spell every flag in full, so refuse them here.
    parser.allow_abbrev = False
    return parser


class BenchmarkArgvError(ValueError):
    pass


def parse_benchmark_argv(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the flags after `python3 -m sglang.benchmark.serving` as SGLang 0.5.23 does; raise on any error."""
    parser = benchmark_parser()
    errors: list[str] = []

    def error(message: str) -> typing.NoReturn:
        errors.append(message)
        raise BenchmarkArgvError(message)

    parser.error = error  # type: ignore[method-assign]
    args = parser.parse_args(list(argv))
    if args.rust_worker_threads is not None and not args.rust_client:
        parser.error("--rust-worker-threads requires --rust-client")
    _build, validate = _builder()
    validate(parser, args)
    return args
