"""JobState to and from the compact JSON kept in Redis.

Driven by the dataclasses' own type hints, so a field added to the state machine needs no codec
change; the hints are read once per type into an encoder and a decoder, since every step decodes
and encodes a state. Fields at their default are left out and times are epoch seconds: an idle
job's state is a few dozen bytes, which matters at 100,000 jobs.
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

Codec = Callable[[Any], Any]  # an encoder (value to JSON) or a decoder (JSON to value)


def encode_state(state: JobState) -> str:
    encode, _ = _codec(JobState)
    return json.dumps(encode(state), separators=(",", ":"))


def decode_state(text: str | bytes | None) -> JobState:
    if not text:
        return JobState()
    _, decode = _codec(JobState)
    decoded = decode(json.loads(text))
    assert isinstance(decoded, JobState)
    return decoded


@functools.cache
def _codec(kind: Any) -> tuple[Codec, Codec]:
    """The encoder and the decoder of values of type `kind`."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        encode_inner, decode_inner = _codec(inner)
        return (
            lambda value: None if value is None else encode_inner(value),
            lambda raw: None if raw is None else decode_inner(raw),
        )
    if origin is tuple:
        encode_item, decode_item = _codec(typing.get_args(kind)[0])
        return (
            lambda value: [encode_item(item) for item in value],
            lambda raw: tuple(decode_item(item) for item in raw),
        )
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        fields = [(f.name, f.default, *_codec(hints[f.name])) for f in dataclasses.fields(kind)]
        decoders = {name: decode for name, _, _, decode in fields}
        return (
            lambda value: {
                name: encode(field_value)
                for name, default, encode, _ in fields
                if (field_value := getattr(value, name)) != default
            },
            lambda raw: kind(**{name: decoders[name](value) for name, value in raw.items()}),
        )
    if kind is datetime:
        return (
            lambda value: round(value.timestamp(), 6),
            lambda raw: datetime.fromtimestamp(raw, tz=timezone.utc),
        )
    if isinstance(kind, type) and issubclass(kind, Enum):
        return lambda value: value.value, kind
    return lambda value: value, lambda raw: raw
