"""The lean task executor against fakeredis with a fake clock: batches, starts taken in the
tick's transaction, in-progress lists, foreign tasks, and RQ compatibility of cronq's tasks."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest
from rq import Queue, SimpleWorker
from rq.job import Job

from cronq import executor
from cronq.apply import apply_project
from cronq.engine import Engine, report_outcome
from cronq.executor import TaskExecutor, return_orphaned_tasks, wip_key
from cronq.presence import WORKER_TTL, beat, workers_key
from cronq.statemachine import InvocationStatus
from tests.fake_engine import TWO_JOBS, Clock, project, release_due

pytest_plugins = ["tests.fake_engine"]


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


@pytest.mark.parametrize(
    ("arriving", "expected"),
    [
        ("cronq-r-2", ["cronq-r-1", "cronq-r-2"]),  # reports wait for each other
        ("cronq-t-2", ["cronq-r-1", "cronq-t-2"]),  # a tick ends the wait
    ],
)
def test_a_batch_of_reports_lingers_for_more_but_not_a_tick(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, arriving: str, expected: list[str]
) -> None:
    connection, steps, real_sleep = engine.connection, [], time.sleep
    connection.rpush(engine.queue.key, "cronq-r-1")

    def sleep(seconds: float) -> None:
        steps.append(seconds)
        if len(steps) == 1:
            connection.rpush(engine.queue.key, arriving)
        real_sleep(seconds)

    monkeypatch.setattr(executor, "REPORT_LINGER", 0.05)
    monkeypatch.setattr(executor.time, "sleep", sleep)
    taken = TaskExecutor(engine, "w1")._take(None)
    assert [task_id for task_id, _ in taken] == expected
    if arriving.startswith("cronq-t-"):
        assert len(steps) == 1
    else:  # it waited out the linger, a step at a time
        assert len(steps) > 1 and sum(steps) == pytest.approx(0.05, abs=0.015)
