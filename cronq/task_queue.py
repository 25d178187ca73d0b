"""cronq's own tasks on its RQ queue: RQ jobs (RQ's tools show them, and any RQ worker can run
them through `cronq.tasks`), written from a record RQ builds once per kind (cronq/rq_records.py).
"""

from __future__ import annotations

import math
import zlib
from datetime import datetime
from typing import Any

from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import ScheduledJobRegistry
from rq.utils import now as rq_now
from rq.utils import utcformat

from cronq.rq_records import new_record, push, register
from cronq.writes import Writes

__all__ = ["TaskQueue", "wake_channel"]

# cronq's own tasks are tiny and idempotent: no results to keep, failures kept a day for people.
_TASK_OPTIONS: dict[str, Any] = {"result_ttl": 0, "failure_ttl": 86_400}
# Left out: what each task sets, and the fields RQ writes empty for a fresh job. An idle job
# holds one task for as long as it is idle; RQ reads a job without them, stored they cost ~450
# bytes a task.
_PER_TASK_FIELDS = (
    "data",
    "created_at",
    "enqueued_at",
    "status",
    "success_callback_name",
    "failure_callback_name",
    "stopped_callback_name",
    "started_at",
    "ended_at",
    "last_heartbeat",
    "worker_name",
    "group_id",
)


def wake_channel(queue: Queue) -> str:
    """Where the arrival of a tick or start on the queue is published: a worker waiting for more
    reports to batch (cronq/executor.py) stops waiting at once for a tick or start."""
    return f"{queue.key}:wake"


class TaskQueue:
    """Adds tasks to one RQ queue with the writes of a caller's transaction."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.scheduled_key: str = ScheduledJobRegistry(queue=queue).key  # type: ignore[no-untyped-call]
        self.wake_channel = wake_channel(queue)

    def register(self, writes: Writes) -> None:
        """Once per transaction that adds tasks."""
        register(writes, self.queue)

    def add(
        self,
        writes: Writes,
        kind: str,
        args: tuple[Any, ...],
        rq_id: str,
        at: datetime,
        now: datetime,
    ) -> None:
        """The task `cronq.tasks.<kind>(*args)` with RQ id `rq_id`, due at `at`: queued if it
        is due, else scheduled for the whole second at or after `at` (RQ's scheduled registry
        counts whole seconds: never released early)."""
        function = f"cronq.tasks.{kind}"
        record = new_record(
            ("task", self.queue.name, kind),
            lambda: self.queue.create_job(
                function, job_id="template", description=f"cronq {kind}", **_TASK_OPTIONS
            ),
            _PER_TASK_FIELDS,
        )
        record["data"] = zlib.compress(self.queue.serializer.dumps((function, None, args, {})))
        if at <= now:
            push(writes, self.queue, rq_id, record)
            if kind != "report":
                writes.publish(self.wake_channel, kind)
            return
        record["created_at"] = utcformat(rq_now())
        record["status"] = JobStatus.SCHEDULED.value
        writes.hset(Job.key_for(rq_id), mapping=record)
        writes.zadd(self.scheduled_key, {rq_id: math.ceil(at.timestamp())})
