"""What the state machine knows about one job: its phase, its armed tick, its queued starts, its
active invocations and its backlog. Everything else (the job's state name, its watchdog deadline)
is derived from these, so it can never disagree with them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

__all__ = [
    "Deferred",
    "Invocation",
    "InvocationStatus",
    "JobState",
    "JobStateName",
    "PendingStart",
    "Phase",
    "Tick",
]


class Phase(str, Enum):
    """The lifecycle an operator or a config file sets; the finer state name derives from it."""

    DISABLED = "DISABLED"
    ENABLED = "ENABLED"
    SUSPENDED = "SUSPENDED"
    FINISHED = "FINISHED"


class JobStateName(str, Enum):
    """The states of DESIGN §2, as shown to people."""

    DISABLED = "DISABLED"
    SCHEDULED = "SCHEDULED"
    SUSPENDED = "SUSPENDED"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    OVERRUN = "OVERRUN"
    FINISHED = "FINISHED"


class InvocationStatus(str, Enum):
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    ABORTED = "ABORTED"
    OVERRUN = "OVERRUN"
    SKIPPED = "SKIPPED"

    @property
    def final(self) -> bool:
        return self not in (InvocationStatus.STARTING, InvocationStatus.RUNNING)


@dataclass(frozen=True)
class Tick:
    """The one armed timer: a TickLater task with this nonce is due at `at` (virtual time)."""

    nonce: int
    at: datetime


@dataclass(frozen=True)
class PendingStart:
    """A StartInvocation task in flight. `due` is the attempt's virtual time: the tick's time for a
    first attempt, the retry time for a retry (stored so a restart neither resets nor skips it)."""

    nonce: int
    scheduled_for: datetime
    attempt: int
    due: datetime
    at: datetime  # when the task runs: `due`, or now when that is already past
    manual: bool = False


@dataclass(frozen=True)
class Deferred:
    """A run accepted to start once the current invocation ends (overlap=queue, catch-up)."""

    scheduled_for: datetime
    manual: bool = False
    # Deferred only because the job ran late, not by policy: it may yet prove an overrun.
    behind: bool = False


@dataclass(frozen=True)
class Invocation:
    """An invocation whose start is committed: STARTING until the target took it, then RUNNING."""

    id: str
    nonce: int
    scheduled_for: datetime
    attempt: int
    due: datetime
    started_at: datetime
    deadline: datetime
    status: InvocationStatus = InvocationStatus.STARTING
    manual: bool = False


@dataclass(frozen=True)
class JobState:
    phase: Phase = Phase.DISABLED
    tick: Tick | None = None
    pending: tuple[PendingStart, ...] = ()
    active: tuple[Invocation, ...] = ()
    # Ticks accepted to run once the current invocation ends (overlap=queue, misfire=catch_up).
    backlog: tuple[Deferred, ...] = ()
    # Where `@every` counts from: the job's start, or the moment it was enabled.
    anchor: datetime | None = None
    # The schedule, zone and lifetime the armed tick was computed from: a spec change that alters
    # them re-arms the tick; one that does not keeps it.
    timing: str = ""
    # Scheduled runs started: with the backlog, what `repeats` counts (manual runs and retries
    # do not count).
    triggers: int = 0
    # Ticks that found the job busy since its current invocation started (the OVERRUN state).
    overruns: int = 0
    paused_reason: str | None = None
    finished_reason: str | None = None
    # When the watchdog last acted on the job (a repair, or a task found late but alive): its
    # next look comes a grace after that, not at every sweep.
    checked_at: datetime | None = None

    @property
    def name(self) -> JobStateName:
        if self.phase is not Phase.ENABLED:
            return JobStateName(self.phase.value)
        if self.active:
            return JobStateName.OVERRUN if self.overruns else JobStateName.RUNNING
        if self.pending:
            return JobStateName.QUEUED
        return JobStateName.SCHEDULED

    @property
    def busy(self) -> bool:
        """An invocation is current: started, or its start is on its way."""
        return bool(self.active or self.pending)

    @property
    def current(self) -> int:
        return len(self.active) + len(self.pending)

    @property
    def next_run(self) -> datetime | None:
        return self.tick.at if self.tick else None

    @property
    def watchdog_at(self) -> datetime | None:
        """WatchdogTimerTs: when the earliest task this job waits on should have run. The watchdog
        adds its grace. None when the job waits on nothing, so nothing can be lost."""
        expected = [p.at for p in self.pending] + [a.deadline for a in self.active]
        if self.tick is not None:
            expected.append(self.tick.at)
        if not expected:
            return None
        earliest = min(expected)
        return max(earliest, self.checked_at) if self.checked_at else earliest
