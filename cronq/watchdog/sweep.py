"""One watchdog sweep: put back the tasks of workers that are gone, then repair every job whose
WatchdogTimerTs lapsed more than a grace ago.

The lapsed jobs come from the sorted-set index in batches, so a sweep costs O(lapsed jobs), never
a scan of all jobs. For each, the sweep looks up which of the job's tasks still exist in RQ (and
could still run), and feeds the job a `watchdog fired` event: the state machine decides the
repair. A task that exists but is late is reported as slow and left alone, never duplicated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from rq.job import Job
from rq.registry import ScheduledJobRegistry
from rq.utils import utcparse

from cronq.engine import Engine, UnknownJob, task_id
from cronq.executor import return_orphaned_tasks
from cronq.statemachine import WatchdogFired, WatchdogReport
from cronq.store import JOB_FIELDS, StoredJob, parse_job

__all__ = ["DEFAULT_GRACE", "Repair", "SweepReport", "sweep"]

DEFAULT_GRACE = timedelta(seconds=30)
_BATCH = 500
_QUEUED_SCAN = 100_000  # how far into cronq's queue to look for a queued task


@dataclass(frozen=True)
class Repair:
    job_id: str
    repair: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"job": self.job_id, "repair": self.repair, "detail": self.detail}


@dataclass
class SweepReport:
    lapsed: int = 0
    repairs: list[Repair] = field(default_factory=list)
    returned_tasks: int = 0  # taken by workers that are gone, put back on the queue
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "lapsed": self.lapsed,
            "returned_tasks": self.returned_tasks,
            "repairs": [r.as_dict() for r in self.repairs],
            "seconds": round(self.seconds, 4),
        }


def sweep(engine: Engine, grace: timedelta = DEFAULT_GRACE, *, batch: int = _BATCH) -> SweepReport:
    began = time.perf_counter()
    report = SweepReport()
    cutoff = engine.clock() - grace
    report.returned_tasks = return_orphaned_tasks(engine, engine.clock().timestamp())
    skip = 0  # lapsed jobs already looked at that are still lapsed (nothing could be done)
    while True:
        members = engine.connection.zrangebyscore(
            engine.keys.watchdog, "-inf", cutoff.timestamp(), start=skip, num=batch
        )
        job_ids = [m.decode() if isinstance(m, bytes) else str(m) for m in members]
        if not job_ids:
            break
        report.lapsed += len(job_ids)
        report.repairs += _repair(engine, grace, _alive_tasks(engine, job_ids, cutoff))
        scores = engine.connection.zmscore(engine.keys.watchdog, job_ids)
        skip += sum(1 for score in scores if score is not None and score <= cutoff.timestamp())
    report.seconds = time.perf_counter() - began
    return report


def _repair(engine: Engine, grace: timedelta, alive: dict[str, frozenset[int]]) -> list[Repair]:
    """One batch of lapsed jobs, repaired in one transaction."""
    events = [(job_id, WatchdogFired(grace, nonces)) for job_id, nonces in alive.items()]
    repairs: list[Repair] = []
    for (job_id, _), result in zip(events, engine.step_many(events).results, strict=True):
        if isinstance(result, UnknownJob):  # deleted since it was indexed
            engine.connection.zrem(engine.keys.watchdog, job_id)
        elif not isinstance(result, Exception):
            repairs += [
                Repair(job_id, action.repair.value, action.detail)
                for action in result.actions
                if isinstance(action, WatchdogReport)
            ]
    return repairs


def _alive_tasks(engine: Engine, job_ids: list[str], cutoff: datetime) -> dict[str, frozenset[int]]:
    """For each job, the nonces of its tasks that RQ still holds and could still run: queued in
    cronq's queue, in its scheduled registry, or started recently (a started task older than the
    cutoff lost its worker: cronq's tasks take milliseconds)."""
    reads = engine.connection.pipeline(transaction=False)
    for job_id in job_ids:
        reads.hmget(engine.keys.job(job_id), JOB_FIELDS)
    jobs = [parse_job(job_id, v) for job_id, v in zip(job_ids, reads.execute(), strict=True)]
    tasks = [(job, kind, nonce) for job in jobs if job is not None for kind, nonce in _tasks(job)]
    queue, registry = engine.queue, ScheduledJobRegistry(queue=engine.queue)
    for job, kind, nonce in tasks:
        rq_id = task_id(kind, job.job_id, nonce)
        reads.hmget(Job.key_for(rq_id), ["status", "started_at", "cronq_taken"])
        reads.zscore(registry.key, rq_id)
        reads.lpos(queue.key, rq_id, maxlen=_QUEUED_SCAN)
    answers = reads.execute()
    alive: dict[str, set[int]] = {job_id: set() for job_id in job_ids}
    for index, (job, _, nonce) in enumerate(tasks):
        (status, started_at, taken), scheduled, position = answers[3 * index : 3 * index + 3]
        if taken is not None and float(taken) > cutoff.timestamp():
            alive[job.job_id].add(nonce)  # in a worker's hands: being run, not lost
        elif _could_run(status, started_at, scheduled, position, cutoff):
            alive[job.job_id].add(nonce)
    return {job_id: frozenset(nonces) for job_id, nonces in alive.items()}


def _tasks(job: StoredJob) -> list[tuple[str, int]]:
    state = job.state
    tick = [("t", state.tick.nonce)] if state.tick else []
    return tick + [("s", pending.nonce) for pending in state.pending]


def _could_run(
    status: bytes | None,
    started_at: bytes | None,
    scheduled: float | None,
    position: int | None,
    cutoff: datetime,
) -> bool:
    if status is None:
        return False  # RQ lost it (purged, expired)
    if status == b"started":
        return started_at is not None and utcparse(started_at.decode()) > cutoff
    return scheduled is not None or position is not None
