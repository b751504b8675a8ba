"""JSON for the records the operator keeps in a target's annotations (the tuning loop's, the sweep's)."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from pydantic import TypeAdapter, ValidationError


class _Versioned(Protocol):
    @property
    def version(self) -> int: ...


R = TypeVar("R", bound=_Versioned)


class RecordCodec(Generic[R]):
    """Encodes a frozen-dataclass record; decoding answers None for an absent or unreadable text, or one written
    by another version of the record, so the caller starts afresh rather than acting on a misread memory."""

    def __init__(self, kind: type[R], version: int) -> None:
        self._adapter = TypeAdapter(kind)
        self._version = version

    def encode(self, record: R) -> str:
        return self._adapter.dump_json(record).decode()

    def decode(self, text: str | None) -> R | None:
        if not text:
            return None
        try:
            record = self._adapter.validate_json(text)
        except (ValidationError, ValueError):
            return None
        return record if record.version == self._version else None
