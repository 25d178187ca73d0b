"""JobState to and from the compact JSON kept in Redis.

Driven by the dataclasses' own type hints, so a field added to the state machine needs no codec
change. Fields at their default are left out and times are epoch seconds: an idle job's state is
a few dozen bytes, which matters at 100,000 jobs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from cronq.statemachine import JobState

__all__ = ["decode_state", "encode_state"]


def encode_state(state: JobState) -> str:
    return json.dumps(_encode(state), separators=(",", ":"))


def decode_state(text: str | bytes | None) -> JobState:
    if not text:
        return JobState()
    decoded = _decode(JobState, json.loads(text))
    assert isinstance(decoded, JobState)
    return decoded


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _encode(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) != f.default
        }
    if isinstance(value, datetime):
        return round(value.timestamp(), 6)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [_encode(item) for item in value]
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(kind: Any, raw: Any) -> Any:
    if raw is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        return _decode(inner, raw)
    if origin is tuple:
        item = typing.get_args(kind)[0]
        return tuple(_decode(item, value) for value in raw)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = _hints(kind)
        return kind(**{name: _decode(hints[name], value) for name, value in raw.items()})
    if kind is datetime:
        return datetime.fromtimestamp(raw, tz=timezone.utc)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind(raw)
    return raw
