"""The engine: WATCH a job, step the pure state machine, and commit the new state together with
the tasks its actions ask for in one MULTI/EXEC (DESIGN §2). A conflicting writer makes EXEC fail
and the step is recomputed, so state and tasks can never disagree.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from redis import Redis
from redis.exceptions import WatchError
from rq import Queue

from cronq import metrics
from cronq.state_codec import encode_state
from cronq.statemachine import (
    AbortInvocation,
    Action,
    Event,
    Invocation,
    InvocationDone,
    InvocationStarted,
    InvocationStarting,
    InvocationStatus,
    JobRules,
    JobState,
    RecordInvocation,
    RecordOverrun,
    RecordSkip,
    Rejected,
    StartInvocation,
    TickLater,
    WatchdogReport,
    World,
    step,
)
from cronq.store import HISTORY_LIMIT, HISTORY_TTL, JOB_FIELDS, Keys, StoredJob, parse_job
from cronq.target_specs import RqTarget
from cronq.targets.base import InvocationContext
from cronq.targets.rq import enqueue_all, refusal
from cronq.task_queue import TaskQueue
from cronq.writes import Writes

__all__ = [
    "Batch",
    "Engine",
    "JobRefused",
    "StepResult",
    "UnknownJob",
    "is_report",
    "new_invocation_id",
    "report_outcome",
    "task_id",
    "utcnow",
]

log = logging.getLogger("cronq.engine")

REPAIR_LOG_SECONDS = 86_400  # watchdog repairs are listed by time for a day (`cronq status`)


class UnknownJob(LookupError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job {job_id!r}")
        self.job_id = job_id


class JobRefused(Exception):
    """The state machine refused an operator's request; the message is for a person."""


@dataclass(frozen=True)
class StepResult:
    job: StoredJob  # as it was read, before the batch
    state: JobState  # right after this event
    actions: tuple[Action, ...]


@dataclass(frozen=True)
class Batch:
    """Per event, its StepResult or the error it met; per job, its state after the batch; the
    invocations the batch committed as STARTING in place of start tasks (`start_due`), whose
    targets the caller is to call; and those whose RQ job it enqueued itself (`rq` targets)."""

    results: list[StepResult | Exception]
    states: dict[str, JobState]
    started: list[tuple[StoredJob, str]] = field(default_factory=list)
    enqueued: list[tuple[StoredJob, RqTarget, Invocation]] = field(default_factory=list)


# Read every job of a batch in one round trip, inside the WATCH that guards the batch.
_READ_JOBS = """
local rows = {}
for i, key in ipairs(KEYS) do rows[i] = redis.call('HMGET', key, unpack(ARGV)) end
return rows
"""
_BATCH_ATTEMPTS = 3
_SAFE_SUFFIX = re.compile(r"[A-Za-z0-9_-]{1,64}")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def random_nonce() -> int:
    return secrets.randbits(62)


def new_invocation_id(now: datetime) -> str:
    """Sortable by time, unique, and safe inside an RQ job id. The id names the invocation's RQ
    job across all jobs, and 10,000 jobs may start in the same second: 64 random bits (32 made
    a clash, one job's RQ job overwriting another's, about 1 % likely in such a second)."""
    return f"{now:%Y%m%dT%H%M%S}-{secrets.token_hex(8)}"


def task_id(kind: str, job_id: str, nonce: int | str) -> str:
    """Deterministic RQ job id of a task, so that enqueueing it again is idempotent. RQ ids allow
    only [A-Za-z0-9_-]: the job id is hashed, and so is a report's invocation id if it must be."""
    digest = hashlib.blake2b(job_id.encode(), digest_size=8).hexdigest()
    suffix = str(nonce)
    if not _SAFE_SUFFIX.fullmatch(suffix):
        suffix = "h" + hashlib.blake2b(suffix.encode(), digest_size=16).hexdigest()
    return f"cronq-{kind}-{digest}-{suffix}"


def is_report(rq_id: str) -> bool:
    """Whether a task id (`task_id`) is that of a report."""
    return rq_id.startswith("cronq-r-")


