"""The world a step sees: the clock, the job's rules and a nonce source, all passed in, so the
machine itself reads no clock and touches no I/O."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from cronq.policies import (
    DEFAULT_MAX_CATCH_UP,
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_PENDING,
    DEFAULT_MISFIRE_GRACE,
    DEFAULT_TIMEOUT,
    FailurePolicy,
    Misfire,
    Overlap,
)
from cronq.schedule import Schedule

__all__ = ["JobRules", "World"]

_INSTANT = timedelta(microseconds=1)


@dataclass(frozen=True)
class JobRules:
    """A job's spec, evaluated: a parsed schedule, absolute lifetime bounds, and its policies.

    `start` and `until` are instants here; a config file's "90s from now" is resolved when the
    job is applied. No schedule means a one-shot job at `start`.
    """

    schedule: Schedule | None
    zone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    start: datetime | None = None
    until: datetime | None = None
    repeats: int | None = None
    overlap: Overlap = Overlap.SKIP
    max_pending: int = DEFAULT_MAX_PENDING
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    misfire: Misfire = Misfire.COALESCE
    misfire_grace: timedelta = DEFAULT_MISFIRE_GRACE
    max_catch_up: int = DEFAULT_MAX_CATCH_UP
    failure: FailurePolicy = field(default_factory=FailurePolicy)
    timeout: timedelta = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if self.schedule is None and self.start is None:
            raise ValueError("a job needs a schedule, or a start for a one-shot job")

    @property
    def timing(self) -> str:
        """What the armed tick depends on; equal timings keep the tick across a spec change."""
        expression = self.schedule.expression if self.schedule else ""
        text = f"{expression}|{self.zone.key}|{self.start}|{self.until}|{self.repeats}"
        return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()

    @property
    def manual(self) -> bool:
        """Fires only when triggered: idle without a tick is its normal state, not its end."""
        return self.schedule is not None and self.schedule.manual

    @property
    def limit(self) -> int:
        """How many invocations may be current at once."""
        return self.max_concurrent if self.overlap is Overlap.ALLOW else 1

    def first_fire(self, now: datetime, anchor: datetime) -> datetime | None:
        """The first tick: at or after `start` when one is given (so `start: 0s` fires at once),
        else strictly after now (so `@every 1h` alone does not)."""
        if self.schedule is None:
            return self.start
        if self.start is not None:
            return self.next_fire(self.start - _INSTANT, anchor)
        return self.next_fire(now, anchor)

    def next_fire(self, after: datetime, anchor: datetime) -> datetime | None:
        """The first fire time strictly after `after` that the lifetime still allows."""
        if self.schedule is None:
            return None
        fire = self.schedule.next_after(after, anchor=anchor)
        if fire is None or (self.until is not None and fire > self.until):
            return None
        return fire

    def fires_through(
        self, after: datetime, through: datetime, anchor: datetime, limit: int
    ) -> tuple[list[datetime], bool]:
        """Up to `limit` fire times in (after, through], oldest first, and whether more remain."""
        fires: list[datetime] = []
        fire = self.next_fire(after, anchor)
        while fire is not None and fire <= through:
            if len(fires) == limit:
                return fires, True
            fires.append(fire)
            fire = self.next_fire(fire, anchor)
        return fires, False


@dataclass(frozen=True)
class World:
    now: datetime
    rules: JobRules
    nonces: Callable[[], int]
