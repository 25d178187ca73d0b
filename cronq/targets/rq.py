"""The `rq` target: enqueue the user's function on the user's queue; RQ callbacks report back.

The function is only named here, never imported: the cronq worker must not run user code, and
a config file must not be a way to run arbitrary code on the fleet (CRONQ_ALLOWED_MODULES).
The user's RQ workers import the callbacks below, so they need cronq installed.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import zlib
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import redis
from rq import Callback, Queue
from rq.command import send_stop_job_command
from rq.exceptions import AbandonedJobError, InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus
from rq.timeouts import JobTimeoutException

from cronq.rq_records import new_record, push, register
from cronq.statemachine import InvocationStatus
from cronq.target_specs import RqTarget
from cronq.targets.base import Accepted, Finished, InvocationContext, bounded, describe_error
from cronq.writes import Writes

__all__ = [
    "ALLOWED_MODULES_ENV",
    "RqInvoker",
    "allowed",
    "enqueue_all",
    "enqueue_in",
    "enqueue_many",
    "on_failure",
    "on_stopped",
    "on_success",
    "refusal",
    "rq_job_id",
]

ALLOWED_MODULES_ENV = "CRONQ_ALLOWED_MODULES"
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
_WAITING = (
    JobStatus.CREATED,
    JobStatus.QUEUED,
    JobStatus.SCHEDULED,
    JobStatus.DEFERRED,
    JobStatus.RATE_LIMITED,
)
log = logging.getLogger(__name__)


def allowed(func: str) -> bool:
    """Whether `func` lies under a prefix of CRONQ_ALLOWED_MODULES, matched on module
    boundaries (`billing` allows `billing.x.y`, not `billingx.y`). Unset or empty allows all."""
    prefixes = [p.strip().strip(".") for p in os.environ.get(ALLOWED_MODULES_ENV, "").split(",")]
    prefixes = [p for p in prefixes if p]
    return not prefixes or any(func == p or func.startswith(p + ".") for p in prefixes)


def rq_job_id(invocation_id: str) -> str:
    """The RQ job id of an invocation: deterministic, so a start delivered twice finds its
    job instead of enqueueing a second one. Ids RQ would refuse are hashed (`invh`), which
    keeps the mapping one-to-one."""
    if _SAFE_ID.fullmatch(invocation_id):
        return f"cronq-inv-{invocation_id}"
    return f"cronq-invh-{hashlib.sha256(invocation_id.encode()).hexdigest()[:40]}"


class RqInvoker:
    """Enqueues and returns at once; the invocation runs until the RQ job ends."""

    def __init__(self, spec: RqTarget) -> None:
        self.spec = spec

    def invoke(self, context: InvocationContext, connection: redis.Redis) -> Finished | Accepted:
        (outcome,) = enqueue_many([(self.spec, context)], connection)
        return outcome

    def abort(self, invocation_id: str, connection: redis.Redis) -> None:
        """Stop the RQ job if it runs (its worker then calls `on_stopped`), cancel it if it
        still waits (no callback fires), and do nothing if it is gone or over."""
        job_id = rq_job_id(invocation_id)
        try:
            job = Job.fetch(job_id, connection=connection)
            status = job.get_status()
            if status == JobStatus.STARTED:
                send_stop_job_command(connection, job_id)
            elif status in _WAITING:
                job.cancel()
        except (NoSuchJobError, InvalidJobOperation):
            return  # it ended (or expired) meanwhile: nothing left to stop


def enqueue_many(
    calls: Sequence[tuple[RqTarget, InvocationContext]], connection: redis.Redis
) -> list[Finished | Accepted]:
    """Invoke many `rq` targets at once, in three round trips whatever their number (a second
    of 100 jobs firing together must not cost 300). Per call, in order: Accepted, or Finished
    if it could not be enqueued."""
    outcomes: list[Finished | Accepted | None] = [
        refusal(spec, ctx.seconds_left()) for spec, ctx in calls
    ]
    todo = [i for i, outcome in enumerate(outcomes) if outcome is None]
    try:
        fresh = _enqueue_once(connection, [calls[i] for i in todo])
    except Exception as exc:  # the engine must get an outcome, whatever enqueueing raised
        failed = Finished(InvocationStatus.FAILED, bounded(f"enqueue: {describe_error(exc)}"))
        fresh = None
    for n, i in enumerate(todo):
        spec, context = calls[i]
        if fresh is None:
            outcomes[i] = failed
            continue
        verb = "enqueued" if fresh[n] else "already enqueued"
        job_id = rq_job_id(context.invocation_id)
        outcomes[i] = Accepted(f"rq job {job_id} {verb} on queue {spec.queue}")
    return [outcome for outcome in outcomes if outcome is not None]


def refusal(spec: RqTarget, seconds_left: float) -> Finished | None:
    """Why an invocation must not be enqueued at all, if it must not."""
    if not allowed(spec.func):
        return Finished(
            InvocationStatus.FAILED, f"func {spec.func} is not under {ALLOWED_MODULES_ENV}"
        )
    if seconds_left <= 0:
        return Finished(InvocationStatus.TIMED_OUT, "deadline passed before the enqueue")
    return None


# Which of KEYS exist (1/0 each): one round trip for the whole batch, inside its WATCH.
_EXISTING = """
local found = {}
for i, key in ipairs(KEYS) do found[i] = redis.call('EXISTS', key) end
return found
"""


def _enqueue_once(
    connection: redis.Redis, calls: Sequence[tuple[RqTarget, InvocationContext]]
) -> list[bool]:
    """Enqueue each call whose RQ job does not exist yet; per call, False if it did. WATCH
    makes the check and the enqueue atomic (RQ's `unique=True` works per job, not per batch). A
    batch that loses the race to a concurrent start is done again call by call."""
    if not calls:
        return []
    keys = [Job.key_for(rq_job_id(context.invocation_id)) for _, context in calls]
    queues = {spec.queue: Queue(spec.queue, connection=connection) for spec, _ in calls}
    with connection.pipeline() as pipe:
        pipe.watch(*keys)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        existing = [bool(found) for found in pipe.eval(_EXISTING, len(keys), *keys)]
        fresh = zip(calls, existing, strict=True)
        writes = Writes()
        enqueue_all(writes, [(queues[s.queue], s, c) for (s, c), exists in fresh if not exists])
        writes.commit_in(pipe)
        try:
            pipe.execute()
        except redis.WatchError:
            if len(calls) == 1:
                return [False]  # a concurrent start enqueued it first
            return [fresh for call in calls for fresh in _enqueue_once(connection, [call])]
    return [not exists for exists in existing]


def enqueue_all(writes: Writes, calls: Sequence[tuple[Queue, RqTarget, InvocationContext]]) -> None:
    """The RQ jobs of these invocations, with a transaction's writes, each queue listed once."""
    for queue in {queue.name: queue for queue, _, _ in calls}.values():
        register(writes, queue)
    for queue, spec, context in calls:
        enqueue_in(writes, queue, spec, context)


def enqueue_in(writes: Writes, queue: Queue, spec: RqTarget, context: InvocationContext) -> None:
    """The RQ job of an invocation, with a transaction's writes (the caller commits them, and
    lists the queue with `rq_records.register`). What `queue.enqueue_call` with these options
    would write (tests/test_rq_records.py), from a record RQ builds once per queue."""
    seconds = max(1, math.ceil(context.seconds_left()))  # > 0 was checked a moment ago
    rq_id = rq_job_id(context.invocation_id)
    record = new_record(("rq", queue.name), lambda: _job_of_queue(queue), _PER_JOB_FIELDS)
    call = (spec.func, None, list(spec.args), dict(spec.kwargs))
    record["data"] = zlib.compress(queue.serializer.dumps(call))
    record["description"] = f"{spec.func} (cronq {context.job_id}, {context.invocation_id})"
    record["meta"] = queue.serializer.dumps({"cronq": _meta(context)})
    # Not started by the deadline: RQ drops it rather than run it late.
    record["timeout"] = record["ttl"] = seconds
    push(writes, queue, rq_id, record)
    writes.expire(Job.key_for(rq_id), seconds)


# What each invocation's RQ job sets itself; the rest is the same for every job of a queue.
_PER_JOB_FIELDS = ("data", "description", "meta", "timeout", "ttl", "created_at", "enqueued_at")


def _job_of_queue(queue: Queue) -> Job:
    """An RQ job as `enqueue_in` makes them on this queue, for its fields in common."""
    return queue.create_job(
        "cronq.template",
        job_id="template",
        on_success=Callback(on_success),
        on_failure=Callback(on_failure),
        on_stopped=Callback(on_stopped),
    )


def _meta(context: InvocationContext) -> dict[str, Any]:
    return {
        "job_id": context.job_id,
        "invocation_id": context.invocation_id,
        "scheduled_for": context.scheduled_for.isoformat(),
        "attempt": context.attempt,
        "payload": context.payload,
        "metadata": dict(context.metadata),
        "namespace": context.namespace,
    }


def on_success(job: Job, connection: redis.Redis, result: Any) -> None:
    """RQ success callback (runs in the user's worker)."""
    _report_for(job, connection, InvocationStatus.SUCCEEDED, None)


def on_failure(
    job: Job,
    connection: redis.Redis,
    exc_type: type[BaseException] | None,
    exc_value: BaseException | None,
    traceback: TracebackType | None,
) -> None:
    """RQ failure callback: the function raised, timed out, or its worker died (RQ's registry
    cleanup passes AbandonedJobError)."""
    if exc_type is not None and issubclass(exc_type, JobTimeoutException):
        outcome = InvocationStatus.TIMED_OUT
    else:
        outcome = InvocationStatus.FAILED
    if isinstance(exc_value, AbandonedJobError) and not str(exc_value):
        error = "AbandonedJobError: the RQ worker running the job died"
    elif exc_value is not None:
        error = describe_error(exc_value)
    else:
        error = bounded(exc_type.__name__ if exc_type else "the RQ job failed")
    _report_for(job, connection, outcome, error)


def on_stopped(job: Job, connection: redis.Redis) -> None:
    """RQ stopped callback: someone (cronq's abort, or an operator) stopped the job."""
    _report_for(job, connection, InvocationStatus.ABORTED, "the RQ job was stopped")


def _report_for(
    job: Job, connection: redis.Redis, outcome: InvocationStatus, error: str | None
) -> None:
    info = job.meta.get("cronq")
    if not isinstance(info, dict):
        log.warning("RQ job %s has no cronq meta; outcome %s not reported", job.id, outcome.value)
        return
    from cronq.engine import report_outcome  # late: importing targets must not load the engine

    report_outcome(
        connection, info["namespace"], info["job_id"], info["invocation_id"], outcome, error
    )
