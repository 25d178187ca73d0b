"""The job state machine: `step(state, event, world) -> (state, actions)`.

A pure function in the manner of the LUCI scheduler: the caller reads the state, steps it, and
commits the new state together with the actions in one transaction. Nonces make every task
idempotent: a TickLater or StartInvocation whose nonce the state no longer holds changes nothing.
"""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import datetime
from typing import Any

from cronq.policies import Misfire, Overlap
from cronq.statemachine.actions import (
    AbortInvocation,
    Action,
    Finish,
    RecordInvocation,
    RecordOverrun,
    RecordSkip,
    Rejected,
    Repair,
    StartInvocation,
    TickLater,
    WatchdogReport,
)
from cronq.statemachine.events import (
    Abort,
    Disable,
    Enable,
    Event,
    InvocationDone,
    InvocationStarted,
    InvocationStarting,
    Pause,
    Resume,
    SpecChanged,
    TimerTick,
    TriggerNow,
    WatchdogFired,
)
from cronq.statemachine.model import (
    Deferred,
    Invocation,
    InvocationStatus,
    JobState,
    PendingStart,
    Phase,
    Tick,
)
from cronq.statemachine.world import World

__all__ = ["step"]

# Bounds the work one step may do counting fire times lost to an outage.
_COUNT_LIMIT = 10_000
_STATE_FIELDS = frozenset(f.name for f in fields(JobState))


def step(state: JobState, event: Event, world: World) -> tuple[JobState, tuple[Action, ...]]:
    """Apply one event. Never raises for a well-formed event; refusals come back as Rejected."""
    transition = _Transition(state, world)
    transition.handle(event)
    new = transition.state
    if (
        not isinstance(event, WatchdogFired)
        and new.checked_at is not None
        and (new.tick, new.pending, new.active) != (state.tick, state.pending, state.active)
    ):
        new = replace(new, checked_at=None)  # the job moved on since the watchdog looked
    return new, tuple(transition.actions)


