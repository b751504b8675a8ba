"""A compact, durable form of measured points: one JSON document for a ConfigMap's data or `status.sweep`.

Numbers are rounded to four significant digits (the benchmark's run-to-run spread is 1–3 %), latencies kept
in milliseconds, and keys shortened. At most `MAX_STORED_POINTS` points are kept, newest last, so the
document stays far under the 1 MiB of a ConfigMap and the ~1.5 MiB of an object in etcd: the worst case is
measured in tests/sweep/test_measurements.py (about 1.5 KiB a point, 91 KiB for 64).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from frontier_operator.sweep.types import Latency, PointPrediction, SweepMeasurement

FORMAT_VERSION = 1
MAX_STORED_POINTS = 64
# ConfigMap key the measured points are stored under.
CONFIGMAP_KEY = "sweep.json"


def _r(value: float) -> float:
    return float(f"{value:.4g}")


def _latency(latency: Latency) -> list[float]:
    return [_r(latency.mean * 1e3), _r(latency.p50 * 1e3), _r(latency.p90 * 1e3), _r(latency.p99 * 1e3)]


def _from_ms(values: Sequence[float]) -> Latency:
    mean, p50, p90, p99 = (float(v) / 1e3 for v in values)
    return Latency(mean, p50, p90, p99)


def encode_point(m: SweepMeasurement) -> dict[str, Any]:
    p = m.predicted
    return {
        "key": m.key,
        "group": m.group,
        "worker": m.worker_key,
        "pd": m.disaggregated,
        "name": m.description,
        "model": m.model,
        "gpu": m.gpu,
        "format": m.weight_format,
        "gpus": m.gpus,
        "c": m.concurrency,
        "ttft": _latency(m.ttft),
        "tpot": _latency(m.tpot),
        "itl": _latency(m.itl),
        "rps": _r(m.request_rate_per_s),
        "tps": _r(m.output_tokens_per_s),
        "done": m.completed,
        "s": _r(m.duration_s),
        "len": [m.random_input_len, m.random_output_len, m.random_range_ratio],
        "pred": [
            _r(p.ttft_p50_s * 1e3),
            _r(p.ttft_p90_s * 1e3),
            _r(p.ttft_p99_s * 1e3),
            _r(p.tpot_p50_s * 1e3),
            _r(p.tpot_p90_s * 1e3),
            _r(p.request_rate_per_s),
            _r(p.output_tokens_per_s),
        ],
        "gpumin": _r(m.gpu_minutes),
        "at": round(m.measured_at),
        "layout": [list(entry) for entry in m.layout],
    }


def decode_point(data: dict[str, Any]) -> SweepMeasurement:
    pred = [float(v) for v in data["pred"]]
    length = data["len"]
    return SweepMeasurement(
        key=str(data["key"]),
        group=str(data["group"]),
        worker_key=str(data["worker"]),
        disaggregated=bool(data["pd"]),
        description=str(data["name"]),
        model=str(data["model"]),
        gpu=str(data["gpu"]),
        weight_format=str(data["format"]),
        gpus=int(data["gpus"]),
        concurrency=int(data["c"]),
        ttft=_from_ms(data["ttft"]),
        tpot=_from_ms(data["tpot"]),
        itl=_from_ms(data["itl"]),
        request_rate_per_s=float(data["rps"]),
        output_tokens_per_s=float(data["tps"]),
        completed=int(data["done"]),
        duration_s=float(data["s"]),
        random_input_len=int(length[0]),
        random_output_len=int(length[1]),
        random_range_ratio=float(length[2]),
        predicted=PointPrediction(
            pred[0] / 1e3, pred[1] / 1e3, pred[2] / 1e3, pred[3] / 1e3, pred[4] / 1e3, pred[5], pred[6]
        ),
        gpu_minutes=float(data["gpumin"]),
        measured_at=float(data["at"]),
        layout=tuple(
            (str(e[0]), int(e[1]), int(e[2]), int(e[3]), int(e[4]), int(e[5])) for e in data.get("layout", [])
        ),
    )


def encode_points(measurements: Sequence[SweepMeasurement]) -> str:
    """The newest `MAX_STORED_POINTS` points as one compact JSON document."""
    kept = list(measurements)[-MAX_STORED_POINTS:]
    return json.dumps({"version": FORMAT_VERSION, "points": [encode_point(m) for m in kept]}, separators=(",", ":"))


def decode_points(text: str) -> list[SweepMeasurement]:
    """Points from `encode_points`' document; raises `ValueError` for anything else."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise ValueError(f"not a version-{FORMAT_VERSION} sweep document")
        return [decode_point(point) for point in data["points"]]
    except (KeyError, TypeError, IndexError, json.JSONDecodeError) as error:
        raise ValueError(f"unreadable sweep document: {error}") from error


def merge_points(stored: Sequence[SweepMeasurement], new: Sequence[SweepMeasurement]) -> list[SweepMeasurement]:
    """Stored points with the new ones added; a new run of the same (unit, concurrency) replaces the old one."""
    fresh = {(m.key, m.concurrency) for m in new}
    return [*(m for m in stored if (m.key, m.concurrency) not in fresh), *new][-MAX_STORED_POINTS:]
