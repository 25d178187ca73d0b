"""A fake clock, counting nonces and a job to drive through the pure state machine."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from cronq.policies import FailurePolicy
from cronq.schedule import parse_schedule
from cronq.statemachine import (
    Action,
    Enable,
    Event,
    InvocationDone,
    InvocationStarted,
    InvocationStarting,
    InvocationStatus,
    JobRules,
    JobState,
    StartInvocation,
    TickLater,
    TimerTick,
    World,
    step,
)

UTC = timezone.utc
T0 = datetime(2027, 1, 4, 9, 0, 0, tzinfo=UTC)  # a Monday


def rules(schedule: str | None = "@every 10s", **overrides: Any) -> JobRules:
    zone = overrides.get("zone")
    failure = overrides.pop("failure", None)
    if isinstance(failure, (str, dict)):
        overrides["failure"] = FailurePolicy.model_validate(failure)
    parsed = parse_schedule(schedule, zone or "UTC") if schedule else None
    return JobRules(schedule=parsed, **overrides)


@dataclass
class Job:
    """One job, a clock that only moves when told, and every action the machine asked for."""

    rules: JobRules = field(default_factory=rules)
    now: datetime = T0
    state: JobState = field(default_factory=JobState)
    log: list[Action] = field(default_factory=list)
    nonces: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def world(self) -> World:
        return World(self.now, self.rules, lambda: next(self.nonces))

    def send(self, event: Event) -> tuple[Action, ...]:
        self.state, actions = step(self.state, event, self.world())
        self.log.extend(actions)
        return actions

    def enable(self) -> tuple[Action, ...]:
        return self.send(Enable())

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def at(self, when: datetime) -> None:
        self.now = when

    def tick(self) -> tuple[Action, ...]:
        """Run the armed TickLater task at its time (or now, if that is later)."""
        assert self.state.tick is not None, "no tick armed"
        self.now = max(self.now, self.state.tick.at)
        return self.send(TimerTick(self.state.tick.nonce))

    def begin(self, index: int = 0) -> str:
        """Run a queued StartInvocation task: the invocation is committed as STARTING."""
        pending = self.state.pending[index]
        self.now = max(self.now, pending.at)
        invocation_id = f"inv-{next(self.ids)}"
        self.send(InvocationStarting(pending.nonce, invocation_id))
        return invocation_id

    def finish(
        self,
        invocation_id: str,
        outcome: InvocationStatus = InvocationStatus.SUCCEEDED,
        after: float = 0,
    ) -> tuple[Action, ...]:
        self.advance(after)
        return self.send(
            InvocationDone(invocation_id, outcome, None if outcome.value == "SUCCEEDED" else "boom")
        )

    def run(self, outcome: InvocationStatus = InvocationStatus.SUCCEEDED, after: float = 0) -> str:
        invocation_id = self.begin()
        self.send(InvocationStarted(invocation_id))
        self.finish(invocation_id, outcome, after)
        return invocation_id

    def starts(self) -> list[StartInvocation]:
        return [a for a in self.log if isinstance(a, StartInvocation)]

    def ticks(self) -> list[TickLater]:
        return [a for a in self.log if isinstance(a, TickLater)]
