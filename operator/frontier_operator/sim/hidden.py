"""Deterministic hidden draws: the same (seed, key) gives the same number in every process and on every run.

The perturbed truth needs "random" multipliers that stay fixed for a configuration across a whole simulation
and across re-runs, without a shared random stream whose order would change whenever the planner asks about
configurations in a different order. Hashing the key with SHA-256 gives exactly that (Python's own `hash`
is salted per process, so it cannot be used).
"""

from __future__ import annotations

import hashlib
import math
from statistics import NormalDist

_STANDARD_NORMAL = NormalDist()
_TWO_POW_64 = float(2**64)


def unit_draw(seed: int, *key: object) -> float:
    """A number in (0, 1), uniform over seeds and keys, fixed for a given (seed, key)."""
    text = "\x1f".join([str(seed), *(str(part) for part in key)])
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    value = int.from_bytes(digest[:8], "big")
    return (value + 0.5) / _TWO_POW_64


def normal_draw(seed: int, *key: object) -> float:
    """A standard normal number, fixed for a given (seed, key)."""
    return _STANDARD_NORMAL.inv_cdf(unit_draw(seed, *key))


def lognormal_factor(seed: int, sigma: float, *key: object) -> float:
    """A multiplier exp(σ·z), median 1: σ = 0.1 puts two thirds of the factors within about ±10 %."""
    if sigma <= 0:
        return 1.0
    return math.exp(sigma * normal_draw(seed, *key))
