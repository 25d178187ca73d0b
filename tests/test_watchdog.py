"""The watchdog sweep against fakeredis with a fake clock: what it repairs and what it leaves."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from rq import Queue

from cronq import tasks
from cronq.apply import apply_project
from cronq.engine import Engine
from cronq.executor import TaskExecutor
from cronq.statemachine import InvocationStarting, JobStateName
from cronq.store import load_job
from cronq.watchdog import sweep
from tests.fake_engine import TWO_JOBS, Clock, project, release_due, run_queued

pytest_plugins = ["tests.fake_engine"]

GRACE = timedelta(seconds=3)


def purge_rq(engine: Engine) -> None:
    for key in engine.connection.keys("rq:*"):
        engine.connection.delete(key)


def history(engine: Engine, job_id: str) -> list[dict[str, object]]:
    return [json.loads(e) for e in engine.connection.lrange(engine.keys.history(job_id), 0, -1)]


def run_queued_ticks_only(engine: Engine) -> None:
    """Run the tick tasks in the queue, leaving the starts they queue (a worker about to die)."""
    queue = Queue("cronq", connection=engine.connection)
    for rq_job in queue.get_jobs():
        if rq_job.func_name.endswith(".tick"):
            queue.remove(rq_job)
            tasks.tick(*rq_job.args, connection=engine.connection)


def test_nothing_lapsed_means_nothing_to_do(engine: Engine, tmp_path: Path) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    report = sweep(engine, GRACE)
    assert report.lapsed == 0 and report.repairs == []


def test_a_purged_task_queue_is_rebuilt_and_the_job_fires_once(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    purge_rq(engine)
    clock.advance(14)  # the tick at 10 s is 4 s late: past the grace
    report = sweep(engine, GRACE)
    assert [(r.job_id, r.repair) for r in report.repairs] == [("demo/fast", "rearmed_tick")]
    release_due(engine)
    run_queued(engine)
    assert [e["scheduled_for"] for e in history(engine, "demo/fast")] == [
        "2027-01-04T09:00:10+00:00"
    ]
    assert sweep(engine, GRACE).repairs == []  # repaired: nothing lapsed any more


def test_a_late_task_that_still_exists_is_left_alone(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    before = load_job(engine.connection, engine.keys, "demo/fast")
    clock.advance(14)  # workers are busy: the tick task waits in the scheduled registry
    report = sweep(engine, GRACE)
    assert [r.repair for r in report.repairs] == ["slow_tick"]
    after = load_job(engine.connection, engine.keys, "demo/fast")
    assert before is not None and after is not None and after.state.tick == before.state.tick
    assert sweep(engine, GRACE).repairs == []  # looked at again only a grace later


def test_a_lost_start_is_requeued(engine: Engine, clock: Clock, tmp_path: Path) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    clock.advance(10)
    release_due(engine)
    run_queued_ticks_only(engine)
    purge_rq(engine)
    clock.advance(4)
    report = sweep(engine, GRACE)
    assert "requeued_start" in [r.repair for r in report.repairs]
    run_queued(engine)
    assert [e["status"] for e in history(engine, "demo/fast")] == ["SUCCEEDED"]


def test_an_invocation_whose_worker_died_times_out_and_the_job_goes_on(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))  # demo/slow: timeout 1m
    clock.advance(3600)
    release_due(engine)
    run_queued_ticks_only(engine)
    job = load_job(engine.connection, engine.keys, "demo/slow")
    assert job is not None
    engine.step("demo/slow", InvocationStarting(job.state.pending[0].nonce, "inv-lost"))
    clock.advance(64)  # past timeout (60 s) and grace (3 s)
    report = sweep(engine, GRACE)
    assert ("demo/slow", "timed_out") in [(r.job_id, r.repair) for r in report.repairs]
    (entry,) = [e for e in history(engine, "demo/slow") if e["id"] == "inv-lost"]
    assert entry["status"] == "TIMED_OUT"
    slow = load_job(engine.connection, engine.keys, "demo/slow")
    assert slow is not None and slow.state.name is JobStateName.SCHEDULED


def test_a_deleted_job_left_in_the_index_is_dropped(engine: Engine, clock: Clock) -> None:
    engine.connection.zadd(engine.keys.watchdog, {"demo/ghost": 1.0})
    assert sweep(engine, GRACE).repairs == []
    assert engine.connection.zscore(engine.keys.watchdog, "demo/ghost") is None


@pytest.mark.parametrize("lapsed", [0, 7])
def test_the_sweep_reads_only_lapsed_jobs(
    engine: Engine, clock: Clock, tmp_path: Path, lapsed: int
) -> None:
    schedules = ["*/10 * * * * *"] * lapsed + ["0 0 1 1 *"] * (30 - lapsed)
    jobs = "jobs:\n" + "".join(
        f"  - {{name: j{i}, schedule: '{schedule}', noop: {{}}}}\n"
        for i, schedule in enumerate(schedules)
    )
    apply_project(engine, project(tmp_path, jobs))
    purge_rq(engine)
    clock.advance(14)
    report = sweep(engine, GRACE, batch=3)
    assert report.lapsed == lapsed and len(report.repairs) == lapsed


def test_a_task_a_live_worker_has_in_hand_is_late_not_lost(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    clock.advance(12)  # the tick at 10 s is released late
    release_due(engine)
    in_hand = TaskExecutor(engine, "busy-worker")
    in_hand._take(None)  # taken, stamped, not finished yet
    clock.advance(2)  # the tick is past its grace, but was taken within it
    report = sweep(engine, GRACE)
    assert [(r.job_id, r.repair) for r in report.repairs] == [("demo/fast", "slow_tick")]
