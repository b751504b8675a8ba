"""Human units for numbers people write in a FrontierTarget: `20ms`, `40/s`, `8k`, `$2.30/h`, `80%`.

Each quantity is a float (or int) subclass that remembers the text it was written as, so a spec
round-trips through the operator unchanged and arithmetic stays plain. Parse errors raise
`PydanticCustomError` with a `hint` in their context; `api.errors` turns them into field errors
such as `spec.slo.tpot.p50: "20 ms" is not a duration; write 20ms`.

The accepted spellings are also expressed as JSON-schema patterns, so the API server refuses a bad
value at `kubectl apply` with the same rules the operator applies.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, ClassVar, Self

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

_NUMBER = r"[0-9]+(?:\.[0-9]+)?"

# Go's duration units, so that CEL's duration() in the CRD understands every value we accept.
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = rf"{_NUMBER}(?:ns|us|µs|ms|s|m|h)"
_DURATION = re.compile(rf"^(?:{_DURATION_PART})+$")

_RATE_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "min": 1 / 60,
    "minute": 1 / 60,
    "h": 1 / 3600,
    "hour": 1 / 3600,
}
_RATE = re.compile(rf"^({_NUMBER})(?:/(s|sec|second|min|minute|h|hour))?$")

# Decimal (k = 1000) and binary (Ki = 1024) multipliers, as in Kubernetes quantities.
_TOKEN_SUFFIXES = {"": 1, "k": 1000, "K": 1000, "M": 1000**2, "Ki": 1024, "Mi": 1024**2}
_TOKENS = re.compile(rf"^({_NUMBER})(k|K|M|Ki|Mi)?$")

_GPU_TIME_UNITS = {"min": 1.0, "h": 60.0}
_GPU_TIME = re.compile(rf"^({_NUMBER}) ?GPU-(min|h)$")
_PRICE = re.compile(rf"^\$?({_NUMBER})(?:/(?:h|hr|hour))?$")
_PERCENT = re.compile(rf"^({_NUMBER})%$")


def _reject(message: str, hint: str) -> PydanticCustomError:
    return PydanticCustomError("human_unit", "{message}", {"message": message, "hint": hint})


def _text_of(value: Any) -> str:
    return str(value).strip() if isinstance(value, str) else repr(value)


def _clip(text: str, limit: int = 40) -> str:
    """What a message quotes of the user's text: enough to find it, never a megabyte."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _suggest_compact(text: str, pattern: re.Pattern[str]) -> str | None:
    """`20 ms` → `20ms`: the commonest mistake is a space between number and unit."""
    compact = re.sub(r"\s+", "", text)
    return compact if compact != text and pattern.match(compact) else None


class _Quantity(float):
    """A float written with a unit; `text` is the spelling the user chose."""

    text: str
    kind: ClassVar[str]
    example: ClassVar[str]
    json_schema: ClassVar[dict[str, Any]]

    def __new__(cls, value: float, text: str) -> Self:
        instance = super().__new__(cls, value)
        instance.text = text
        return instance

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (float(self), self.text))

    @classmethod
    def parse(cls, value: Any) -> Self:
        raise NotImplementedError

    @classmethod
    def _validate(cls, value: Any) -> Self:
        if isinstance(value, cls):
            return value
        return cls.parse(value)

    @classmethod
    def _reject_text(cls, value: Any, pattern: re.Pattern[str]) -> PydanticCustomError:
        text = _text_of(value)
        suggestion = _suggest_compact(text, pattern) if isinstance(value, str) else None
        hint = f"write {_clip(suggestion)}" if suggestion else f"write it like {cls.example}"
        shown = f'"{_clip(text)}"' if isinstance(value, str) else _clip(text)
        return _reject(f"{shown} is not {cls.kind}", hint)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate, serialization=core_schema.plain_serializer_function_ser_schema(cls._serialize)
        )

    @classmethod
    def _serialize(cls, value: Any) -> Any:
        return value.text if isinstance(value, _Quantity) else value

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return dict(cls.json_schema)


def _finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond the float range
        return None
    return number if math.isfinite(number) else None


