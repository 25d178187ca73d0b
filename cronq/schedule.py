"""Schedules: cron expressions, macros, `@every <duration>` and `triggered`, evaluated in an IANA zone.

PUBLIC CONTRACT (implementation in progress; the signatures below are what the rest of cronq uses).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo

__all__ = ["Schedule", "ScheduleError", "parse_schedule", "parse_timezone"]


class ScheduleError(ValueError):
    """An invalid schedule or zone. `field` names the part at fault ("minute", "day-of-week",
    "timezone", ... or None for the expression as a whole); str() is a complete message."""

    def __init__(self, message: str, *, field: str | None = None, expression: str = "") -> None:
        self.field = field
        self.expression = expression
        self.problem = message
        prefix = f"{field}: " if field else ""
        super().__init__(f"invalid schedule {expression!r}: {prefix}{message}")


class Schedule(ABC):
    """A parsed schedule bound to a zone."""

    expression: str
    timezone: ZoneInfo

    @property
    def manual(self) -> bool:
        """True for `triggered`: it never fires by itself, but the job is not finished."""
        return False

    @abstractmethod
    def next_after(self, after: datetime, *, anchor: datetime | None = None) -> datetime | None:
        """The first fire time strictly after `after` (an aware datetime), as an aware UTC datetime,
        or None when there is none. `anchor` is where `@every` counts from (default `after`);
        cron expressions ignore it."""


def parse_timezone(name: str) -> ZoneInfo:
    raise NotImplementedError


def parse_schedule(expression: str, timezone: str | tzinfo = "UTC") -> Schedule:
    raise NotImplementedError
