"""The engine, apply and tasks against fakeredis, with a fake clock: fast checks of the Redis
layout and the transaction logic. The real-server behaviour is in test_engine_scenarios.py."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import fakeredis
import pytest
from rq import Queue
from rq.registry import ScheduledJobRegistry

from cronq import tasks
from cronq.apply import apply_project
from cronq.config import DEFAULT_MAX_PAYLOAD_BYTES
from cronq.engine import Engine, JobRefused, UnknownJob, new_invocation_id, task_id
from cronq.loader import load_paths
from cronq.statemachine import InvocationStarting, JobStateName, TriggerNow
from cronq.store import HISTORY_LIMIT, Keys, load_job
from tests.fake_engine import T0, TWO_JOBS, Clock, project, release_due, run_queued, state

pytest_plugins = ["tests.fake_engine"]

# -- apply -------------------------------------------------------------------------------------


def test_apply_adds_jobs_with_their_first_tick_and_watchdog_timer(
    engine: Engine, tmp_path: Path
) -> None:
    plan = apply_project(engine, project(tmp_path, TWO_JOBS))
    assert [str(c) for c in plan.changes] == ["+ demo/fast", "+ demo/slow"]
    job = load_job(engine.connection, engine.keys, "demo/fast")
    assert job is not None and job.state.tick is not None
    assert job.state.tick.at == T0 + timedelta(seconds=10)
    registry = ScheduledJobRegistry(queue=Queue("cronq", connection=engine.connection))
    assert task_id("t", "demo/fast", job.state.tick.nonce) in registry.get_job_ids()
    score = engine.connection.zscore(engine.keys.watchdog, "demo/fast")
    assert score == job.state.tick.at.timestamp()


def test_apply_twice_changes_nothing(engine: Engine, tmp_path: Path) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    before = load_job(engine.connection, engine.keys, "demo/fast")
    plan = apply_project(engine, project(tmp_path, TWO_JOBS))
    assert plan.changes == [] and plan.unchanged == 2
    assert load_job(engine.connection, engine.keys, "demo/fast") == before


def test_a_relative_start_is_not_a_change_on_reapply(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    text = 'jobs: [{name: later, schedule: "@every 1h", start: 90s, noop: {}}]\n'
    apply_project(engine, project(tmp_path, text))
    clock.advance(30)
    assert apply_project(engine, project(tmp_path, text)).changes == []
    job = load_job(engine.connection, engine.keys, "demo/later")
    assert job is not None and job.start == T0 + timedelta(seconds=90)


def test_a_schedule_change_rearms_only_that_job(engine: Engine, tmp_path: Path) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    fast = load_job(engine.connection, engine.keys, "demo/fast")
    slow = load_job(engine.connection, engine.keys, "demo/slow")
    changed = TWO_JOBS.replace('"0 * * * *", timeout: 1m', '"30 * * * *", timeout: 1m')
    plan = apply_project(engine, project(tmp_path, changed))
    assert [str(c) for c in plan.changes] == ["~ demo/slow (schedule)"]
    assert load_job(engine.connection, engine.keys, "demo/fast") == fast
    new_slow = load_job(engine.connection, engine.keys, "demo/slow")
    assert slow is not None and new_slow is not None
    assert new_slow.state.tick != slow.state.tick


def test_a_policy_change_keeps_the_armed_tick(engine: Engine, tmp_path: Path) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    before = load_job(engine.connection, engine.keys, "demo/slow")
    plan = apply_project(engine, project(tmp_path, TWO_JOBS.replace("timeout: 1m", "timeout: 2m")))
    assert [str(c) for c in plan.changes] == ["~ demo/slow (timeout)"]
    after = load_job(engine.connection, engine.keys, "demo/slow")
    assert before is not None and after is not None and after.state.tick == before.state.tick


def test_a_job_gone_from_the_file_is_removed_and_keeps_its_history(
    engine: Engine, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    engine.connection.lpush(engine.keys.history("demo/slow"), json.dumps({"status": "SUCCEEDED"}))
    only_fast = "jobs:\n  - {name: fast, schedule: '*/10 * * * * *', noop: {}}\n"
    plan = apply_project(engine, project(tmp_path, only_fast))
    assert [str(c) for c in plan.changes] == ["- demo/slow"]
    assert load_job(engine.connection, engine.keys, "demo/slow") is None
    assert engine.connection.zscore(engine.keys.watchdog, "demo/slow") is None
    assert engine.connection.llen(engine.keys.history("demo/slow")) == 1


def test_dry_run_writes_nothing(engine: Engine, tmp_path: Path) -> None:
    plan = apply_project(engine, project(tmp_path, TWO_JOBS), dry_run=True)
    assert len(plan.changes) == 2 and not plan.applied
    assert engine.connection.keys("*") == []


# -- the tick chain ----------------------------------------------------------------------------


def test_the_tick_chain_runs_a_job_and_records_it(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    clock.advance(10)
    release_due(engine)
    assert run_queued(engine) == 2  # the tick, then the start it queued
    history = engine.connection.lrange(engine.keys.history("demo/fast"), 0, -1)
    (entry,) = [json.loads(h) for h in history]
    assert entry["status"] == "SUCCEEDED"
    assert entry["scheduled_for"] == (T0 + timedelta(seconds=10)).isoformat()
    assert state(engine, "demo/fast") is JobStateName.SCHEDULED


def test_a_tick_delivered_twice_starts_one_invocation(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    job = load_job(engine.connection, engine.keys, "demo/fast")
    assert job is not None and job.state.tick is not None
    clock.advance(10)
    tasks.tick("cronq", "demo/fast", job.state.tick.nonce, connection=engine.connection)
    tasks.tick("cronq", "demo/fast", job.state.tick.nonce, connection=engine.connection)
    assert Queue("cronq", connection=engine.connection).count == 1
    pending = load_job(engine.connection, engine.keys, "demo/fast")
    assert pending is not None
    nonce = pending.state.pending[0].nonce
    tasks.start("cronq", "demo/fast", nonce, connection=engine.connection)
    tasks.start("cronq", "demo/fast", nonce, connection=engine.connection)
    assert engine.connection.llen(engine.keys.history("demo/fast")) == 1


def test_a_failing_target_is_retried_by_its_policy(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    text = """
jobs:
  - name: flaky
    schedule: "0 * * * *"
    noop: {fail: true}
    failure_policy: {constant: {delay: 1s, max_retries: 2}}
