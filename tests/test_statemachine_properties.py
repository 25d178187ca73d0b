"""Invariants of the job state machine under random event sequences (hypothesis).

Each example draws a job's rules and a sequence of operations: time passing, tasks running
(current ones, stale ones, duplicated ones), outcomes, operator actions, spec changes and the
watchdog. After every step the invariants of DESIGN §2 must hold.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronq.policies import Misfire, Overlap
from cronq.statemachine import (
    Abort,
    Action,
    Disable,
    Enable,
    Event,
    InvocationDone,
    InvocationStarted,
    InvocationStarting,
    InvocationStatus,
    JobRules,
    JobState,
    Pause,
    Phase,
    Rejected,
    Resume,
    SpecChanged,
    StartInvocation,
    TickLater,
    TimerTick,
    TriggerNow,
    WatchdogFired,
    World,
    step,
)
from tests.machine_harness import T0, rules

FAILURES: list[Any] = [
    "drop",
    {"constant": {"delay": "1s", "max_retries": 0}},
    {"constant": {"delay": "2s", "max_retries": 2}},
    {"constant": {"delay": "3s"}},
    {"exponential": {"initial": "1s", "max_retries": 3}},
    {"cron": {"schedule": "*/5 * * * * *", "max_retries": 1}},
]
SCHEDULES = ["@every 5s", "*/7 * * * * *", "@every 1m", "triggered", None]


@st.composite
def job_rules(draw: st.DrawFn) -> JobRules:
    schedule = draw(st.sampled_from(SCHEDULES))
    start = T0 + timedelta(seconds=draw(st.integers(0, 20))) if schedule is None else None
    if schedule is not None and draw(st.booleans()):
        start = T0 + timedelta(seconds=draw(st.integers(-30, 20)))
    until = None
    if schedule is not None and draw(st.booleans()):
        until = T0 + timedelta(seconds=draw(st.integers(10, 200)))
    return rules(
        schedule,
        start=start,
        until=until,
        repeats=draw(st.none() | st.integers(1, 4)),
        overlap=draw(st.sampled_from(list(Overlap))),
        max_concurrent=draw(st.integers(1, 3)),
        max_pending=draw(st.integers(1, 3)),
        misfire=draw(st.sampled_from(list(Misfire))),
        misfire_grace=timedelta(seconds=draw(st.sampled_from([2, 10, 60]))),
        max_catch_up=draw(st.integers(1, 4)),
        failure=draw(st.sampled_from(FAILURES)),
        timeout=timedelta(seconds=draw(st.sampled_from([5, 30]))),
    )


OPERATIONS = st.one_of(
    st.tuples(st.just("advance"), st.integers(0, 40)),
    st.tuples(st.just("tick"), st.integers(0, 0)),
    st.tuples(st.just("start"), st.integers(0, 3)),
    st.tuples(st.just("started"), st.integers(0, 3)),
    st.tuples(st.just("succeed"), st.integers(0, 3)),
    st.tuples(st.just("fail"), st.integers(0, 3)),
    st.tuples(st.just("replay"), st.integers(0, 50)),
    st.tuples(st.just("watchdog"), st.integers(0, 15)),
    st.tuples(
        st.sampled_from(["trigger", "pause", "resume", "abort", "disable", "enable", "respec"]),
        st.integers(0, 0),
    ),
)


@dataclass
class Run:
    """The job under test, every task ever handed out, and the invariants' bookkeeping."""

    rules: JobRules
    now: datetime = T0
    state: JobState = field(default_factory=JobState)
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    delivered: list[Event] = field(default_factory=list)
    finished: bool = False

    def world(self) -> World:
        return World(self.now, self.rules, lambda: next(self.counter))

    def event_for(self, operation: str, value: int) -> Event | None:
        state = self.state
        match operation:
            case "advance":
                self.now += timedelta(seconds=value)
                return None
            case "tick":
                if state.tick is None:
                    return None
                self.now = max(self.now, state.tick.at)
                return TimerTick(state.tick.nonce)
            case "start" if state.pending:
                pending = state.pending[value % len(state.pending)]
                self.now = max(self.now, pending.at)
                return InvocationStarting(pending.nonce, f"inv-{next(self.ids)}")
            case "started" if state.active:
                return InvocationStarted(state.active[value % len(state.active)].id)
            case "succeed" | "fail" if state.active:
                outcome = (
                    InvocationStatus.SUCCEEDED
                    if operation == "succeed"
                    else InvocationStatus.FAILED
                )
                return InvocationDone(state.active[value % len(state.active)].id, outcome)
            case "replay" if self.delivered:
                return self.delivered[value % len(self.delivered)]  # a task delivered again
            case "watchdog":
                alive = frozenset(p.nonce for p in state.pending if value % 2)
                if state.tick is not None and value % 3 == 0:
                    alive |= {state.tick.nonce}
                return WatchdogFired(timedelta(seconds=3), alive)
            case "trigger":
                return TriggerNow()
            case "pause":
                return Pause("testing")
            case "resume":
                return Resume()
            case "abort":
                return Abort()
            case "disable":
                return Disable()
            case "enable":
                return Enable()
            case "respec":
                expression = self.rules.schedule.expression if self.rules.schedule else None
                if expression in (None, "triggered"):
                    return None
                other = "@every 9s" if expression != "@every 9s" else "@every 5s"
                self.rules = JobRules(**{**self.rules.__dict__, "schedule": rules(other).schedule})
                return SpecChanged()
        return None

    def apply(self, event: Event) -> tuple[JobState, tuple[Action, ...]]:
        before = self.state
        self.state, actions = step(before, event, self.world())
        if isinstance(event, (TimerTick, InvocationStarting)):
            self.delivered.append(event)
        check_step(self, before, event, actions)
        return self.state, actions


