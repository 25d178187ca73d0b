"""The lean task executor against fakeredis with a fake clock: batches, starts taken in the
tick's transaction, in-progress lists, foreign tasks, and RQ compatibility of cronq's tasks."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from rq import Queue, SimpleWorker
from rq.job import Job

from cronq import executor
from cronq.apply import apply_project
from cronq.engine import Engine, report_outcome, task_id
from cronq.executor import TaskExecutor, return_orphaned_tasks, wip_key
from cronq.presence import WORKER_TTL, beat, workers_key
from cronq.statemachine import InvocationDone, InvocationStatus
from cronq.tasks import event_of
from cronq.worker import TickReleaser
from cronq.writes import Writes
from tests.fake_engine import TWO_JOBS, Clock, project, release_due

pytest_plugins = ["tests.fake_engine"]
SUCCEEDED = InvocationStatus.SUCCEEDED


def statuses(engine: Engine, job_id: str) -> list[str]:
    entries = engine.connection.lrange(engine.keys.history(job_id), 0, -1)
    return [json.loads(e)["status"] for e in entries]


def burst(engine: Engine, name: str = "w1") -> None:
    TaskExecutor(engine, name, threads=2).run(threading.Event(), burst=True)


def test_a_due_tick_runs_its_target_without_a_start_task(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    clock.advance(10)
    release_due(engine)
    burst(engine)
    assert statuses(engine, "demo/fast") == ["SUCCEEDED"]
    queue = Queue("cronq", connection=engine.connection)
    assert queue.count == 0  # the start was taken in the tick's own transaction
    assert engine.connection.exists(wip_key("cronq", "w1")) == 0  # nothing left in progress
    assert not [k for k in engine.connection.keys("rq:job:cronq-s-*")]  # no start task made


def test_a_delayed_retry_still_goes_through_an_rq_task(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    text = """
jobs:
  - name: flaky
    schedule: "0 * * * *"
    noop: {fail: true}
    failure_policy: {constant: {delay: 5s, max_retries: 1}}
"""
    apply_project(engine, project(tmp_path, text))
    clock.advance(3600)
    release_due(engine)
    burst(engine)
    assert statuses(engine, "demo/flaky") == ["FAILED"]
    assert engine.connection.keys("rq:job:cronq-s-*")  # the retry waits as a scheduled task
    clock.advance(5)
    release_due(engine)
    burst(engine)
    assert statuses(engine, "demo/flaky") == ["FAILED", "FAILED"]


def test_tasks_of_a_worker_that_is_gone_go_back_on_the_queue(engine: Engine, clock: Clock) -> None:
    connection = engine.connection
    now = clock().timestamp()
    for worker, tasks in (("dead", ["a", "b"]), ("alive", ["c"])):
        connection.rpush(wip_key("cronq", worker), *tasks)
        connection.sadd("cronq:wips", wip_key("cronq", worker))
    beat(connection, workers_key("cronq"), "alive", now, WORKER_TTL)
    assert return_orphaned_tasks(engine, now) == 2
    assert connection.lrange(engine.queue.key, 0, -1) == [b"a", b"b"]
    assert connection.lrange(wip_key("cronq", "alive"), 0, -1) == [b"c"]


def test_a_task_that_is_not_cronqs_is_dropped_with_a_message(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    Queue("cronq", connection=engine.connection).enqueue("builtins.len", "abc")
    with caplog.at_level(logging.ERROR, logger="cronq.executor"):
        burst(engine)
    assert "is not cronq's (builtins.len)" in caplog.text


def test_cronqs_tasks_are_ordinary_rq_jobs_an_rq_worker_can_run(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    clock.advance(10)
    release_due(engine)
    queue = Queue("cronq", connection=engine.connection)
    (task_id,) = queue.job_ids
    assert Job.fetch(task_id, connection=engine.connection).description == "cronq tick"
    SimpleWorker([queue], connection=engine.connection).work(burst=True)
    assert statuses(engine, "demo/fast") == ["SUCCEEDED"]


RQ_JOB = """
jobs:
  - {name: sum, schedule: "*/10 * * * * *", rq: {func: tests.rq_funcs.add, args: [1, 2]}}
  - {name: bad, schedule: "*/10 * * * * *", rq: {func: tests.rq_funcs.boom, args: [disk full]}}
