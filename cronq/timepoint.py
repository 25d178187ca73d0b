"""`start` and `until` of a job (DESIGN §3 lifetime): an instant, or a duration from a reference.

Config files are validated long before they are applied, so a relative time (`90s`, `PT90S`)
stays relative here: the engine resolves it against apply time (for `start`) or the job's start
(for `until`). Keeping which form was written also lets `apply` see that a file did not change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Annotated

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from cronq.durations import MAX_DURATION, format_duration, parse_duration

__all__ = ["TimePoint", "TimePointField", "parse_rfc3339"]

_RFC3339 = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ](?P<h>[0-9]{2}):(?P<m>[0-9]{2}):(?P<s>[0-9]{2})"
    r"(?:\.(?P<frac>[0-9]{1,9}))?(?P<offset>[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_LOOKS_LIKE_DATE = re.compile(r"[0-9]{4}-")


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 date-time with an offset (`2026-12-01T09:00:00Z`, `...+01:00`).

    Written out by hand because `datetime.fromisoformat` on Python 3.10 rejects `Z` and accepts
    times without an offset, which would silently mean "the server's local time".
    """
    match = _RFC3339.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"expected an RFC 3339 time with an offset such as '2026-12-01T09:00:00Z', got {text!r}"
        )
    offset = match["offset"].upper()
    zone = timezone.utc
    if offset != "Z":
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        if hours > 23 or minutes > 59:
            raise ValueError(f"invalid UTC offset {offset!r} in {text!r}")
        sign = -1 if offset[0] == "-" else 1
        zone = timezone(sign * timedelta(hours=hours, minutes=minutes))
    micros = int((match["frac"] or "0").ljust(6, "0")[:6])
    try:
        day = date.fromisoformat(match["date"])
        clock = time(int(match["h"]), int(match["m"]), int(match["s"]), micros)
    except ValueError as exc:
        raise ValueError(f"invalid time {text!r}: {exc}") from None
    return datetime.combine(day, clock, tzinfo=zone)


@dataclass(frozen=True)
class TimePoint:
    """Either `at` (an aware instant) or `after` (a duration from a reference); never both."""

    at: datetime | None = None
    after: timedelta | None = None

    def __post_init__(self) -> None:
        if (self.at is None) == (self.after is None):
            raise ValueError("a TimePoint is either an instant or a duration")
        if self.at is not None and self.at.utcoffset() is None:
            raise ValueError("a TimePoint instant must be timezone-aware")

    @property
    def is_relative(self) -> bool:
        return self.after is not None

    def resolve(self, reference: datetime) -> datetime:
        """The instant this means when counted from `reference` (ignored for an instant)."""
        if self.at is not None:
            return self.at
        assert self.after is not None
        return reference + self.after

    def __str__(self) -> str:
        if self.at is not None:
            return self.at.isoformat().replace("+00:00", "Z")
        assert self.after is not None
        return format_duration(self.after)

    @classmethod
    def parse(cls, value: object) -> TimePoint:
        """From what a config file holds: a string, a number of seconds, or a datetime (TOML)."""
        if isinstance(value, TimePoint):
            return value
        if isinstance(value, bool):
            raise ValueError(f"expected a time or a duration, got {value!r}")
        if isinstance(value, datetime):
            if value.utcoffset() is None:
                raise ValueError(
                    f"time {value.isoformat()} has no UTC offset; add one, e.g. 'Z' or '+01:00'"
                )
            return cls(at=value)
        if isinstance(value, (date, time)):
            raise ValueError(
                f"expected a full time with an offset such as '2026-12-01T09:00:00Z', got {value}"
            )
        if isinstance(value, (int, float)):
            if not 0 <= value <= MAX_DURATION.total_seconds():  # also refuses NaN
                raise ValueError(f"expected from 0 to 100 years in seconds, got {value!r}")
            return cls(after=timedelta(seconds=value))
        if isinstance(value, str):
            if _LOOKS_LIKE_DATE.match(value.strip()):
                return cls(at=parse_rfc3339(value))
            return cls(after=parse_duration(value))
        raise ValueError(
            "expected an RFC 3339 time such as '2026-12-01T09:00:00Z' or a duration such as "
            f"'90s', got {value!r}"
        )


TimePointField = Annotated[
    TimePoint,
    PlainValidator(TimePoint.parse),
    PlainSerializer(str, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [
                {
                    "type": "string",
                    "format": "date-time",
                    "description": "RFC 3339 time with an offset",
                    "examples": ["2026-12-01T09:00:00Z"],
                },
                {
                    "type": "string",
                    "description": "a duration: Go style (90s, 1h30m) or ISO 8601 (PT90S)",
                    "examples": ["90s", "PT90S"],
                },
                {"type": "number", "minimum": 0, "description": "seconds"},
            ]
        }
    ),
]
"""A pydantic field type for `start` / `until`."""
