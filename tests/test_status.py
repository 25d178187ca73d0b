"""`cronq status` figures, from a known situation on fakeredis."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cronq.apply import apply_project
from cronq.engine import Engine
from cronq.status import service_status
from cronq.watchdog import sweep
from tests.fake_engine import TWO_JOBS, Clock, project

pytest_plugins = ["tests.fake_engine"]

GRACE = timedelta(seconds=3)


def test_status_counts_states_lapsed_timers_and_repairs(
    engine: Engine, clock: Clock, tmp_path: Path
) -> None:
    apply_project(engine, project(tmp_path, TWO_JOBS))
    for key in engine.connection.keys("rq:*"):  # the task queue is purged
        engine.connection.delete(key)
    clock.advance(14)
    before = service_status(engine.connection, "cronq", clock(), GRACE)
    assert before["jobs"] == {"SCHEDULED": 2}
    assert before["lapsed_watchdog_timers"] == 1
    assert before["repairs_last_hour"] == 0
    sweep(engine, GRACE)
    after = service_status(engine.connection, "cronq", clock(), GRACE)
    assert after["lapsed_watchdog_timers"] == 0
    assert after["repairs_last_hour"] == 1
    assert after["repairs_total"] == {"rearmed_tick": 1}
    assert after["queued_tasks"] == 1  # the re-armed tick, already due: straight to the queue
