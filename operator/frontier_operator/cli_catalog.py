"""`frontier catalog`: what the operator knows of models, GPUs and number formats."""

from __future__ import annotations

import argparse
from typing import Any

from frontier_operator.catalog.gpus import load_gpu_catalog
from frontier_operator.catalog.models import load_model_catalog
from frontier_operator.catalog.quantization import load_kv_cache_formats, load_quant_formats


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [headers, ["-" * width for width in widths], *rows]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _billions(count: float) -> str:
    return f"{count / 1e9:.1f}B"


def _show(args: argparse.Namespace) -> int:
    sections: list[tuple[str, list[str], list[list[str]]]] = []
    if args.kind in ("models", "all"):
        rows = [
            [
                m.name,
                m.hf_id,
                _billions(m.total_params),
                _billions(m.active_params),
                m.attention.value.upper(),
                f"{m.moe.num_experts}x{m.moe.experts_per_token}" if m.moe else "dense",
                str(m.max_context),
                m.native_dtype,
            ]
            for m in load_model_catalog().values()
        ]
        sections.append(
            ("Models", ["name", "hugging face id", "total", "active", "attention", "experts", "context", "dtype"], rows)
        )
    if args.kind in ("gpus", "all"):
        rows = [
            [
                g.name,
                g.arch,
                f"{g.memory_gb:g} GB",
                f"{g.hbm_bandwidth_tbs:g} TB/s",
                "/".join(f"{fmt} {tf:g}" for fmt, tf in g.dense_tflops),
                str(g.gpus_per_node),
                f"${g.default_price_per_hour:.2f}/h",
            ]
            for g in load_gpu_catalog().values()
        ]
        sections.append(("GPUs", ["name", "arch", "memory", "bandwidth", "dense TFLOP/s", "per node", "price"], rows))
    if args.kind in ("formats", "all"):
        rows = [
            [
                f.name,
                f"{f.weight_bytes_per_param:g}",
                ",".join(sorted(f.native_archs)),
                ",".join(sorted(f.weight_only_archs)) or "-",
                f.sglang_online_method or "(checkpoint)",
                f"{f.typical_quality_loss_pct:g}%",
            ]
            for f in load_quant_formats().values()
        ]
        sections.append(
            (
                "Weight formats",
                ["name", "bytes/param", "native on", "weight-only on", "--quantization", "typical loss"],
                rows,
            )
        )
        kv_rows = [
            [k.name, k.sglang_value, f"{k.bytes_per_element:g}", ",".join(sorted(k.native_archs)) or "all"]
            for k in load_kv_cache_formats().values()
        ]
        sections.append(("KV-cache formats", ["name", "--kv-cache-dtype", "bytes/elem", "native on"], kv_rows))
    print("\n\n".join(f"{title}\n{_table(headers, rows)}" for title, headers, rows in sections))
    return 0


def register(commands: Any) -> None:
    parser = commands.add_parser("catalog", help="list the models, GPUs and number formats the planner knows")
    parser.add_argument("kind", nargs="?", choices=["models", "gpus", "formats", "all"], default="all")
    parser.set_defaults(func=_show)