def _plain_number(value: int | float) -> str:
    """A number as text the unit's pattern reads back: 1e-05 → "0.00001", 1e+16 → "10000000000000000".

    The text is what the spec serialises to; Python's repr of a float may use an exponent, which no
    pattern (and no CEL or Kubernetes quantity) accepts.
    """
    if isinstance(value, int):
        return str(value)
    return format(Decimal(repr(value)), "f")


def _too_large(text: str, kind: str) -> PydanticCustomError:
    # The patterns admit any number of digits; past ~1e308 a float is infinite and no arithmetic holds.
    return _reject(f'"{_clip(text)}" is too large to be {kind}', "write a realistic value")


class Duration(_Quantity):
    """Seconds, written `20ms`, `1.5s`, `5m`, `1h30m` (Go/CEL duration syntax)."""

    kind = "a duration"
    example = "20ms, 1.5s or 5m"
    json_schema: ClassVar[dict[str, Any]] = {"type": "string", "pattern": _DURATION.pattern, "maxLength": 32}

    @classmethod
    def parse(cls, value: Any) -> Duration:
        text = _text_of(value)
        if _finite_number(value) is not None:
            raise _reject(f"{_clip(text)} has no unit", f"write {_clip(text)}ms or {_clip(text)}s")
        if not isinstance(value, str) or not _DURATION.match(text):
            raise cls._reject_text(value, _DURATION)
        seconds = sum(
            float(number) * _DURATION_UNITS[unit]
            for number, unit in re.findall(rf"({_NUMBER})(ns|us|µs|ms|s|m|h)", text)
        )
        if not math.isfinite(seconds):
            raise _too_large(text, cls.kind)
        if seconds <= 0:
            raise _reject(f'"{_clip(text)}" is not a positive duration', "write a duration above zero, e.g. 20ms")
        return cls(seconds, text)


class Rate(_Quantity):
    """Events per second, written `40/s`, `2400/min`, `100/h` or a plain number (per second)."""

    kind = "a rate"
    example = "40/s or 2400/min"
    json_schema: ClassVar[dict[str, Any]] = {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": _RATE.pattern}],
    }

    @classmethod
    def parse(cls, value: Any) -> Rate:
        number = _finite_number(value)
        if number is not None and number >= 0:
            return cls(number, _plain_number(value))
        text = _text_of(value)
        match = _RATE.match(text) if isinstance(value, str) else None
        if match is None:
            raise cls._reject_text(value, _RATE)
        per_second = float(match.group(1)) * _RATE_UNITS[match.group(2) or "s"]
        if not math.isfinite(per_second):
            raise _too_large(text, cls.kind)
        return cls(per_second, text)


class Price(_Quantity):
    """US dollars per GPU-hour, written `2.30`, `$2.30` or `$2.30/h`."""

    kind = "a price per GPU-hour"
    example = '"$2.30/h" (quote decimals in YAML)'
    json_schema: ClassVar[dict[str, Any]] = {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": _PRICE.pattern}],
    }

    @classmethod
    def parse(cls, value: Any) -> Price:
        number = _finite_number(value)
        text = _text_of(value)
        if number is None:
            match = _PRICE.match(text) if isinstance(value, str) else None
            if match is None:
                raise cls._reject_text(value, _PRICE)
            number = float(match.group(1))
            if not math.isfinite(number):
                raise _too_large(text, cls.kind)
        elif number < 0:
            raise cls._reject_text(value, _PRICE)
        if number == 0:
            # Every cost ($/Mtok, the objective, the dashboards) is a multiple of the price.
            raise _reject(
                f"{_clip(text)} is not a price above zero", "for GPUs you own, write their amortised cost per hour"
            )
        return cls(number, text if isinstance(value, str) else _plain_number(value))


