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
_MISSING: Any = dataclasses.MISSING


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
        return _dataclass_codec(kind)
    if kind is datetime:
        return (
            lambda value: round(value.timestamp(), 6),
            lambda raw: datetime.fromtimestamp(raw, tz=timezone.utc),
        )
    if isinstance(kind, type) and issubclass(kind, Enum):
        return lambda value: value.value, kind
    return _as_is, _as_is


def _as_is(value: Any) -> Any:
    return value


def _dataclass_codec(kind: type) -> tuple[Codec, Codec]:
    """Fields at their default are left out. Every step runs this on the whole state, so the
    loops are lean: values stored as they are skip their codec, and a default that is the very
    object (None, 0, "", ()) is found without a comparison."""
    hints = typing.get_type_hints(kind)
    fields = [(f.name, f.default, *_codec(hints[f.name])) for f in dataclasses.fields(kind)]
    required = [(name, encoder) for name, default, encoder, _ in fields if default is _MISSING]
    optional = [(name, d, encoder) for name, d, encoder, _ in fields if d is not _MISSING]
    decoders = {name: decode for name, _, _, decode in fields if decode is not _as_is}

    def encode(value: Any) -> dict[str, Any]:
        values = value.__dict__
        encoded = {name: encode_field(values[name]) for name, encode_field in required}
        for name, default, encode_field in optional:
            field_value = values[name]
            if field_value is not default and field_value != default:
                encoded[name] = field_value if encode_field is _as_is else encode_field(field_value)
        return encoded

    def decode(raw: dict[str, Any]) -> Any:
        for name, decode_field in decoders.items():
            if name in raw:
                raw[name] = decode_field(raw[name])
        return kind(**raw)

    return encode, decode
