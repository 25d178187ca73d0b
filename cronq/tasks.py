"""The RQ tasks that advance a job: TickLater (`tick`), StartInvocation (`start`), and the
outcome an asynchronous target reports (`report`).

All are tiny and idempotent: a tick or start carries the job's nonce, a report its invocation's
id, and the state machine drops an event for a nonce or invocation the job no longer holds, so a
task delivered twice or re-enqueued by the watchdog does nothing the second time.
`cronq worker` runs them in batches (cronq/executor.py); these functions are what any ordinary
RQ worker runs for them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from redis import Redis
from rq import get_current_job

from cronq.config import JobSpec
from cronq.engine import Engine, UnknownJob, new_invocation_id
from cronq.statemachine import (
    Event,
    Invocation,
    InvocationDone,
    InvocationStarted,
    InvocationStarting,
    InvocationStatus,
    TimerTick,
)
from cronq.target_specs import RqTarget
from cronq.targets import Accepted, Finished, InvocationContext, target_for
from cronq.targets.rq import enqueue_many

__all__ = ["call_target", "call_targets", "event_of", "report", "start", "tick"]

log = logging.getLogger("cronq.tasks")


def tick(namespace: str, job_id: str, nonce: int, connection: Redis | None = None) -> None:
    try:
        _engine(namespace, connection).step(job_id, TimerTick(nonce))
    except UnknownJob:
        log.info("tick for job %s, which is gone", job_id, extra={"job": job_id})


def start(namespace: str, job_id: str, nonce: int, connection: Redis | None = None) -> None:
    """Commit the invocation as STARTING, then call the target, then commit its outcome: if Redis
    is failing, that shows before anything external is touched."""
    engine = _engine(namespace, connection)
    invocation_id = new_invocation_id(engine.clock())
    try:
        result = engine.step(job_id, InvocationStarting(nonce, invocation_id))
    except UnknownJob:
        log.info("start for job %s, which is gone", job_id, extra={"job": job_id})
        return
    invocation = next((a for a in result.state.active if a.id == invocation_id), None)
    if invocation is None:
        return  # a stale or duplicate task
    _step_outcome(engine, job_id, call_target(engine, job_id, result.job.spec, invocation))


def report(
    namespace: str,
    job_id: str,
    invocation_id: str,
    outcome: str,
    error: str | None,
    finished_at: float | None = None,
    connection: Redis | None = None,
) -> None:
    done = _done(invocation_id, outcome, error, finished_at)
    _step_outcome(_engine(namespace, connection), job_id, done)


def _done(invocation_id: str, outcome: str, error: object, finished_at: object) -> InvocationDone:
    """A report's event. Its end time (epoch seconds) is missing from reports of older cronq."""
    ended = None
    if isinstance(finished_at, (int, float)):
        ended = datetime.fromtimestamp(finished_at, tz=timezone.utc)
    status = InvocationStatus(outcome)  # ValueError if it is not one
    return InvocationDone(invocation_id, status, None if error is None else str(error), ended)


def _step_outcome(engine: Engine, job_id: str, outcome: Event) -> None:
    """Commit how an invocation went; the job may have been deleted meanwhile."""
    try:
        engine.step(job_id, outcome)
    except UnknownJob:
        log.info("job %s is gone; an outcome of it was dropped", job_id, extra={"job": job_id})


def event_of(engine: Engine, function: str, args: tuple[Any, ...]) -> tuple[str, Event] | None:
    """The (job, event) a task of `engine`'s namespace carries, as its function above would
    step it; None if the call is not one of them."""
    kind = function.removeprefix(f"{__name__}.")
    if not args or args[0] != engine.namespace:
        return None
    try:
        match kind, args[1:]:
            case "tick", (str(job_id), int(nonce)):
                return job_id, TimerTick(nonce)
            case "start", (str(job_id), int(nonce)):
                return job_id, InvocationStarting(nonce, new_invocation_id(engine.clock()))
            case "report", (str(job_id), str(invocation_id), str(outcome), error, *more) if (
                len(more) <= 1
            ):
                return job_id, _done(invocation_id, outcome, error, more[0] if more else None)
    except ValueError:  # not an outcome
        return None
    return None


def call_target(engine: Engine, job_id: str, spec: JobSpec, invocation: Invocation) -> Event:
    """Run the job's target for a committed invocation; the event that reports what happened."""
    context = InvocationContext.of(engine.namespace, job_id, spec, invocation)
    try:
        outcome = target_for(spec.target).invoke(context, engine.connection)
    except Exception as exc:  # a target must not raise; if one does, the run failed
        log.exception(
            "job %s: target raised", job_id, extra={"job": job_id, "invocation": invocation.id}
        )
        return InvocationDone(invocation.id, InvocationStatus.FAILED, repr(exc)[:2000])
    return _event(invocation, outcome)


def call_targets(engine: Engine, calls: Sequence[tuple[str, JobSpec, Invocation]]) -> list[Event]:
    """`call_target` for each call, in order; `rq` targets are enqueued together, in a few round
    trips in all instead of a few each."""
    events: list[Event | None] = [None] * len(calls)
    batch: list[tuple[int, RqTarget, InvocationContext]] = []
    for i, (job_id, spec, invocation) in enumerate(calls):
        if isinstance(spec.target, RqTarget):
            batch.append(
                (i, spec.target, InvocationContext.of(engine.namespace, job_id, spec, invocation))
            )
        else:
            events[i] = call_target(engine, job_id, spec, invocation)
    outcomes = enqueue_many([(target, context) for _, target, context in batch], engine.connection)
    for (i, _, _), outcome in zip(batch, outcomes, strict=True):
        events[i] = _event(calls[i][2], outcome)
    return [event for event in events if event is not None]


def _event(invocation: Invocation, outcome: Finished | Accepted) -> Event:
    if isinstance(outcome, Accepted):
        return InvocationStarted(invocation.id)
    return InvocationDone(invocation.id, outcome.outcome, outcome.error)


def _engine(namespace: str, connection: Redis | None) -> Engine:
    if connection is None:
        job = get_current_job()
        if job is None:
            raise RuntimeError("cronq tasks run inside an RQ worker, or are given a connection")
        connection = job.connection
    return Engine.shared(connection, namespace)
