"""The RQ job records cronq writes itself are what RQ's own enqueue writes (fakeredis): its tasks'
records the same hash but for the empty fields RQ stores and cronq leaves out, the users' jobs
of `rq` targets the very same, on the same queue or scheduled registry, with the same expiry."""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta, timezone
from typing import Any

import fakeredis
import pytest
from rq import Callback, Queue
from rq.job import Job
from rq.registry import ScheduledJobRegistry

from cronq.rq_records import register
from cronq.target_specs import RqTarget
from cronq.targets.base import InvocationContext
from cronq.targets.rq import enqueue_in, on_failure, on_stopped, on_success, rq_job_id
from cronq.task_queue import TaskQueue
from cronq.writes import Writes

NOW = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=timezone.utc)
ARGS = ("cronq", "demo/job", 123456789)
EMPTY_IN_RQ = {
    b"success_callback_name",
    b"failure_callback_name",
    b"stopped_callback_name",
    b"started_at",
    b"ended_at",
    b"last_heartbeat",
    b"worker_name",
    b"group_id",
}
TIMES = {b"created_at", b"enqueued_at"}


def rq_enqueue(queue: Queue, at: datetime) -> None:
    """How RQ enqueues the same task (and how cronq did before TaskQueue)."""
    options: dict[str, Any] = {"result_ttl": 0, "failure_ttl": 86_400}
    options |= {"job_id": "t-1", "description": "cronq tick"}
    with queue.connection.pipeline() as pipe:
        if at <= NOW:
            queue.enqueue_call("cronq.tasks.tick", args=ARGS, pipeline=pipe, **options)
        else:
            queue.enqueue_at(at, "cronq.tasks.tick", *ARGS, pipeline=pipe, **options)
        pipe.execute()


def cronq_enqueue(queue: Queue, at: datetime) -> None:
    tasks = TaskQueue(queue)
    writes = Writes()
    tasks.register(writes)
    tasks.add(writes, "tick", ARGS, "t-1", at, NOW)
    writes.send(queue.connection)


def written(queue: Queue, rq_id: str = "t-1") -> dict[str, Any]:
    connection = queue.connection
    record = connection.hgetall(Job.key_for(rq_id))
    call = queue.serializer.loads(zlib.decompress(record.pop(b"data")))
    times = {k: record.pop(k) for k in TIMES if k in record}
    return {
        "record": {k: v for k, v in record.items() if k not in EMPTY_IN_RQ or v},
        "call": (call[0], call[1], tuple(call[2]), call[3]),
        "times": sorted(times),
        "queued": connection.lrange(queue.key, 0, -1),
        "scheduled": connection.zrange(
            ScheduledJobRegistry(queue=queue).key,  # type: ignore[no-untyped-call]
            0,
            -1,
            withscores=True,
        ),
        "queues": connection.smembers(Queue.redis_queues_keys),
        "expires in": connection.ttl(Job.key_for(rq_id)),
    }


@pytest.mark.parametrize("delay", [timedelta(0), timedelta(seconds=2.75)], ids=["due", "later"])
def test_a_task_record_is_what_rq_writes(delay: timedelta) -> None:
    """`later` is a whole second: there RQ's truncation and cronq's rounding up agree."""
    by_rq, by_cronq = (Queue("cronq", connection=fakeredis.FakeRedis()) for _ in range(2))
    rq_enqueue(by_rq, NOW + delay)
    cronq_enqueue(by_cronq, NOW + delay)
    assert written(by_cronq) == written(by_rq)


def test_a_task_is_due_at_the_whole_second_after_its_time() -> None:
    queue = Queue("cronq", connection=fakeredis.FakeRedis())
    cronq_enqueue(queue, NOW + timedelta(seconds=2))
    ((_, score),) = written(queue)["scheduled"]
    assert score == int(NOW.timestamp()) + 3  # 12:00:02.25 is released at 12:00:03


def test_rq_reads_a_task_record_back() -> None:
    queue = Queue("cronq", connection=fakeredis.FakeRedis())
    before = datetime.now(timezone.utc).replace(microsecond=0)
    cronq_enqueue(queue, NOW)
    job = Job.fetch("t-1", connection=queue.connection)
    assert (job.func_name, job.args, job.origin) == ("cronq.tasks.tick", ARGS, "cronq")
    assert (job.result_ttl, job.failure_ttl, job.get_status()) == (0, 86_400, "queued")
    assert job.created_at == job.enqueued_at  # when it was written, as RQ stamps it
    assert job.created_at and before <= job.created_at <= datetime.now(timezone.utc)


SPEC = RqTarget(func="billing.reports.nightly", queue="reports", args=[1, "a"], kwargs={"k": [2]})


def context() -> InvocationContext:
    return InvocationContext(
        job_id="demo/job",
        invocation_id="20260301T120000-abcd1234",
        scheduled_for=NOW,
        attempt=2,
        payload={"x": 1},
        metadata={"team": "billing"},
        deadline=datetime.now(timezone.utc) + timedelta(seconds=30),
        namespace="cronq",
    )


def test_a_users_rq_job_is_what_rq_writes() -> None:
    by_rq, by_cronq = (Queue("reports", connection=fakeredis.FakeRedis()) for _ in range(2))
    ctx = context()
    rq_id = rq_job_id(ctx.invocation_id)
    writes = Writes()
    register(writes, by_cronq)
    enqueue_in(writes, by_cronq, SPEC, ctx)
    writes.send(by_cronq.connection)
    meta = Job.fetch(rq_id, connection=by_cronq.connection).meta
    assert meta["cronq"]["invocation_id"] == ctx.invocation_id and meta["cronq"]["attempt"] == 2
    by_rq.enqueue_call(  # what enqueue_in did through RQ before it wrote records itself
        SPEC.func,
        args=list(SPEC.args),
        kwargs=dict(SPEC.kwargs),
        job_id=rq_id,
        timeout=30,
        ttl=30,
        description=f"{SPEC.func} (cronq demo/job, {ctx.invocation_id})",
        meta=meta,
        on_success=Callback(on_success),
        on_failure=Callback(on_failure),
        on_stopped=Callback(on_stopped),
    )
    assert written(by_cronq, rq_id) == written(by_rq, rq_id)
