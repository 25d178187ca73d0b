"""RQ job records written as RQ writes them, without building an RQ `Job` for each.

cronq enqueues an RQ job for every tick and every `rq` run, and going through RQ's enqueue
(`Job.create`, serializer lookup, callbacks, dependencies, five to seven commands) was over a
quarter of the CPU of a run. Records of one kind differ only in a few fields (the call, the id,
the times), so RQ builds a record once per kind, and each job is a copy of it with those fields
filled in. tests/test_rq_records.py holds every record to what RQ's own enqueue writes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from redis.typing import EncodableT, FieldT
from rq import Queue
from rq.job import Job, JobStatus
from rq.utils import now, utcformat

from cronq.writes import Writes

__all__ = ["Record", "new_record", "push", "register"]

Record = dict[FieldT, EncodableT]  # an RQ job's hash, as HSET takes it

_templates: dict[tuple[str, ...], Record] = {}


def new_record(
    kind: tuple[str, ...], build: Callable[[], Job], per_record: Collection[str]
) -> Record:
    """A fresh record of `kind`: what `build()` (RQ's own job of that kind) would save, less
    the fields each record sets itself; RQ builds it on the first call of a process only."""
    template = _templates.get(kind)
    if template is None:
        record = build().to_dict()
        template = _templates[kind] = {k: v for k, v in record.items() if k not in per_record}
    return dict(template)


def push(writes: Writes, queue: Queue, rq_id: str, record: Record) -> None:
    """Save a record as queued and push it onto its queue, as RQ's enqueue does (its `created_at`
    and `enqueued_at` are now). The caller lists the queue (`register`) once per transaction."""
    record["created_at"] = record["enqueued_at"] = utcformat(now())
    record["status"] = JobStatus.QUEUED.value
    writes.hset(Job.key_for(rq_id), mapping=record)
    writes.rpush(queue.key, rq_id)


def register(writes: Writes, queue: Queue) -> None:
    """List the queue where RQ's workers and tools look for queues."""
    writes.sadd(queue.redis_queues_keys, queue.key)
