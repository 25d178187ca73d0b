"""Events: everything that can happen to a job (DESIGN §2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cronq.statemachine.model import InvocationStatus

__all__ = [
    "Abort",
    "Disable",
    "Enable",
    "Event",
    "InvocationDone",
    "InvocationStarted",
    "InvocationStarting",
    "Pause",
    "Resume",
    "SpecChanged",
    "TimerTick",
    "TriggerNow",
    "WatchdogFired",
]


@dataclass(frozen=True)
class Enable:
    """The job was added (or re-added) by a config file or the API."""


@dataclass(frozen=True)
class Disable:
    """The job was removed: no more ticks; what runs finishes and is recorded."""


@dataclass(frozen=True)
class SpecChanged:
    """The spec in the world is new; the machine compares its timing with the armed one."""


@dataclass(frozen=True)
class TimerTick:
    nonce: int


@dataclass(frozen=True)
class InvocationStarting:
    """A StartInvocation task is about to call the target; `invocation_id` is fresh."""

    nonce: int
    invocation_id: str


@dataclass(frozen=True)
class InvocationStarted:
    """The target accepted the work (an asynchronous target such as `rq` is now running it)."""

    invocation_id: str


@dataclass(frozen=True)
class InvocationDone:
    invocation_id: str
    outcome: InvocationStatus
    error: str | None = None
    # When it ended, if that was before the event came (an RQ job's outcome is reported by a
    # task that may wait for a batch); the step's time otherwise.
    finished_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.outcome not in _OUTCOMES:
            raise ValueError(f"an invocation cannot end as {self.outcome.value}")


_OUTCOMES = frozenset(
    {
        InvocationStatus.SUCCEEDED,
        InvocationStatus.FAILED,
        InvocationStatus.TIMED_OUT,
        InvocationStatus.ABORTED,
    }
)


@dataclass(frozen=True)
class TriggerNow:
    """An operator asked for a run now, outside the schedule."""


@dataclass(frozen=True)
class Pause:
    reason: str = ""


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Abort:
    reason: str = "aborted by operator"


@dataclass(frozen=True)
class WatchdogFired:
    """The job's WatchdogTimerTs lapsed. `alive` holds the nonces whose RQ tasks still exist (the
    engine looks them up): those are late, not lost, and must not be duplicated."""

    grace: timedelta
    alive: frozenset[int] = field(default_factory=frozenset)


Event = (
    Enable
    | Disable
    | SpecChanged
    | TimerTick
    | InvocationStarting
    | InvocationStarted
    | InvocationDone
    | TriggerNow
    | Pause
    | Resume
    | Abort
    | WatchdogFired
)
