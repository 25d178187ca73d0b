"""An engine on fakeredis and a fake clock, with a worker's moves done by hand: for fast tests
of the engine, apply and the watchdog."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import fakeredis
import pytest
from rq import Queue
from rq.registry import ScheduledJobRegistry

from cronq import engine as engine_module
from cronq import tasks
from cronq.engine import Engine
from cronq.loader import LoadedProject, load_paths
from cronq.statemachine import JobStateName
from cronq.store import load_job

T0 = datetime(2027, 1, 4, 9, 0, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(
    fake_redis: fakeredis.FakeRedis, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> Engine:
    """An engine on the fake clock; the tasks find it in their per-process cache."""
    engine = Engine(fake_redis, "cronq", clock=clock)
    monkeypatch.setitem(engine_module._shared, (id(fake_redis), "cronq"), engine)
    return engine


def project(tmp_path: Path, text: str) -> LoadedProject:
    path = tmp_path / "demo.yaml"
    path.write_text(text)
    result = load_paths([path])
    assert result.ok, result.problems
    return result.projects[0]


TWO_JOBS = """
jobs:
  - {name: fast, schedule: "*/10 * * * * *", noop: {}}
  - {name: slow, schedule: "0 * * * *", timeout: 1m, noop: {}}
"""


def state(engine: Engine, job_id: str) -> JobStateName:
    job = load_job(engine.connection, engine.keys, job_id)
    assert job is not None
    return job.state.name


def run_queued(engine: Engine) -> int:
    """Run every task in cronq's queue (not the scheduled ones) the way a worker would."""
    queue = Queue("cronq", connection=engine.connection)
    ran = 0
    while (job := queue.dequeue_any([queue], None, connection=engine.connection)) is not None:
        rq_job, _ = job
        function = getattr(tasks, rq_job.func_name.rsplit(".", 1)[1])
        function(*rq_job.args, connection=engine.connection)
        ran += 1
    return ran


def release_due(engine: Engine) -> None:
    """Move scheduled tasks that are due by the fake clock into the queue (RQ's scheduler)."""
    queue = Queue("cronq", connection=engine.connection)
    registry = ScheduledJobRegistry(queue=queue)
    for rq_id in registry.get_jobs_to_schedule(int(engine.clock().timestamp())):
        registry.remove(rq_id)
        job = queue.fetch_job(rq_id.decode() if isinstance(rq_id, bytes) else rq_id)
        assert job is not None
        queue.enqueue_job(job)
