"""Actions: what a step asks the outside world to do, committed atomically with the new state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from cronq.statemachine.model import InvocationStatus

__all__ = [
    "AbortInvocation",
    "Action",
    "Finish",
    "RecordInvocation",
    "RecordOverrun",
    "RecordSkip",
    "Rejected",
    "Repair",
    "StartInvocation",
    "TickLater",
    "WatchdogReport",
]


@dataclass(frozen=True)
class TickLater:
    """Enqueue a TickLater task carrying `nonce`, to run at `at`."""

    at: datetime
    nonce: int


@dataclass(frozen=True)
class StartInvocation:
    """Enqueue a StartInvocation task carrying `nonce`, to run at `at` (now, or a retry's time)."""

    nonce: int
    scheduled_for: datetime
    attempt: int
    at: datetime


@dataclass(frozen=True)
class AbortInvocation:
    """Stop the target's work for this invocation (e.g. RQ's stop command)."""

    invocation_id: str


@dataclass(frozen=True)
class RecordInvocation:
    """Write (or update) the invocation's history entry."""

    invocation_id: str
    scheduled_for: datetime
    attempt: int
    status: InvocationStatus
    started_at: datetime | None
    finished_at: datetime | None = None
    error: str | None = None
    manual: bool = False


@dataclass(frozen=True)
class RecordOverrun:
    """A tick found the job busy and overlap forbids a second run: an OVERRUN history entry."""

    scheduled_for: datetime


@dataclass(frozen=True)
class RecordSkip:
    """Fire times that will not run: a SKIPPED history entry for `count` of them, the first at
    `scheduled_for` (one entry, however many, so a long outage cannot flood the history)."""

    scheduled_for: datetime
    reason: str
    count: int = 1


@dataclass(frozen=True)
class Finish:
    """The job has no further fire time; it keeps its history."""

    reason: str


@dataclass(frozen=True)
class Rejected:
    """An operator's request was refused; the state is unchanged. The message is for a person."""

    reason: str


class Repair(str, Enum):
    REARMED_TICK = "rearmed_tick"
    REQUEUED_START = "requeued_start"
    TIMED_OUT = "timed_out"
    SLOW_TICK = "slow_tick"
    SLOW_START = "slow_start"


@dataclass(frozen=True)
class WatchdogReport:
    """What the watchdog found: a repair, or a task that is late but alive (left alone)."""

    repair: Repair
    detail: str


Action = (
    TickLater
    | StartInvocation
    | AbortInvocation
    | RecordInvocation
    | RecordOverrun
    | RecordSkip
    | Finish
    | Rejected
    | WatchdogReport
)