class Engine:
    """Steps jobs stored under one namespace. Cheap to create; safe to share within a process."""

    def __init__(
        self,
        connection: Redis,
        namespace: str = "cronq",
        *,
        clock: Callable[[], datetime] = utcnow,
        nonces: Callable[[], int] = random_nonce,
    ) -> None:
        self.connection = connection
        self.namespace = namespace
        self.keys = Keys(namespace)
        self.queue = Queue(namespace, connection=connection)
        self.tasks = TaskQueue(self.queue)
        self._queues: dict[str, Queue] = {}  # users' queues, for `rq` targets
        self.clock = clock
        self.nonces = nonces

    @classmethod
    def shared(cls, connection: Redis, namespace: str) -> Engine:
        """One engine per connection and namespace in a process, for code that is handed only
        those (RQ tasks and callbacks), so that each call does not build its queues anew."""
        key = (id(connection), namespace)
        engine = _shared.get(key)
        if engine is None or engine.connection is not connection:
            engine = _shared[key] = cls(connection, namespace)
        return engine

    def step(self, job_id: str, event: Event) -> StepResult:
        """Apply one event to one job. Raises UnknownJob, and JobRefused when the machine refuses
        (nothing is written then)."""
        (outcome,) = self.step_many([(job_id, event)]).results
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def step_many(self, items: Sequence[tuple[str, Event]], *, start_due: bool = False) -> Batch:
        """Apply events to jobs, in order, in one transaction: WATCH the jobs, read them all in
        one call, step, and commit every write in one MULTI/EXEC. A concurrent writer makes
        EXEC fail: the batch is recomputed, and split in halves if it keeps losing.

        With `start_due`, a start that is due at once is not enqueued as a task: the batch steps
        it to STARTING itself and lists it in `Batch.started`, for the caller (a worker) to call
        its target once the batch is committed, as the start task would have a moment later."""
        for _ in range(_BATCH_ATTEMPTS):
            batch = self._try_batch(items, start_due)
            if batch is not None:
                return batch
        if len(items) == 1:
            return self.step_many(items, start_due=start_due)  # someone else is progressing
        middle = len(items) // 2
        first = self.step_many(items[:middle], start_due=start_due)
        second = self.step_many(items[middle:], start_due=start_due)
        return Batch(
            first.results + second.results,
            {**first.states, **second.states},
            first.started + second.started,
            first.enqueued + second.enqueued,
        )

    def _try_batch(self, items: Sequence[tuple[str, Event]], start_due: bool) -> Batch | None:
        job_ids = list(dict.fromkeys(job_id for job_id, _ in items))
        keys = [self.keys.job(job_id) for job_id in job_ids]
        with self.connection.pipeline() as pipe:
            try:
                pipe.watch(*keys)
                rows = pipe.eval(_READ_JOBS, len(keys), *keys, *JOB_FIELDS)
                jobs = {
                    job_id: parse_job(job_id, row)
                    for job_id, row in zip(job_ids, rows, strict=True)
                }
                now = self.clock()
                batch, changed = self._fold(items, jobs, now, start_due)
                if changed:
                    writes = Writes()
                    self.tasks.register(writes)
                    for job, state, actions in changed:
                        self.write(writes, job, state, actions, now)
                    self.enqueue_targets(writes, batch.enqueued)
                    writes.commit_in(pipe)
                    pipe.execute()
            except WatchError:
                return None
        for job, _, actions in changed:
            self.after_commit(job, actions)
        return batch

    def _fold(
        self,
        items: Sequence[tuple[str, Event]],
        jobs: dict[str, StoredJob | None],
        now: datetime,
        start_due: bool,
    ) -> tuple[Batch, list[tuple[StoredJob, JobState, tuple[Action, ...]]]]:
        """Step every event on the state the events before it left; nothing is written here."""
        results: list[StepResult | Exception] = []
        states: dict[str, JobState] = {}
        actions_by_job: dict[str, list[Action]] = {}
        batch = Batch(results, states)
        for job_id, event in items:
            job = jobs[job_id]
            if job is None:
                results.append(UnknownJob(job_id))
                continue
            world = self.world(now, job.rules)
            state, actions = step(states.get(job_id, job.state), event, world)
            refusal = next((a for a in actions if isinstance(a, Rejected)), None)
            if refusal is not None:
                results.append(JobRefused(refusal.reason))
                continue
            results.append(StepResult(job, state, actions))
            if start_due:
                state, actions = self._start_due(job, state, actions, world, batch)
            states[job_id] = state
            actions_by_job.setdefault(job_id, []).extend(actions)
        writes = [
            (job, states[job_id], tuple(actions_by_job[job_id]))
            for job_id, job in jobs.items()
            if job is not None
            and job_id in states
            and (states[job_id] != job.state or actions_by_job[job_id])
        ]
        return batch, writes

    def _start_due(
        self,
        job: StoredJob,
        state: JobState,
        actions: tuple[Action, ...],
        world: World,
        batch: Batch,
    ) -> tuple[JobState, tuple[Action, ...]]:
        """Take the starts that are due now in place of their tasks."""
        kept: list[Action] = []
        for action in actions:
            if not isinstance(action, StartInvocation) or action.at > world.now:
                kept.append(action)
                continue
            invocation_id = new_invocation_id(world.now)
            state, more = step(state, InvocationStarting(action.nonce, invocation_id), world)
            kept.extend(more)
            if isinstance(target := job.spec.target, RqTarget):
                state, more = self._enqueue_due(job, target, state, invocation_id, world, batch)
                kept.extend(more)
            else:
                batch.started.append((job, invocation_id))
        return state, tuple(kept)

    def _enqueue_due(
        self,
        job: StoredJob,
        target: RqTarget,
        state: JobState,
        invocation_id: str,
        world: World,
        batch: Batch,
    ) -> tuple[JobState, tuple[Action, ...]]:
        """An `rq` target's whole invocation is a write to Redis: it joins this transaction, so
        the invocation is RUNNING (or refused) as it commits, without a call after it, a check
        that its RQ job is not there already (a fresh invocation's cannot be), or a second step
        to record that the enqueue happened. The same outcomes as `RqInvoker.invoke`."""
        invocation = next((a for a in state.active if a.id == invocation_id), None)
        if invocation is None:
            return state, ()
        refused = refusal(target, (invocation.deadline - world.now).total_seconds())
        if refused is not None:
            return step(state, InvocationDone(invocation_id, refused.outcome, refused.error), world)
        batch.enqueued.append((job, target, invocation))
        return step(state, InvocationStarted(invocation_id), world)

    def enqueue_targets(
        self, writes: Writes, enqueued: list[tuple[StoredJob, RqTarget, Invocation]]
    ) -> None:
        """The RQ jobs of the invocations `_enqueue_due` took, with the batch's writes."""
        calls = [
            (self._queue(t.queue), t, InvocationContext.of(self.namespace, j.job_id, j.spec, i))
            for j, t, i in enqueued
        ]
        enqueue_all(writes, calls)

    def _queue(self, name: str) -> Queue:
        """A users' queue (for `rq` targets), made once."""
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = Queue(name, connection=self.connection)
        return queue

    def world(self, now: datetime, rules: JobRules) -> World:
        return World(now, rules, self.nonces)

    def write(
        self,
        writes: Writes,
        job: StoredJob,
        state: JobState,
        actions: tuple[Action, ...],
        now: datetime,
    ) -> None:
        """Every write of one step: state, watchdog index, tasks, history."""
        job_id = job.job_id
        writes.hset(
            self.keys.job(job_id),
            mapping={"state": encode_state(state), "version": job.version + 1},
        )
        if state.watchdog_at is None:
            writes.zrem(self.keys.watchdog, job_id)
        else:
            writes.zadd(self.keys.watchdog, {job_id: state.watchdog_at.timestamp()})
        for action in actions:
            match action:
                case TickLater(at=at, nonce=nonce):
                    self.enqueue(writes, "tick", job_id, nonce, at, now)
                case StartInvocation(at=at, nonce=nonce):
                    self.enqueue(writes, "start", job_id, nonce, at, now)
                case RecordInvocation() if action.status.final:
                    self.record(writes, job_id, _invocation_entry(job_id, action))
                case RecordOverrun(scheduled_for=scheduled_for):
                    entry = _tick_entry(job_id, scheduled_for, InvocationStatus.OVERRUN)
                    self.record(writes, job_id, entry)
                case RecordSkip(scheduled_for=scheduled_for, reason=reason, count=count):
                    entry = _tick_entry(job_id, scheduled_for, InvocationStatus.SKIPPED)
                    self.record(writes, job_id, {**entry, "error": reason, "count": count})
                case WatchdogReport(repair=repair):
                    writes.hincrby(self.keys.stats, f"watchdog:{repair.value}", 1)
                    stamp = now.timestamp()
                    writes.zadd(self.keys.repairs, {f"{stamp}:{job_id}:{repair.value}": stamp})
                    writes.zremrangebyscore(self.keys.repairs, "-inf", stamp - REPAIR_LOG_SECONDS)

    def enqueue(
        self, writes: Writes, kind: str, job_id: str, nonce: int, at: datetime, now: datetime
    ) -> None:
        """A TickLater or StartInvocation task, with the transaction's writes."""
        rq_id = task_id(kind[0], job_id, nonce)
        self.tasks.add(writes, kind, (self.namespace, job_id, nonce), rq_id, at, now)

    def record(self, writes: Writes, job_id: str, entry: dict[str, Any]) -> None:
        key = self.keys.history(job_id)
        writes.lpush(key, json.dumps(entry, separators=(",", ":")))
        writes.ltrim(key, 0, HISTORY_LIMIT - 1)
        writes.expire(key, HISTORY_TTL)

    def after_commit(self, job: StoredJob, actions: tuple[Action, ...]) -> None:
        """External calls, metrics and logs come after the state that asked for them is
        committed (a batch recomputed after a lost race is counted once)."""
        counts = metrics.active()
        if counts is not None:
            counts.committed(self.namespace, job.job_id, actions)
        if log.isEnabledFor(logging.INFO):
            _log_history(job.job_id, actions)
        for action in actions:
            if isinstance(action, AbortInvocation):
                from cronq.targets import target_for

                try:
                    target_for(job.spec.target).abort(action.invocation_id, self.connection)
                except Exception:  # best effort: the invocation is already recorded ABORTED
                    log.exception(
                        "job %s: could not stop invocation %s",
                        job.job_id,
                        action.invocation_id,
                        extra={"job": job.job_id, "invocation": action.invocation_id},
                    )
            elif isinstance(action, WatchdogReport):
                log.warning(
                    "job %s: watchdog %s: %s",
                    job.job_id,
                    action.repair.value,
                    action.detail,
                    extra={"job": job.job_id, "repair": action.repair.value},
                )