def limit(job_rules: JobRules) -> int:
    return job_rules.max_concurrent if job_rules.overlap is Overlap.ALLOW else 1


def check_step(run: Run, before: JobState, event: Event, actions: tuple[Action, ...]) -> None:
    state, job_rules = run.state, run.rules
    # at most one current invocation unless overlap=allow, then at most max_concurrent
    assert state.current <= limit(job_rules), state
    # a job never has two armed ticks: one per step at most, and it is the one the state holds
    ticks = [a for a in actions if isinstance(a, TickLater)]
    assert len(ticks) <= 1
    if ticks:
        assert state.tick is not None and state.tick.nonce == ticks[0].nonce
    # every start asked for is one the state waits for
    for start in (a for a in actions if isinstance(a, StartInvocation)):
        assert start.nonce in {p.nonce for p in state.pending}
    # attempts never exceed max_retries + 1 per tick
    retry = job_rules.failure.retry
    if retry is None or retry.max_retries is not None:
        cap = 1 + (retry.max_retries or 0 if retry else 0)
        assert all(p.attempt <= cap for p in state.pending)
        assert all(a.attempt <= cap for a in state.active)
    # FINISHED is final
    if run.finished:
        assert state.phase is Phase.FINISHED
        assert not any(isinstance(a, (StartInvocation, TickLater)) for a in actions)
    run.finished = state.phase is Phase.FINISHED
    if run.finished:
        assert not state.busy and state.tick is None
    # whatever the job waits on has a watchdog deadline, no later than it
    expected = [p.at for p in state.pending] + [a.deadline for a in state.active]
    expected += [state.tick.at] if state.tick else []
    if expected:
        assert state.watchdog_at is not None
        if state.checked_at is None:
            assert state.watchdog_at == min(expected)
    # an enabled job that fires by itself is never silently stuck: it waits on something
    if state.phase is Phase.ENABLED and not job_rules.manual:
        assert state.tick or state.busy or state.backlog, state
    # a refusal changes nothing
    if any(isinstance(a, Rejected) for a in actions):
        assert state == before
    # invocation ids are unique
    assert len({a.id for a in state.active}) == len(state.active)


def check_stale_tasks_change_nothing(run: Run) -> None:
    """A TickLater or StartInvocation whose nonce the job no longer holds is a no-op."""
    state = run.state
    held = {p.nonce for p in state.pending} | ({state.tick.nonce} if state.tick else set())
    stale = [e for e in run.delivered if getattr(e, "nonce", None) not in held]
    stale += [TimerTick(-1), InvocationStarting(-1, "ghost")]
    for event in stale:
        assert step(state, event, run.world()) == (state, ())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job_rules(), st.lists(OPERATIONS, max_size=60))
def test_invariants_hold_under_any_sequence(
    job_rules: JobRules, operations: list[tuple[str, int]]
) -> None:
    run = Run(job_rules)
    run.apply(Enable())
    for operation, value in operations:
        event = run.event_for(operation, value)
        if event is not None:
            run.apply(event)
            check_stale_tasks_change_nothing(run)


@settings(max_examples=150, deadline=None)
@given(job_rules(), st.lists(OPERATIONS, max_size=40))
def test_delivering_every_task_twice_is_the_same_as_once(
    job_rules: JobRules, operations: list[tuple[str, int]]
) -> None:
    once, twice = Run(job_rules), Run(job_rules)
    for run in (once, twice):
        run.apply(Enable())
    for operation, value in operations:
        event = once.event_for(operation, value)
        twice.now, twice.rules, twice.ids = once.now, once.rules, once.ids
        if event is None:
            continue
        once.apply(event)
        twice.apply(event)
        if isinstance(event, (TimerTick, InvocationStarting)):
            assert twice.apply(event)[1] == ()  # the copy of the task does nothing
        assert twice.state == once.state
