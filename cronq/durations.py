"""Durations as people write them in config files: Go style (`90s`, `1h30m`, `250ms`) or ISO 8601
(`PT90S`, `P1DT2H`).

One parser for every place that takes a duration (`@every`, timeouts, policies, `start`), so they
all accept and reject the same spellings.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

__all__ = ["Duration", "DurationError", "format_duration", "parse_duration"]


class DurationError(ValueError):
    """A duration that cannot be read; the message says why."""


_UNIT_SECONDS = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
# Go style: one or more <number><unit> parts, largest unit first is not required (Go does not
# require it either), but every unit may appear once.
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d|w)")
_GO_WHOLE = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h|d|w))+")
# ISO 8601 durations without years and months: their length depends on the calendar.
_ISO = re.compile(
    r"P(?:(?P<w>[0-9]+(?:\.[0-9]+)?)W)?(?:(?P<d>[0-9]+(?:\.[0-9]+)?)D)?"
    r"(?:T(?:(?P<h>[0-9]+(?:\.[0-9]+)?)H)?(?:(?P<m>[0-9]+(?:\.[0-9]+)?)M)?"
    r"(?:(?P<s>[0-9]+(?:\.[0-9]+)?)S)?)?"
)
# Bounded so that a typo cannot schedule something ten thousand years away.
MAX_DURATION = timedelta(days=366 * 100)


def parse_duration(text: str, *, allow_zero: bool = True) -> timedelta:
    """Read `90s`, `1h30m`, `250ms`, `2d`, `PT90S` or `P1DT2H` into a timedelta.

    Raises DurationError with a message fit to show a user.
    """
    if not isinstance(text, str):
        raise DurationError(f"expected a duration such as '90s' or 'PT90S', got {text!r}")
    raw = text.strip()
    if not raw:
        raise DurationError("empty duration")
    if not raw.isascii():
        raise DurationError(f"invalid duration {text!r}: only ASCII digits and units are allowed")
    seconds = _iso_seconds(raw) if raw[:1] in "Pp" else _go_seconds(raw)
    value = timedelta(seconds=seconds)
    if value < timedelta(0):
        raise DurationError(f"invalid duration {text!r}: negative")
    if value == timedelta(0) and not allow_zero:
        raise DurationError(f"invalid duration {text!r}: must be greater than zero")
    if value > MAX_DURATION:
        raise DurationError(f"invalid duration {text!r}: longer than 100 years")
    return value


def _go_seconds(raw: str) -> float:
    if not _GO_WHOLE.fullmatch(raw):
        raise DurationError(
            f"invalid duration {raw!r}: expected <number><unit>... with units ms, s, m, h, d, w "
            "(e.g. '90s', '1h30m') or ISO 8601 (e.g. 'PT90S')"
        )
    seen: set[str] = set()
    total = 0.0
    for number, unit in _GO_PART.findall(raw):
        if unit in seen:
            raise DurationError(f"invalid duration {raw!r}: unit {unit!r} given twice")
        seen.add(unit)
        total += float(number) * _UNIT_SECONDS[unit]
    return total


def _iso_seconds(raw: str) -> float:
    match = _ISO.fullmatch(raw.upper())
    if not match or raw.upper() in ("P", "PT") or raw.upper().endswith("T"):
        raise DurationError(
            f"invalid duration {raw!r}: expected ISO 8601 such as 'PT90S' or 'P1DT2H' "
            "(years and months are not allowed: their length varies)"
        )
    parts = match.groupdict()
    return sum(
        float(parts[key]) * _UNIT_SECONDS[key] for key in ("w", "d", "h", "m", "s") if parts[key]
    )


def format_duration(value: timedelta) -> str:
    """The shortest Go-style spelling of a duration: `1h30m`, `90ms`, `0s`."""
    total_ms = round(value.total_seconds() * 1000)
    if total_ms == 0:
        return "0s"
    sign = "-" if total_ms < 0 else ""
    total_ms = abs(total_ms)
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        count, total_ms = divmod(total_ms, size)
        if count:
            parts.append(f"{count}{unit}")
    if total_ms:
        parts.append(f"{total_ms}ms")
    return sign + "".join(parts)


def _coerce(value: object) -> timedelta:
    """Config files may give a duration as a string, or as a number of seconds."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise DurationError(f"expected a duration such as '90s', got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            raise DurationError(f"invalid duration {value!r}: expected a number of seconds >= 0")
        if value > MAX_DURATION.total_seconds():
            raise DurationError(f"invalid duration {value!r}: longer than 100 years")
        return timedelta(seconds=value)
    if isinstance(value, str):
        return parse_duration(value)
    raise DurationError(f"expected a duration such as '90s' or 'PT90S', got {value!r}")


Duration = Annotated[
    timedelta,
    BeforeValidator(_coerce),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [
                {
                    "type": "string",
                    "description": "Go style (90s, 1h30m, 250ms, 2d) or ISO 8601 (PT90S)",
                    "examples": ["90s", "1h30m", "PT90S"],
                },
                {"type": "number", "minimum": 0, "description": "seconds"},
            ]
        }
    ),
]
"""A pydantic field type for durations in config models."""
