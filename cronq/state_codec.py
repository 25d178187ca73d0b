"""JobState to and from the compact JSON kept in Redis.

Driven by the dataclasses' own type hints, so a field added to the state machine needs no codec
change; the hints are read once per type into a decoder, since every step decodes and encodes a
state. Fields at their default are left out and times are epoch seconds: an idle job's state is
a few dozen bytes, which matters at 100,000 jobs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from cronq.statemachine import JobState

__all__ = ["decode_state", "encode_state"]

Decoder = Callable[[Any], Any]


def encode_state(state: JobState) -> str:
    return json.dumps(_encode(state), separators=(",", ":"))


def decode_state(text: str | bytes | None) -> JobState:
    if not text:
        return JobState()
    decoded = _decoder(JobState)(json.loads(text))
    assert isinstance(decoded, JobState)
    return decoded


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return round(value.timestamp(), 6)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [_encode(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            name: _encode(field_value)
            for name, default in _defaults(type(value))
            if (field_value := getattr(value, name)) != default
        }
    return value


@functools.cache
def _defaults(cls: type) -> tuple[tuple[str, Any], ...]:
    return tuple((f.name, f.default) for f in dataclasses.fields(cls))


@functools.cache
def _decoder(kind: Any) -> Decoder:
    """A function from the JSON of a value of type `kind` to the value."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        decode_inner = _decoder(inner)
        return lambda raw: None if raw is None else decode_inner(raw)
    if origin is tuple:
        decode_item = _decoder(typing.get_args(kind)[0])
        return lambda raw: tuple(decode_item(item) for item in raw)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        fields = {f.name: _decoder(hints[f.name]) for f in dataclasses.fields(kind)}
        return lambda raw: kind(**{name: fields[name](value) for name, value in raw.items()})
    if kind is datetime:
        return lambda raw: datetime.fromtimestamp(raw, tz=timezone.utc)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind
    return lambda raw: raw
