"""The RQ tasks that advance a job: TickLater (`tick`) and StartInvocation (`start`).

Both are tiny and idempotent: they carry the job's nonce, and the state machine drops a task
whose nonce the job no longer holds, so a task delivered twice or re-enqueued by the watchdog
does nothing the second time. `cronq worker` runs them in batches (cronq/executor.py); these
functions are what any ordinary RQ worker runs for them.
"""

from __future__ import annotations

import logging

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
from cronq.targets import Accepted, InvocationContext, target_for

__all__ = ["call_target", "start", "tick"]

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
    outcome = call_target(engine, job_id, result.job.spec, invocation)
    try:
        engine.step(job_id, outcome)
    except UnknownJob:
        log.info(
            "job %s was deleted while invocation %s ran",
            job_id,
            invocation_id,
            extra={"job": job_id, "invocation": invocation_id},
        )


def call_target(engine: Engine, job_id: str, spec: JobSpec, invocation: Invocation) -> Event:
    """Run the job's target for a committed invocation; the event that reports what happened."""
    context = InvocationContext(
        job_id=job_id,
        invocation_id=invocation.id,
        scheduled_for=invocation.scheduled_for,
        attempt=invocation.attempt,
        payload=spec.payload,
        metadata=spec.metadata,
        deadline=invocation.deadline,
        namespace=engine.namespace,
    )
    try:
        outcome = target_for(spec.target).invoke(context, engine.connection)
    except Exception as exc:  # a target must not raise; if one does, the run failed
        log.exception(
            "job %s: target raised", job_id, extra={"job": job_id, "invocation": invocation.id}
        )
        return InvocationDone(invocation.id, InvocationStatus.FAILED, repr(exc)[:2000])
    if isinstance(outcome, Accepted):
        return InvocationStarted(invocation.id)
    return InvocationDone(invocation.id, outcome.outcome, outcome.error)


_engines: dict[tuple[int, str], Engine] = {}


def _engine(namespace: str, connection: Redis | None) -> Engine:
    if connection is None:
        job = get_current_job()
        if job is None:
            raise RuntimeError("cronq tasks run inside an RQ worker, or are given a connection")
        connection = job.connection
    key = (id(connection), namespace)
    engine = _engines.get(key)
    if engine is None or engine.connection is not connection:
        engine = _engines[key] = Engine(connection, namespace)
    return engine