"""
    apply_project(engine, project(tmp_path, text))
    for _ in range(8):
        clock.advance(3600 if _ == 0 else 1)
        release_due(engine)
        run_queued(engine)
    history = [
        json.loads(h) for h in engine.connection.lrange(engine.keys.history("demo/flaky"), 0, -1)
    ]
    first_tick = [e for e in history if e["scheduled_for"] == (T0 + timedelta(hours=1)).isoformat()]
    assert sorted(e["attempt"] for e in first_tick) == [1, 2, 3]
    assert {e["status"] for e in first_tick} == {"FAILED"}


def test_a_tick_for_a_deleted_job_does_nothing(engine: Engine) -> None:
    tasks.tick("cronq", "demo/gone", 1, connection=engine.connection)
    tasks.start("cronq", "demo/gone", 1, connection=engine.connection)
    with pytest.raises(UnknownJob):
        engine.step("demo/gone", TriggerNow())


def test_a_refused_request_writes_nothing(engine: Engine, tmp_path: Path) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    engine.step("demo/slow", TriggerNow())
    job = load_job(engine.connection, engine.keys, "demo/slow")
    assert job is not None
    engine.step("demo/slow", InvocationStarting(job.state.pending[0].nonce, "inv-1"))
    before = load_job(engine.connection, engine.keys, "demo/slow")
    with pytest.raises(JobRefused, match="busy"):
        engine.step("demo/slow", TriggerNow())
    assert load_job(engine.connection, engine.keys, "demo/slow") == before


def test_a_concurrent_write_makes_the_step_recompute(
    fake_redis: fakeredis.FakeRedis, clock: Clock, tmp_path: Path
) -> None:
    engine = Engine(fake_redis, "cronq", clock=clock)
    apply_project(engine, project(tmp_path, TWO_JOBS))
    other = fakeredis.FakeRedis(server=fake_redis.connection_pool.connection_kwargs["server"])
    calls = []

    def racing_clock() -> datetime:
        calls.append(1)
        if len(calls) == 1:  # another writer commits between our read and our EXEC
            other.hincrby(engine.keys.job("demo/slow"), "version", 10)
        return clock()

    racing = Engine(fake_redis, "cronq", clock=racing_clock)
    racing.step("demo/slow", TriggerNow())
    assert len(calls) == 2
    job = load_job(fake_redis, Keys("cronq"), "demo/slow")
    assert job is not None and job.version == 12 and job.state.name is JobStateName.QUEUED


def test_history_is_capped(engine: Engine, clock: Clock, tmp_path: Path) -> None:
    apply_project(engine, project(tmp_path, "jobs: [{name: t, schedule: triggered, noop: {}}]\n"))
    for _ in range(HISTORY_LIMIT + 5):
        engine.step("demo/t", TriggerNow())
        run_queued(engine)
    assert engine.connection.llen(engine.keys.history("demo/t")) == HISTORY_LIMIT
    assert engine.connection.ttl(engine.keys.history("demo/t")) > 0


def test_a_job_applied_under_a_raised_payload_limit_still_steps(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    """The whole-job checks run when a job is applied, under that apply's limit; the worker
    reading the spec back at every step must not check it again under the default one."""
    payload = "x" * (DEFAULT_MAX_PAYLOAD_BYTES + 1)
    path = tmp_path / "big.yaml"
    path.write_text(
        f'jobs: [{{name: big, schedule: "*/10 * * * * *", noop: {{}}, payload: {payload}}}]\n'
    )
    assert not load_paths([path]).ok  # over the default limit
    result = load_paths([path], max_payload_bytes=2 * DEFAULT_MAX_PAYLOAD_BYTES)
    apply_project(engine, result.projects[0])
    clock.advance(10)
    release_due(engine)
    run_queued(engine)
    history = engine.connection.lrange(engine.keys.history("big/big"), 0, -1)
    assert [json.loads(h)["status"] for h in history] == ["SUCCEEDED"]


def test_invocation_ids_do_not_clash_among_many_starts_in_one_second() -> None:
    """An id names its RQ job across all jobs: a clash would run one job twice and lose another
    (with 32 random bits, 100,000 ids in one second clash about 2 times in 3)."""
    ids = {new_invocation_id(T0) for _ in range(100_000)}
    assert len(ids) == 100_000