class Fraction(_Quantity):
    """A share between 0 and 1, written as a percentage: `1%`, `0.5%`, `80%`."""

    kind = "a percentage"
    example = "80% or 0.5%"
    json_schema: ClassVar[dict[str, Any]] = {"type": "string", "pattern": _PERCENT.pattern, "maxLength": 16}

    @property
    def percent(self) -> float:
        return float(self) * 100

    @classmethod
    def parse(cls, value: Any) -> Fraction:
        text = _text_of(value)
        match = _PERCENT.match(text) if isinstance(value, str) else None
        if match is None:
            if _finite_number(value) is not None:
                raise _reject(f"{_clip(text)} has no unit", f'write it as a percentage, e.g. "{_clip(text)}%"')
            raise cls._reject_text(value, _PERCENT)
        percent = float(match.group(1))
        if percent > 100:
            raise _reject(f'"{_clip(text)}" is above 100%', "write a percentage between 0% and 100%")
        return cls(percent / 100, text)


class GpuMinutes(_Quantity):
    """GPU time in GPU-minutes (one GPU held for one minute), written `30 GPU-min` or `2 GPU-h`."""

    kind = "GPU time"
    example = '"30 GPU-min" or "2 GPU-h"'
    json_schema: ClassVar[dict[str, Any]] = {"type": "string", "pattern": _GPU_TIME.pattern, "maxLength": 32}

    @classmethod
    def parse(cls, value: Any) -> GpuMinutes:
        text = _text_of(value)
        if _finite_number(value) is not None:
            raise _reject(f"{_clip(text)} has no unit", f'write "{_clip(text)} GPU-min"')
        match = _GPU_TIME.match(text) if isinstance(value, str) else None
        if match is None:
            raise cls._reject_text(value, _GPU_TIME)
        minutes = float(match.group(1)) * _GPU_TIME_UNITS[match.group(2)]
        if not math.isfinite(minutes):
            raise _too_large(text, cls.kind)
        return cls(minutes, text)


class TokenCount(int):
    """A number of tokens, written `8192`, `8k` (8,000) or `128Ki` (131,072)."""

    text: str
    kind: ClassVar[str] = "a token count"
    example: ClassVar[str] = "8192, 8k or 128Ki"

    def __new__(cls, value: int, text: str) -> Self:
        instance = super().__new__(cls, value)
        instance.text = text
        return instance

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (int(self), self.text))

    @classmethod
    def parse(cls, value: Any) -> TokenCount:
        if isinstance(value, TokenCount):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 1:
                raise _reject(f"{value} is not a positive token count", "write at least 1 token")
            return cls(value, str(value))
        text = _text_of(value)
        match = _TOKENS.match(text) if isinstance(value, str) else None
        if match is None:
            suggestion = _suggest_compact(text, _TOKENS) if isinstance(value, str) else None
            hint = f"write {_clip(suggestion)}" if suggestion else f"write it like {cls.example}"
            raise _reject(f'"{_clip(text)}" is not {cls.kind}', hint)
        scaled = float(match.group(1)) * _TOKEN_SUFFIXES[match.group(2) or ""]
        if not math.isfinite(scaled):
            raise _too_large(text, cls.kind)
        tokens = round(scaled)
        if tokens < 1:
            raise _reject(f'"{_clip(text)}" is not a positive token count', "write at least 1 token")
        return cls(tokens, text)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls.parse,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v: v.text if isinstance(v, TokenCount) and not v.text.isdigit() else int(v)
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": _TOKENS.pattern}],
        }


def format_duration(seconds: float) -> str:
    """Compact human text for a duration in seconds: 0.0183 → '18.3ms', 2.5 → '2.5s', 600 → '10m', 9000 → '2.5h'."""
    if seconds < 1:
        return f"{seconds * 1000:.3g}ms"
    if seconds < 120:
        return f"{seconds:.3g}s"
    if seconds < 7200:
        return f"{seconds / 60:.3g}m"
    return f"{seconds / 3600:.3g}h"


def rfc3339(moment: datetime | float, *, microseconds: bool = False) -> str:
    """A time as Kubernetes writes it (`2026-11-30T03:00:00Z`): UTC, whole seconds unless `microseconds`
    (`2026-11-30T03:00:00.250000Z`, as its MicroTime fields); a float is a Unix time."""
    when = datetime.fromtimestamp(moment, UTC) if isinstance(moment, int | float) else moment.astimezone(UTC)
    timespec = "microseconds" if microseconds else "seconds"
    return when.isoformat(timespec=timespec).replace("+00:00", "Z")