class _Transition:
    """One step in the making: the state so far and the actions asked for."""

    def __init__(self, state: JobState, world: World) -> None:
        self.state = state
        self.world = world
        self.rules = world.rules
        self.now = world.now
        self.actions: list[Action] = []
        # Where the invocation that ended in this step would have ended, had it started on time.
        self.ended_virtually: datetime | None = None

    # -- dispatch ------------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        if self.state.phase is Phase.FINISHED:
            if isinstance(event, (TriggerNow, Pause, Resume, Abort)):
                self.emit(Rejected("the job is FINISHED: it has no further fire time"))
            return
        match event:
            case Enable():
                self.on_enable()
            case Disable():
                self.on_disable()
            case SpecChanged():
                self.on_spec_changed()
            case TimerTick(nonce=nonce):
                self.on_tick(nonce)
            case InvocationStarting(nonce=nonce, invocation_id=invocation_id):
                self.on_starting(nonce, invocation_id)
            case InvocationStarted(invocation_id=invocation_id):
                self.on_started(invocation_id)
            case InvocationDone(invocation_id=invocation_id, outcome=outcome, error=error):
                self.on_done(invocation_id, outcome, error, event.finished_at)
            case TriggerNow():
                self.on_trigger()
            case Pause(reason=reason):
                self.on_pause(reason)
            case Resume():
                self.on_resume()
            case Abort(reason=reason):
                self.on_abort(reason)
            case WatchdogFired(grace=grace, alive=alive):
                self.on_watchdog(self.now - grace, alive)

    # -- lifecycle -----------------------------------------------------------------------------

    def on_enable(self) -> None:
        if self.state.phase is not Phase.DISABLED:
            return
        first_time = self.state.anchor is None
        # `@every` counts from the whole second the job was enabled at, so its ticks fall on whole
        # seconds as cron's do (task queues schedule at second resolution).
        anchor = (
            self.rules.start or self.now.replace(microsecond=0) if first_time else self.state.anchor
        )
        self.update(phase=Phase.ENABLED, anchor=anchor, timing=self.rules.timing)
        if first_time:
            self.arm(None if self.exhausted() else self.rules.first_fire(self.now, self.anchor))
        else:  # re-enabled: carry on from now, not from what was missed while disabled
            self.rearm_from_now()
        self.finish_if_done()

    def on_disable(self) -> None:
        if self.state.phase is Phase.DISABLED:
            return
        self.drop_pending("the job was disabled")
        self.update(phase=Phase.DISABLED, tick=None, paused_reason=None)

    def on_spec_changed(self) -> None:
        if self.state.phase is not Phase.ENABLED or self.rules.timing == self.state.timing:
            return
        self.update(timing=self.rules.timing, anchor=self.rules.start or self.state.anchor)
        self.rearm_from_now()
        self.finish_if_done()

    def on_pause(self, reason: str) -> None:
        if self.state.phase is Phase.DISABLED:
            self.emit(Rejected("the job is DISABLED"))
            return
        self.drop_pending("the job was paused")
        self.update(phase=Phase.SUSPENDED, tick=None, paused_reason=reason or None)

    def on_resume(self) -> None:
        if self.state.phase is not Phase.SUSPENDED:
            self.emit(Rejected(f"the job is {self.state.name.value}, not paused"))
            return
        self.update(phase=Phase.ENABLED, paused_reason=None, timing=self.rules.timing)
        self.rearm_from_now()
        self.finish_if_done()

    # -- ticks ---------------------------------------------------------------------------------

    def on_tick(self, nonce: int) -> None:
        tick = self.state.tick
        if self.state.phase is not Phase.ENABLED or tick is None or tick.nonce != nonce:
            return  # a stale or duplicate task
        self.update(tick=None)
        if self.now - tick.at <= self.rules.misfire_grace:
            fires, resume_after = [tick.at], tick.at
        else:
            fires, resume_after = self.misfired(tick.at), self.now
        if fires:
            self.fire(fires[0])
            for fire in fires[1:]:
                self.update(backlog=(*self.state.backlog, Deferred(fire)))
        self.arm(None if self.exhausted() else self.rules.next_fire(resume_after, self.anchor))
        self.finish_if_done()

    def misfired(self, late: datetime) -> list[datetime]:
        """The tick at `late` comes more than misfire_grace after its time: the fire times to run
        now, by the misfire policy. The ones not run are recorded as one SKIPPED entry."""
        rules, now = self.rules, self.now
        if rules.misfire is Misfire.COALESCE:
            missed, more = rules.fires_through(late, now, self.anchor, _COUNT_LIMIT)
            self.record_skip(
                missed, more, f"misfire: coalesced into the run for {late.isoformat()}"
            )
            return [late]
        if rules.misfire is Misfire.CATCH_UP:
            fires, more = rules.fires_through(late, now, self.anchor, rules.max_catch_up - 1)
            if more:
                last = fires[-1] if fires else late
                rest, more = rules.fires_through(last, now, self.anchor, _COUNT_LIMIT)
                self.record_skip(rest, more, f"misfire: beyond max_catch_up={rules.max_catch_up}")
            return [late, *fires][: self.remaining()]
        cutoff = now - rules.misfire_grace
        lost, more = rules.fires_through(late, cutoff, self.anchor, _COUNT_LIMIT)
        self.record_skip([late, *lost], more, "misfire: later than misfire_grace")
        recent, _ = rules.fires_through(max(late, cutoff), now, self.anchor, _COUNT_LIMIT)
        return recent[-1:]

    def fire(self, scheduled_for: datetime) -> None:
        """A scheduled fire time is due: start it, queue it, or apply the overlap policy."""
        self.supersede_endless_retry()
        state, rules = self.state, self.rules
        if not state.busy:
            self.start(Deferred(scheduled_for))
        elif rules.overlap is Overlap.QUEUE:
            full = f"queue full (max_pending={rules.max_pending})"
            self.defer(scheduled_for, rules.max_pending, full)
        elif rules.overlap is Overlap.REPLACE:
            self.abort_all(f"replaced by the run for {scheduled_for.isoformat()}")
            self.start(Deferred(scheduled_for))
        elif state.current < rules.limit:
            self.start(Deferred(scheduled_for))
        elif self.busy_at(scheduled_for):
            self.emit(RecordOverrun(scheduled_for))
            self.update(overruns=state.overruns + 1)
        else:
            # Busy only because everything runs late (slow workers, a failover): whether the
            # run before would have covered this fire time is known when it ends. Until then
            # the fire waits its turn, and the job catches up tick by tick.
            full = f"behind (max_catch_up={rules.max_catch_up})"
            self.defer(scheduled_for, rules.max_catch_up, full, behind=True)

    def busy_at(self, moment: datetime) -> bool:
        """Is a run known to cover `moment` in virtual time: has it lasted from its own scheduled
        time to `moment` (as it would have, started on time), or is a failure being retried?"""
        return any(
            a.scheduled_for + (self.now - a.started_at) >= moment for a in self.state.active
        ) or any(p.attempt > 1 for p in self.state.pending)

    def defer(
        self, scheduled_for: datetime, bound: int, full: str, *, behind: bool = False
    ) -> None:
        if len(self.state.backlog) < bound:
            self.update(backlog=(*self.state.backlog, Deferred(scheduled_for, behind=behind)))
        else:
            self.emit(RecordSkip(scheduled_for, full))

    def supersede_endless_retry(self) -> None:
        """Without max_retries a failed run is retried "until it succeeds or the next tick
        arrives" (DESIGN §3): the tick has arrived."""
        retry = self.rules.failure.retry
        if retry is None or retry.max_retries is not None:
            return
        stale = [p for p in self.state.pending if p.attempt > 1]
        for pending in stale:
            self.emit(RecordSkip(pending.scheduled_for, "retry abandoned: the next tick arrived"))
        self.update(pending=tuple(p for p in self.state.pending if p.attempt == 1))

    # -- invocations ---------------------------------------------------------------------------

    def on_starting(self, nonce: int, invocation_id: str) -> None:
        pending = next((p for p in self.state.pending if p.nonce == nonce), None)
        if pending is None:
            return  # a stale or duplicate task: this start was already taken, moved or dropped
        invocation = Invocation(
            id=invocation_id,
            nonce=nonce,
            scheduled_for=pending.scheduled_for,
            attempt=pending.attempt,
            due=pending.due,
            started_at=self.now,
            deadline=self.now + self.rules.timeout,
            manual=pending.manual,
        )
        self.update(
            pending=tuple(p for p in self.state.pending if p is not pending),
            active=(*self.state.active, invocation),
        )
        self.record(invocation, InvocationStatus.STARTING)

    def on_started(self, invocation_id: str) -> None:
        invocation = self.find_active(invocation_id)
        if invocation is None or invocation.status is not InvocationStatus.STARTING:
            return
        running = replace(invocation, status=InvocationStatus.RUNNING)
        self.update(active=tuple(running if a is invocation else a for a in self.state.active))
        self.record(running, InvocationStatus.RUNNING)

    def on_done(
        self,
        invocation_id: str,
        outcome: InvocationStatus,
        error: str | None,
        finished_at: datetime | None,
    ) -> None:
        invocation = self.find_active(invocation_id)
        if invocation is None:
            return  # already ended: aborted, replaced or timed out by the watchdog
        # A reported end time is believed within what the job's own record allows.
        ended = min(max(finished_at, invocation.started_at), self.now) if finished_at else None
        self.end(invocation, outcome, error, ended)
        self.after_invocation()

    def end(
        self,
        invocation: Invocation,
        outcome: InvocationStatus,
        error: str | None,
        finished_at: datetime | None = None,
    ) -> None:
        ended = finished_at or self.now
        self.update(active=tuple(a for a in self.state.active if a is not invocation))
        self.ended_virtually = invocation.scheduled_for + (ended - invocation.started_at)
        self.record(invocation, outcome, finished_at=ended, error=error)
        if outcome in (InvocationStatus.FAILED, InvocationStatus.TIMED_OUT):
            self.retry(invocation)

    def retry(self, failed: Invocation) -> None:
        """The failure policy: the next attempt's virtual time counts from the failed attempt's."""
        if self.state.phase is not Phase.ENABLED:
            return
        due = self.rules.failure.retry_at(failed.attempt, failed.due, self.rules.zone)
        if due is None:
            return
        retry = self.rules.failure.retry
        tick = self.state.tick
        if retry is not None and retry.max_retries is None and tick and due >= tick.at:
            return  # endless retries stop where the next tick takes over
        self.queue_start(failed.scheduled_for, failed.attempt + 1, due, manual=failed.manual)

    def after_invocation(self) -> None:
        """An invocation ended: start the next queued run, or finish."""
        if not self.state.busy:
            self.update(overruns=0)
            while self.state.backlog and self.state.phase is Phase.ENABLED:
                following, *rest = self.state.backlog
                self.update(backlog=tuple(rest))
                if not self.overlapped(following):
                    self.start(following)
                    break
        self.finish_if_done()

    def overlapped(self, deferred: Deferred) -> bool:
        """A fire deferred because the job was behind turns out, now that the run before it
        ended, to fall inside that run in virtual time: an OVERRUN after all."""
        ended = self.ended_virtually
        if not deferred.behind or ended is None or ended <= deferred.scheduled_for:
            return False
        self.emit(RecordOverrun(deferred.scheduled_for))
        return True

    # -- operator actions ----------------------------------------------------------------------

    def on_trigger(self) -> None:
        state, rules = self.state, self.rules
        if state.phase is Phase.DISABLED:
            self.emit(Rejected("the job is DISABLED"))
            return
        run = Deferred(self.now, manual=True)
        if state.busy and rules.overlap is Overlap.QUEUE:
            if len(state.backlog) >= rules.max_pending:
                self.emit(Rejected(f"the job is busy and its queue is full ({rules.max_pending})"))
            else:
                self.update(backlog=(*state.backlog, run))
            return
        if state.busy and rules.overlap is Overlap.REPLACE:
            self.abort_all("replaced by a manual trigger")
        elif state.current >= rules.limit:
            self.emit(
                Rejected(
                    f"the job is busy ({state.name.value}) and overlap={rules.overlap.value} "
                    "forbids another run"
                )
            )
            return
        self.start(run)

    def on_abort(self, reason: str) -> None:
        if not self.state.busy:
            self.emit(Rejected("nothing is running"))
            return
        self.abort_all(reason)
        self.after_invocation()

    # -- the watchdog --------------------------------------------------------------------------

    def on_watchdog(self, cutoff: datetime, alive: frozenset[int]) -> None:
        """Repair what lapsed before `cutoff` (now minus the watchdog's grace)."""
        tick = self.state.tick
        if tick is not None and tick.at < cutoff:
            if tick.nonce in alive:
                self.report(Repair.SLOW_TICK, f"tick for {tick.at.isoformat()} is late but queued")
            else:
                self.arm(tick.at)
                self.report(Repair.REARMED_TICK, f"tick for {tick.at.isoformat()} was lost")
        for pending in self.state.pending:
            if pending.at >= cutoff:
                continue
            if pending.nonce in alive:
                self.report(
                    Repair.SLOW_START, f"start of attempt {pending.attempt} is late but queued"
                )
            else:
                self.requeue(pending)
                self.report(Repair.REQUEUED_START, f"start of attempt {pending.attempt} was lost")
        lapsed = [a for a in self.state.active if a.deadline < cutoff]
        for invocation in lapsed:
            error = "no outcome by its timeout plus grace: the worker is presumed lost"
            self.end(invocation, InvocationStatus.TIMED_OUT, error)
            self.report(Repair.TIMED_OUT, f"invocation {invocation.id} timed out")
        if lapsed:
            self.after_invocation()
        acted = any(isinstance(a, WatchdogReport) for a in self.actions)
        self.update(checked_at=self.now if acted else None)

    # -- building blocks -----------------------------------------------------------------------

    @property
    def anchor(self) -> datetime:
        return self.state.anchor or self.now

    def update(self, **changes: Any) -> None:
        """`dataclasses.replace` without its per-call introspection, which was a tenth of the
        CPU of a tick: a step updates the state several times, and every tick of every job
        steps. The fields are still checked."""
        if not changes.keys() <= _STATE_FIELDS:
            raise TypeError(f"JobState has no field {sorted(changes.keys() - _STATE_FIELDS)}")
        state = object.__new__(JobState)
        state.__dict__.update(self.state.__dict__, **changes)  # frozen: never changed after
        self.state = state

    def emit(self, action: Action) -> None:
        self.actions.append(action)

    def report(self, repair: Repair, detail: str) -> None:
        self.emit(WatchdogReport(repair, detail))

    def arm(self, at: datetime | None) -> None:
        """Arm the one tick (a fresh nonce makes any earlier TickLater task stale), or disarm."""
        if at is None:
            self.update(tick=None)
            return
        nonce = self.world.nonces()
        self.update(tick=Tick(nonce, at))
        self.emit(TickLater(at, nonce))

    def rearm_from_now(self) -> None:
        """Arm from the present: after a resume, a re-enable or a new schedule, nothing that was
        missed meanwhile runs, except a one-shot job's single run, which has not happened yet."""
        rules = self.rules
        if self.exhausted():
            self.arm(None)
        elif rules.schedule is None or (rules.start is not None and rules.start > self.now):
            self.arm(rules.first_fire(self.now, self.anchor))
        else:
            self.arm(rules.next_fire(self.now, self.anchor))

    def remaining(self) -> int:
        """How many more scheduled runs the lifetime allows (a one-shot job allows one)."""
        cap = self.rules.repeats if self.rules.schedule is not None else 1
        if cap is None:
            return _COUNT_LIMIT
        waiting = sum(1 for d in self.state.backlog if not d.manual)
        return max(cap - self.state.triggers - waiting, 0)

    def exhausted(self) -> bool:
        return self.remaining() == 0

    def start(self, run: Deferred) -> None:
        if not run.manual:
            self.update(triggers=self.state.triggers + 1)
        self.queue_start(run.scheduled_for, 1, run.scheduled_for, manual=run.manual)

    def queue_start(
        self, scheduled_for: datetime, attempt: int, due: datetime, *, manual: bool
    ) -> None:
        nonce = self.world.nonces()
        at = max(due, self.now)
        pending = PendingStart(nonce, scheduled_for, attempt, due, at, manual)
        self.update(pending=(*self.state.pending, pending))
        self.emit(StartInvocation(nonce, scheduled_for, attempt, at))

    def requeue(self, lost: PendingStart) -> None:
        nonce = self.world.nonces()
        fresh = replace(lost, nonce=nonce, at=max(lost.at, self.now))
        self.update(pending=tuple(fresh if p is lost else p for p in self.state.pending))
        self.emit(StartInvocation(nonce, fresh.scheduled_for, fresh.attempt, fresh.at))

    def drop_pending(self, reason: str) -> None:
        """Starts not yet taken and queued runs are dropped; running invocations go on."""
        for pending in self.state.pending:
            self.emit(RecordSkip(pending.scheduled_for, reason))
        if self.state.backlog:
            self.emit(
                RecordSkip(self.state.backlog[0].scheduled_for, reason, len(self.state.backlog))
            )
        self.update(pending=(), backlog=())

    def abort_all(self, reason: str) -> None:
        for invocation in self.state.active:
            self.emit(AbortInvocation(invocation.id))
            self.record(invocation, InvocationStatus.ABORTED, finished_at=self.now, error=reason)
        for pending in self.state.pending:
            self.emit(RecordSkip(pending.scheduled_for, reason))
        self.update(active=(), pending=(), overruns=0)

    def finish_if_done(self) -> None:
        state = self.state
        if state.phase is not Phase.ENABLED or state.tick is not None or state.busy:
            return
        if state.backlog or self.rules.manual:
            return
        if self.exhausted():
            reason = "one-shot job ran" if self.rules.schedule is None else "repeats used up"
        elif self.rules.until is not None:
            reason = f"no fire time before until={self.rules.until.isoformat()}"
        else:
            reason = "the schedule has no further fire time"
        self.update(phase=Phase.FINISHED, finished_reason=reason)
        self.emit(Finish(reason))

    def find_active(self, invocation_id: str) -> Invocation | None:
        return next((a for a in self.state.active if a.id == invocation_id), None)

    def record(
        self,
        invocation: Invocation,
        status: InvocationStatus,
        *,
        finished_at: datetime | None = None,
        error: str | None = None,
    ) -> None:
        self.emit(
            RecordInvocation(
                invocation.id,
                invocation.scheduled_for,
                invocation.attempt,
                status,
                invocation.started_at,
                finished_at,
                error,
                invocation.manual,
            )
        )

    def record_skip(self, fires: list[datetime], more: bool, reason: str) -> None:
        if fires:
            note = f"{reason} (at least {len(fires)})" if more else reason
            self.emit(RecordSkip(fires[0], note, len(fires)))
