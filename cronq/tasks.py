"""The RQ tasks that advance a job: TickLater (`tick`) and StartInvocation (`start`).

Both are tiny and idempotent: they carry the job's nonce, and the state machine drops a task
whose nonce the job no longer holds, so a task delivered twice or re-enqueued by the watchdog
does nothing the second time.
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime

from redis import Redis
from rq import get_current_job

from cronq.engine import Engine, UnknownJob
from cronq.statemachine import (
    InvocationDone,
    InvocationStarted,
    InvocationStarting,
    InvocationStatus,
    TimerTick,
)
from cronq.targets import Accepted, InvocationContext, target_for

__all__ = ["new_invocation_id", "start", "tick"]

log = logging.getLogger("cronq.tasks")


def tick(namespace: str, job_id: str, nonce: int, connection: Redis | None = None) -> None:
    try:
        _engine(namespace, connection).step(job_id, TimerTick(nonce))
    except UnknownJob:
        log.info("tick for job %s, which is gone", job_id)


def start(namespace: str, job_id: str, nonce: int, connection: Redis | None = None) -> None:
    """Commit the invocation as STARTING, then call the target, then commit its outcome: if Redis
    is failing, that shows before anything external is touched."""
    engine = _engine(namespace, connection)
    invocation_id = new_invocation_id(engine.clock())
    try:
        result = engine.step(job_id, InvocationStarting(nonce, invocation_id))
    except UnknownJob:
        log.info("start for job %s, which is gone", job_id)
        return
    invocation = next((a for a in result.state.active if a.id == invocation_id), None)
    if invocation is None:
        return  # a stale or duplicate task
    spec = result.job.spec
    context = InvocationContext(
        job_id=job_id,
        invocation_id=invocation_id,
        scheduled_for=invocation.scheduled_for,
        attempt=invocation.attempt,
        payload=spec.payload,
        metadata=spec.metadata,
        deadline=invocation.deadline,
        namespace=namespace,
    )
    try:
        outcome = target_for(spec.target).invoke(context, engine.connection)
    except Exception as exc:  # a target must not raise; if one does, the run failed
        log.exception("job %s: target raised", job_id)
        outcome_event = InvocationDone(invocation_id, InvocationStatus.FAILED, repr(exc)[:2000])
    else:
        if isinstance(outcome, Accepted):
            engine.step(job_id, InvocationStarted(invocation_id))
            return
        outcome_event = InvocationDone(invocation_id, outcome.outcome, outcome.error)
    try:
        engine.step(job_id, outcome_event)
    except UnknownJob:
        log.info("job %s was deleted while invocation %s ran", job_id, invocation_id)


def new_invocation_id(now: datetime) -> str:
    """Sortable by time, unique, and safe inside an RQ job id."""
    return f"{now:%Y%m%dT%H%M%S}-{secrets.token_hex(4)}"


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
