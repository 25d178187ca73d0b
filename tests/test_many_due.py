"""Thousands of tasks due at once, against a real server: the Lua scripts that move them must not
hit Lua's unpack() limit (a few thousand values), which once stopped every tick of a project of
10,000 jobs firing in the same minute."""

from __future__ import annotations

import time

import redis
from rq import Queue
from rq.job import Job
from rq.registry import ScheduledJobRegistry

from cronq.engine import Engine
from cronq.executor import TaskExecutor, wip_key
from cronq.worker import TickReleaser

DUE = 12_000


def test_the_releaser_moves_twelve_thousand_due_tasks_in_order(redis_url: str) -> None:
    connection = redis.Redis.from_url(redis_url)
    queue = Queue("cronq", connection=connection)
    registry = ScheduledJobRegistry(queue=queue)
    due = time.time() - 1
    ids = [f"t{i:05d}" for i in range(DUE)]
    with connection.pipeline(transaction=False) as pipe:
        pipe.zadd(registry.key, {task: due for task in ids})
        for task in ids:
            pipe.hset(Job.key_for(task), "status", "scheduled")
        pipe.execute()
    releaser = TickReleaser(queue)
    releaser.release_due()  # at most 10,000 a call
    assert connection.llen(queue.key) == 10_000
    releaser.release_due()
    assert connection.zcard(registry.key) == 0
    assert [t.decode() for t in connection.lrange(queue.key, 0, -1)] == ids
    assert connection.hget(Job.key_for(ids[-1]), "status") == b"queued"


def test_the_executor_takes_a_batch_of_nine_thousand(redis_url: str) -> None:
    connection = redis.Redis.from_url(redis_url)
    engine = Engine(connection)
    ids = [f"t{i:05d}" for i in range(9_000)]
    connection.rpush(engine.queue.key, *ids)
    taken = TaskExecutor(engine, "w1", batch=10_000)._take(None)
    assert [task_id for task_id, _ in taken] == ids
    assert [t.decode() for t in connection.lrange(wip_key("cronq", "w1"), 0, -1)] == ids
    assert connection.llen(engine.queue.key) == 0