_shared: dict[tuple[int, str], Engine] = {}


def report_outcome(
    connection: Redis,
    namespace: str,
    job_id: str,
    invocation_id: str,
    outcome: InvocationStatus,
    error: str | None,
) -> None:
    """How an asynchronous target (an RQ callback) tells cronq that an invocation ended: a
    `report` task on cronq's queue, written in one round trip. The callback runs in the user's
    RQ worker, where every millisecond delays the user's next job; the step itself is batched
    with the other tasks by `cronq worker` (or run by any RQ worker, `cronq.tasks.report`). The
    report carries the time it was made, which the history keeps as the run's end."""
    now = utcnow()
    args = (namespace, job_id, invocation_id, outcome.value, error, now.timestamp())
    rq_id = task_id("r", job_id, invocation_id)
    tasks = Engine.shared(connection, namespace).tasks
    writes = Writes()
    tasks.register(writes)
    tasks.add(writes, "report", args, rq_id, now, now)
    writes.send(connection)


def _log_history(job_id: str, actions: tuple[Action, ...]) -> None:
    """A line per history entry committed (`cronq worker -v`): how a run ended, what was
    skipped, with the job and invocation as fields of their own for structured logs."""
    for action in actions:
        match action:
            case RecordInvocation(status=status) if status.final:
                error = f": {action.error}" if action.error else ""
                log.info(
                    "job %s: invocation %s %s (attempt %d)%s",
                    job_id,
                    action.invocation_id,
                    status.value,
                    action.attempt,
                    error,
                    extra={
                        "job": job_id,
                        "invocation": action.invocation_id,
                        "status": status.value,
                        "attempt": action.attempt,
                        "scheduled_for": _iso(action.scheduled_for),
                    },
                )
            case RecordOverrun() | RecordSkip():
                skipped = isinstance(action, RecordSkip)
                status = InvocationStatus.SKIPPED if skipped else InvocationStatus.OVERRUN
                when = _iso(action.scheduled_for)
                log.info(
                    "job %s: %s for %s%s",
                    job_id,
                    status.value,
                    when,
                    f": {action.reason}" if isinstance(action, RecordSkip) else "",
                    extra={"job": job_id, "status": status.value, "scheduled_for": when},
                )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _invocation_entry(job_id: str, record: RecordInvocation) -> dict[str, Any]:
    """A history entry in the shape of DESIGN §7."""
    return {
        "id": record.invocation_id,
        "job": job_id,
        "scheduled_for": _iso(record.scheduled_for),
        "started_at": _iso(record.started_at),
        "finished_at": _iso(record.finished_at),
        "status": record.status.value,
        "attempt": record.attempt,
        "error": record.error,
        "manual": record.manual,
    }


def _tick_entry(job_id: str, scheduled_for: datetime, status: InvocationStatus) -> dict[str, Any]:
    return {
        "id": f"{status.value.lower()}-{int(scheduled_for.timestamp())}",
        "job": job_id,
        "scheduled_for": _iso(scheduled_for),
        "started_at": None,
        "finished_at": None,
        "status": status.value,
        "attempt": 0,
        "error": None,
    }
