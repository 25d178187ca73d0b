"""The per-job policies of DESIGN §3, as validated values.

Shared by the config files (which spell them) and the state machine (which obeys them), so both
read the same defaults.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cronq.durations import Duration
from cronq.schedule import ScheduleError, parse_schedule

__all__ = [
    "DEFAULT_MAX_CATCH_UP",
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_MISFIRE_GRACE",
    "DEFAULT_TIMEOUT",
    "ConstantRetry",
    "CronRetry",
    "ExponentialRetry",
    "FailurePolicy",
    "Misfire",
    "Overlap",
    "StrictModel",
]

DEFAULT_TIMEOUT = timedelta(minutes=5)  # seeds/000: "Timeouts are set to 5 mins by default"
DEFAULT_MAX_PENDING = 10
DEFAULT_MAX_CATCH_UP = 100
# overlap=allow: 1 would make allow the same as skip; unbounded (Kubernetes' Allow) lets a hung
# target pile up invocations without end. 10 bounds outstanding work as max_pending does for queue.
DEFAULT_MAX_CONCURRENT = 10
# Quartz's misfireThreshold: a tick processed within a minute of its time is merely late, not
# missed.
DEFAULT_MISFIRE_GRACE = timedelta(seconds=60)


class StrictModel(BaseModel):
    """Unknown keys are errors (DESIGN §6) and values never change once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Overlap(str, Enum):
    """What a tick does while an invocation is still active."""

    SKIP = "skip"
    QUEUE = "queue"
    ALLOW = "allow"
    REPLACE = "replace"


class Misfire(str, Enum):
    """What a tick does when it is processed more than `misfire_grace` after its time."""

    COALESCE = "coalesce"
    SKIP = "skip"
    CATCH_UP = "catch_up"


class _Retry(StrictModel):
    max_retries: int | None = Field(
        default=None, ge=0, description="retries after the first attempt; unset: until success"
    )

    def allows(self, attempts_made: int) -> bool:
        return self.max_retries is None or attempts_made <= self.max_retries


class ConstantRetry(_Retry):
    delay: Duration = Field(description="time between attempts")

    @model_validator(mode="after")
    def _bounded_if_immediate(self) -> ConstantRetry:
        if self.delay == timedelta(0) and self.max_retries is None:
            raise ValueError(
                "a delay of 0s needs max_retries: endless immediate retries are a storm"
            )
        return self


class CronRetry(_Retry):
    schedule: str = Field(description="retry at this schedule's fire times (job's zone)")

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, value: str) -> str:
        schedule = parse_schedule(value)
        if schedule.manual:
            raise ScheduleError("a retry schedule must fire by itself", expression=value)
        return value


class ExponentialRetry(_Retry):
    initial: Duration = Field(default=timedelta(seconds=1), description="first delay")
    multiplier: float = Field(default=2.0, ge=1.0, le=100.0)
    max_delay: Duration = Field(default=timedelta(hours=1), description="delays stop growing here")


class FailurePolicy(StrictModel):
    """Exactly one of drop / constant / cron / exponential (seeds/004). Written `drop`, or
    `{constant: {delay: 30s, max_retries: 3}}`."""

    drop: dict[str, Any] | None = None
    constant: ConstantRetry | None = None
    cron: CronRetry | None = None
    exponential: ExponentialRetry | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value in ("drop", "constant", "cron", "exponential"):
                return {value: {}}
            raise ValueError(
                f"unknown failure policy {value!r}: expected drop, constant, cron or exponential"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> FailurePolicy:
        chosen = [
            name
            for name in ("drop", "constant", "cron", "exponential")
            if getattr(self, name) is not None
        ]
        if len(chosen) > 1:
            raise ValueError(f"give one failure policy, not {' and '.join(chosen)}")
        if self.drop:
            raise ValueError("drop takes no settings")
        return self

    @property
    def retry(self) -> ConstantRetry | CronRetry | ExponentialRetry | None:
        return self.constant or self.cron or self.exponential

    def retry_at(
        self, attempts_made: int, last_attempt_at: datetime, zone: tzinfo
    ) -> datetime | None:
        """The virtual time of the next attempt after `attempts_made` failed attempts, the last
        one due at `last_attempt_at`; None when the policy gives up."""
        policy = self.retry
        if policy is None or not policy.allows(attempts_made):
            return None
        if isinstance(policy, ConstantRetry):
            return last_attempt_at + policy.delay
        if isinstance(policy, ExponentialRetry):
            ceiling = policy.max_delay.total_seconds()
            try:
                grown = policy.initial.total_seconds() * policy.multiplier ** (attempts_made - 1)
            except OverflowError:  # endless retries: the delay stopped growing long ago
                grown = ceiling
            seconds = min(grown, ceiling)
            return last_attempt_at + timedelta(seconds=seconds)
        return parse_schedule(policy.schedule, zone).next_after(last_attempt_at)