"""


@pytest.mark.parametrize("reporter", ["executor", "rq worker"])
def test_rq_outcomes_come_back_as_report_tasks(
    engine: Engine, clock: Clock, tmp_path: Path, reporter: str
) -> None:
    """The user's RQ worker only enqueues a report; the executor (or any RQ worker on cronq's
    queue) steps it, so the history is written where cronq's tasks run."""
    apply_project(engine, project(tmp_path, RQ_JOB))
    clock.advance(10)
    release_due(engine)
    burst(engine)  # both ticks in one batch, both rq jobs enqueued together
    users = Queue("default", connection=engine.connection)
    assert users.count == 2
    SimpleWorker([users], connection=engine.connection).work(burst=True)
    assert statuses(engine, "demo/sum") == []  # reported, not yet stepped
    reports = [t for t in engine.queue.job_ids if t.startswith("cronq-r-")]
    assert len(reports) == 2
    if reporter == "executor":
        burst(engine)
    else:
        SimpleWorker([engine.queue], connection=engine.connection).work(burst=True)
    assert statuses(engine, "demo/sum") == ["SUCCEEDED"]
    entries = engine.connection.lrange(engine.keys.history("demo/bad"), 0, -1)
    assert [json.loads(e)["error"] for e in entries] == ["ValueError: disk full"]


def test_a_report_for_an_invocation_that_is_over_changes_nothing(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, RQ_JOB))
    clock.advance(10)
    release_due(engine)
    burst(engine)
    SimpleWorker(
        [Queue("default", connection=engine.connection)], connection=engine.connection
    ).work(burst=True)
    burst(engine)
    before = engine.connection.hgetall(engine.keys.job("demo/sum"))
    (entry,) = engine.connection.lrange(engine.keys.history("demo/sum"), 0, -1)
    invocation = json.loads(entry)["id"]
    report_outcome(
        engine.connection, "cronq", "demo/sum", invocation, InvocationStatus.FAILED, "late"
    )
    burst(engine)
    assert engine.connection.hgetall(engine.keys.job("demo/sum")) == before
    assert statuses(engine, "demo/sum") == ["SUCCEEDED"]


def report_task(engine: Engine, invocation_id: str) -> str:
    report_outcome(engine.connection, "cronq", "demo/x", invocation_id, SUCCEEDED, None)
    return task_id("r", "demo/x", invocation_id)


def tick_task(engine: Engine) -> str:
    """A tick enqueued due now, as a step writes it (which publishes its arrival)."""
    rq_id, now = task_id("t", "demo/x", 7), engine.clock()
    writes = Writes()
    engine.tasks.add(writes, "tick", ("cronq", "demo/x", 7), rq_id, now, now)
    writes.send(engine.connection)
    return rq_id


def released_tick(engine: Engine) -> str:
    """A tick the releaser moves from the scheduled registry (which publishes it too)."""
    rq_id, now = task_id("t", "demo/x", 8), engine.clock()
    writes = Writes()
    engine.tasks.add(writes, "tick", ("cronq", "demo/x", 8), rq_id, now + timedelta(1), now)
    writes.send(engine.connection)
    engine.connection.zadd(engine.tasks.scheduled_key, {rq_id: 0})  # due long ago
    TickReleaser(engine.queue).release_once()
    return rq_id


@pytest.mark.parametrize("arrival", ["report", "tick", "released tick"])
def test_a_batch_of_reports_lingers_for_more_but_not_a_tick(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, arrival: str
) -> None:
    """Reports trickling in wait for each other up to the linger; a tick or start that comes
    meanwhile (written by a step or released when due) ends the wait at once."""
    linger = 0.3
    monkeypatch.setattr(executor, "REPORT_LINGER", linger)
    first = report_task(engine, "inv-1")
    arrive: Callable[[], str] = {
        "report": lambda: report_task(engine, "inv-2"),
        "tick": lambda: tick_task(engine),
        "released tick": lambda: released_tick(engine),
    }[arrival]
    arrived: list[str] = []
    timer = threading.Timer(0.05, lambda: arrived.append(arrive()))
    began = time.monotonic()
    timer.start()
    taken = TaskExecutor(engine, "w1")._take(None)
    waited = time.monotonic() - began
    timer.join()
    assert [task for task, _ in taken] == [first, *arrived]
    if arrival == "report":
        assert waited >= linger  # it waited out the linger
    else:
        assert waited < linger / 2  # the tick ended it


def test_reports_are_read_with_their_end_time_and_without_it_from_an_older_cronq(
    engine: Engine,
) -> None:
    report = "cronq.tasks.report"
    old = event_of(engine, report, ("cronq", "demo/x", "inv-1", "SUCCEEDED", None))
    assert old == ("demo/x", InvocationDone("inv-1", SUCCEEDED, None, None))
    new = event_of(engine, report, ("cronq", "demo/x", "inv-1", "FAILED", "boom", 1.5))
    ended = datetime.fromtimestamp(1.5, tz=timezone.utc)
    assert new == ("demo/x", InvocationDone("inv-1", InvocationStatus.FAILED, "boom", ended))
    assert event_of(engine, report, ("cronq", "demo/x", "inv-1", "SUCCEEDED", None, 1, 2)) is None
