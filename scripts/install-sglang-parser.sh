#!/usr/bin/env bash
# Install SGLang 0.5.23's real command-line parser, and the router's, into the project venv, so the
# render contract tests (tests/render/test_sglang_contract.py) check every emitted argv against them.
# The same wheel carries the benchmark client's source (sglang/benchmark/serving.py): the sweep contract
# tests (tests/sweep/test_benchmark_contract.py) build its parser from that file (tests/sglang_bench_parser.py)
# rather than import the module, which would pull in transformers and Hugging Face datasets; they need only
# `sglang.benchmark.goodput`, which imports msgspec (listed below).
#
# No GPU and no CUDA: torch is the CPU build, SGLang and the router come without their dependencies
# (`pip check` will list sglang's GPU pins; that is expected), and only the modules that importing
# `sglang.srt.server_args` and the model-independent validation hooks really needs are added. The
# list was measured by importing until nothing was missing. Quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV_PYTHON=${VENV_PYTHON:-.venv/bin/python}

SGLANG_VERSION=0.5.23
ROUTER_VERSION=0.3.2

if "$VENV_PYTHON" - "$SGLANG_VERSION" "$ROUTER_VERSION" <<'PY' 2>/dev/null; then exit 0; fi
import sys
from importlib.metadata import version

assert version("sglang") == sys.argv[1] and version("sglang-router") == sys.argv[2]
from sglang.srt.server_args import ServerArgs  # noqa: F401
from sglang.srt.arg_groups import pd_disaggregation_hook, serving_hook, validation_hook  # noqa: F401
from sglang_router.router_args import RouterArgs  # noqa: F401
from sglang.benchmark.goodput import GOODPUT_SLO_METRICS  # noqa: F401
PY

echo "installing SGLang ${SGLANG_VERSION}'s argument parser (CPU torch, no GPU packages)"
"$VENV_PYTHON" -m pip install --quiet torch==2.13.0          # the CPU wheel (local on the project machines)
"$VENV_PYTHON" -m pip install --quiet triton==3.8.0          # sglang.srt.utils imports it
"$VENV_PYTHON" -m pip install --quiet --no-deps "sglang==${SGLANG_VERSION}" "sglang-router==${ROUTER_VERSION}"
"$VENV_PYTHON" -m pip install --quiet orjson psutil pybase64 starlette msgspec pyzmq tqdm ipython \
    numpy pillow requests packaging pydantic aiohttp   # already in the project venv; listed for a bare one
