"""End-to-end scenarios of the engine (DESIGN §2, §3, §6, §7): a real Redis server, configs applied
with `cronq apply`, real `cronq worker` processes, and what `cronq history/show/jobs` report.

Each scenario runs for seconds, not minutes: schedules fire every second or two, and every wait is
a bounded poll (see tests/engine_harness.py).
"""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any

import pytest
import redis

from cronq.engine import task_id as engine_task_id
from cronq.redis_server import RedisServer
from cronq.store import load_job
from tests.engine_harness import (
    Cronq,
    instant,
    intervals,
    overlapping,
    seconds_between,
    sleep_until,
    wait_until,
)

EVERY_SECOND = "* * * * * *"


@pytest.fixture
def cronq(harness: Cronq) -> Cronq:
    return harness


def job_lines(*jobs: str) -> str:
    """A config of one job per flow-style line, e.g. `{name: a, schedule: "* * * * * *"}`."""
    return "jobs:\n" + "".join(f"  - {job}\n" for job in jobs)


def duplicates(entries: list[dict[str, Any]], *fields: str) -> list[tuple[Any, ...]]:
    counts = Counter(tuple(e[f] for f in fields) for e in entries)
    return [key for key, n in counts.items() if n > 1]


def statuses(entries: list[dict[str, Any]]) -> Counter[str]:
    return Counter(e["status"] for e in entries)


# -- 1. every second, many jobs, two workers ------------------------------------------------------


def test_every_second_jobs_fire_each_second_exactly_once(cronq: Cronq) -> None:
    names = [f"j{i:02d}" for i in range(20)]
    config = job_lines(*(f'{{name: {n}, schedule: "{EVERY_SECOND}", noop: {{}}}}' for n in names))
    with cronq.running(2):
        plan = cronq.apply(config)
        assert [c["op"] for c in plan["changes"]] == ["+"] * 20
        applied = time.time()
        sleep_until(applied + 15)
        stopped = time.time()

    assert cronq.failed_tasks() == []
    everything = []
    for name in names:
        entries = cronq.runs(f"proj/{name}")
        everything += entries
        succeeded = [e for e in entries if e["status"] == "SUCCEEDED"]
        assert statuses(entries) == {"SUCCEEDED": len(succeeded)}, (name, entries)
        assert duplicates(succeeded, "scheduled_for") == [], name
        gaps = seconds_between(succeeded)
        assert set(gaps) == {1.0}, f"{name}: gaps between runs {gaps}"
        first, last = (
            instant(succeeded[0]["scheduled_for"]),
            instant(succeeded[-1]["scheduled_for"]),
        )
        assert first.timestamp() <= applied + 1.5, f"{name}: first run {first} long after apply"
        assert last.timestamp() >= stopped - 2.5, f"{name}: last run {last}, stopped at {stopped}"
    assert duplicates(everything, "job", "scheduled_for", "attempt") == []


# -- 2. overlap policies -------------------------------------------------------------------------

OVERLAP_POLICIES = ("skip", "queue", "allow", "replace")


@pytest.fixture(scope="module")
def overlap_run(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One run for every overlap policy at once: a job every 2 s whose run takes 3 s. Workers run
    one task at a time, so there are enough of them for the most runs at once (skip 1, queue 1,
    allow 2, replace 2: an aborted noop still sleeps out its time) and one for the ticks."""
    with redis.Redis.from_url(redis_server.url) as client:
        client.flushall()
    harness = Cronq(redis_server.url, tmp_path_factory.mktemp("overlap"))
    config = job_lines(
        *(
            f'{{name: {p}, schedule: "*/2 * * * * *", overlap: {p}, noop: {{sleep: 3s}}}}'
            for p in OVERLAP_POLICIES
        )
    )
    try:
        with harness.running(7):
            harness.apply(config)
            sleep_until(time.time() + 11)
            pages = {p: harness.show(f"proj/{p}") for p in OVERLAP_POLICIES}
        histories = {p: harness.runs(f"proj/{p}") for p in OVERLAP_POLICIES}
        failed = harness.failed_tasks()
    finally:
        harness.kill_all()
    return {"pages": pages, "histories": histories, "failed": failed}


def test_overlap_runs_had_no_task_errors(overlap_run: Any) -> None:
    assert overlap_run["failed"] == []


def test_overlap_skip_never_overlaps_and_records_overruns(overlap_run: Any) -> None:
    entries = overlap_run["histories"]["skip"]
    succeeded = [e for e in entries if e["status"] == "SUCCEEDED"]
    overruns = [e for e in entries if e["status"] == "OVERRUN"]
    assert set(statuses(entries)) <= {"SUCCEEDED", "OVERRUN", "STARTING", "RUNNING"}, entries
    assert len(succeeded) >= 2 and len(overruns) >= 2, entries
    spans = intervals(succeeded)
    assert not overlapping(spans), spans
    # Every run takes 3 s, so every other tick finds the job busy: runs 4 s apart.
    assert set(seconds_between(succeeded)) == {4.0}, succeeded
    # Each OVERRUN tick fell while a run was active (or one still running at the end).
    busy = [
        *spans,
        *(
            (instant(e["started_at"]), datetime.max.replace(tzinfo=timezone.utc))
            for e in entries
            if e["status"] in ("STARTING", "RUNNING")
        ),
    ]
    for overrun in overruns:
        tick = instant(overrun["scheduled_for"])
        assert any(start <= tick <= end for start, end in busy), (overrun, busy)


def test_overlap_queue_runs_back_to_back(overlap_run: Any) -> None:
    entries = overlap_run["histories"]["queue"]
    succeeded = [e for e in entries if e["status"] == "SUCCEEDED"]
    assert set(statuses(entries)) <= {"SUCCEEDED", "STARTING", "RUNNING"}, entries
    assert len(succeeded) >= 3, entries
    # No tick lost (the queue never exceeds max_pending=10 here) and none run twice.
    assert set(seconds_between(succeeded)) == {2.0}, succeeded
    for before, after in itertools.pairwise(succeeded):
        finished, started = instant(before["finished_at"]), instant(after["started_at"])
        due = instant(after["scheduled_for"])
        wait = (started - max(finished, due)).total_seconds()
        assert -0.05 <= wait <= 0.5, f"{after['scheduled_for']} started {wait:.3f}s after it could"
    # Ticks come faster than runs end: the backlog grew.
    assert overlap_run["pages"]["queue"]["backlog"], overlap_run["pages"]["queue"]


def test_overlap_allow_runs_side_by_side(overlap_run: Any) -> None:
    entries = overlap_run["histories"]["allow"]
    succeeded = [e for e in entries if e["status"] == "SUCCEEDED"]
    assert set(statuses(entries)) <= {"SUCCEEDED", "STARTING", "RUNNING"}, entries
    assert len(succeeded) >= 3, entries
    assert set(seconds_between(succeeded)) == {2.0}, succeeded
    assert overlapping(intervals(succeeded), slack=0.5), intervals(succeeded)


def test_overlap_replace_aborts_the_active_run(overlap_run: Any) -> None:
    entries = overlap_run["histories"]["replace"]
    aborted = [e for e in entries if e["status"] == "ABORTED"]
    counts = statuses(entries)
    assert set(counts) <= {"ABORTED", "SUCCEEDED", "STARTING", "RUNNING"}, entries
    assert len(aborted) >= 3, entries
    # Only a run nobody replaced (the last one, finishing during shutdown) can succeed.
    assert counts["SUCCEEDED"] <= 1, entries
    ticks = [e for e in entries if e["status"] != "OVERRUN"]
    assert set(seconds_between(ticks)) == {2.0}, ticks
    for entry in aborted:
        assert entry["error"].startswith("replaced by the run for"), entry
        ended, due = instant(entry["finished_at"]), instant(entry["scheduled_for"])
        assert ended >= due + timedelta(seconds=2), entry
    # As recorded, never two runs at once: each ends (is aborted) when the next one starts.
    assert not overlapping(intervals(entries), slack=0.05), intervals(entries)


# -- 3. failure policies -------------------------------------------------------------------------


def test_failure_policies_count_attempts_per_tick(cronq: Cronq) -> None:
    every = 'schedule: "@every 10s", start: 1s'
    retry = "failure_policy: {constant: {delay: 1s, max_retries: 2}}"
    config = job_lines(
        f"{{name: retried, {every}, noop: {{fail: true}}, {retry}}}",
        f"{{name: dropped, {every}, noop: {{fail: true}}, failure_policy: drop}}",
        f"{{name: healthy, {every}, noop: {{}}, {retry}}}",
    )
    # Workers first: a retry's time counts from the failed attempt's virtual time, so attempts of
    # a tick that starts late (no worker yet) would catch up back to back.
    with cronq.running(1):
        cronq.apply(config)

        def three_failures() -> list[dict[str, Any]] | None:
            failed = cronq.runs("proj/retried", "FAILED")
            return failed if len(failed) >= 3 else None

        failures = wait_until(three_failures, timeout=10, what="three failed attempts")
        # A fourth attempt would come a second after the third: give it the chance to show.
        third = instant(failures[-1]["finished_at"])
        sleep_until(third.timestamp() + 1.5)
        pages = {name: cronq.show(f"proj/{name}") for name in ("retried", "dropped", "healthy")}
        histories = {name: cronq.runs(f"proj/{name}") for name in pages}

    assert cronq.failed_tasks() == []
    tick = failures[0]["scheduled_for"]
    retried = histories["retried"]
    assert [(e["status"], e["attempt"], e["scheduled_for"]) for e in retried] == [
        ("FAILED", 1, tick),
        ("FAILED", 2, tick),
        ("FAILED", 3, tick),
    ]
    starts = [instant(e["started_at"]) for e in retried]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    assert all(0.5 <= gap <= 1.6 for gap in gaps), f"retries should be 1 s apart: {gaps}"
    assert {e["error"] for e in retried} == {"noop: fail: true"}

    assert [(e["status"], e["attempt"]) for e in histories["dropped"]] == [("FAILED", 1)]
    assert [(e["status"], e["attempt"]) for e in histories["healthy"]] == [("SUCCEEDED", 1)]
    assert histories["dropped"][0]["scheduled_for"] == tick
    assert histories["healthy"][0]["scheduled_for"] == tick

    next_tick = (instant(tick) + timedelta(seconds=10)).isoformat()
    for name, page in pages.items():
        assert page["state"] == "SCHEDULED", (name, page)
        assert page["queued_starts"] == 0 and page["active"] == [], (name, page)
        assert page["next_run"] == next_tick, (name, page)


# -- 4. lifetime ---------------------------------------------------------------------------------


def test_lifetime_repeats_one_shot_until_and_removal(cronq: Cronq) -> None:
    lifetime = [
        f'{{name: thrice, schedule: "{EVERY_SECOND}", repeats: 3, noop: {{}}}}',
        "{name: once, start: 2s, noop: {}}",
        f'{{name: bounded, schedule: "{EVERY_SECOND}", until: 4s, noop: {{}}}}',
    ]
    with cronq.running(1):
        plan = cronq.apply(job_lines(*lifetime, "{name: gone, start: 4s, noop: {}}"))
        assert sorted(c["job"] for c in plan["changes"]) == [
            "proj/bounded",
            "proj/gone",
            "proj/once",
            "proj/thrice",
        ]
        gone_start = instant(cronq.show("proj/gone")["start"])
        once_start = cronq.show("proj/once")["start"]
        # Removed before its start: the same file without it.
        plan = cronq.apply(job_lines(*lifetime))
        assert plan["changes"] == [{"op": "-", "job": "proj/gone", "fields": []}], plan
        assert plan["unchanged"] == 3, plan

        def all_finished() -> bool:
            return all(
                cronq.show(f"proj/{name}")["state"] == "FINISHED"
                for name in ("thrice", "once", "bounded")
            )

        wait_until(all_finished, timeout=10, interval=0.25, what="every job to be FINISHED")
        sleep_until(gone_start.timestamp() + 1.5)  # past the removed job's time
        pages = {name: cronq.show(f"proj/{name}") for name in ("thrice", "once", "bounded")}

    assert cronq.failed_tasks() == []
    thrice = cronq.runs("proj/thrice")
    assert statuses(thrice) == {"SUCCEEDED": 3}, thrice
    assert set(seconds_between(thrice)) == {1.0}, thrice
    assert pages["thrice"]["counters"]["triggers"] == 3, pages["thrice"]

    once = cronq.runs("proj/once")
    assert [(e["status"], e["scheduled_for"]) for e in once] == [("SUCCEEDED", once_start)]
    assert pages["once"]["start"] == once_start, "re-applying must keep a relative start"

    bounded = cronq.runs("proj/bounded")
    until = instant(pages["bounded"]["until"])
    assert set(statuses(bounded)) == {"SUCCEEDED"} and 3 <= len(bounded) <= 5, bounded
    assert set(seconds_between(bounded)) == {1.0}, bounded
    last = instant(bounded[-1]["scheduled_for"])
    assert until - timedelta(seconds=1) < last <= until, (last, until)

    for page in pages.values():
        assert page["next_run"] is None and page["finished_reason"], page

    # The removed job never fired, is gone from every listing, and nothing is left scheduled.
    assert cronq.stored_history("proj/gone") == []
    assert "proj/gone" not in {row["id"] for row in cronq.jobs()}
    result = cronq.cli("show", "proj/gone")
    assert result.exit_code == 1 and "no job 'proj/gone'" in result.stderr
    assert cronq.scheduled_tasks() == []


# -- 5. apply ------------------------------------------------------------------------------------


def test_apply_is_idempotent_targeted_and_atomic(cronq: Cronq) -> None:
    fast = f'{{name: fast, schedule: "{EVERY_SECOND}", noop: {{}}}}'
    later = "{name: later, start: 1h, noop: {}}"
    slow = '{name: slow, schedule: "0 0 12 * * *", noop: {}}'
    slow_changed = '{name: slow, schedule: "0 30 12 * * *", noop: {}}'
    jobs = ("proj/fast", "proj/later", "proj/slow")

    def snapshot() -> dict[str, tuple[Any, ...]]:
        pages = {job: cronq.show(job) for job in jobs}
        return {
            job: (p["next_run"], p["counters"], p["start"], p["spec"]) for job, p in pages.items()
        }

    plan = cronq.apply(job_lines(fast, later, slow))
    assert [c["op"] for c in plan["changes"]] == ["+", "+", "+"]
    before = snapshot()
    scheduled = sorted(cronq.scheduled_tasks())
    assert len(scheduled) == 3  # one armed tick per job

    # The same file again: no change reported, nothing re-armed.
    plan = cronq.apply(job_lines(fast, later, slow))
    assert (plan["changes"], plan["unchanged"], plan["applied"]) == ([], 3, False), plan
    assert snapshot() == before
    assert sorted(cronq.scheduled_tasks()) == scheduled

    # One schedule changed: only that job moves.
    plan = cronq.apply(job_lines(fast, later, slow_changed))
    assert plan["changes"] == [{"op": "~", "job": "proj/slow", "fields": ["schedule"]}], plan
    after = snapshot()
    assert after["proj/fast"] == before["proj/fast"]
    assert after["proj/later"] == before["proj/later"]
    slow_page = cronq.show("proj/slow")
    assert slow_page["counters"]["version"] == before["proj/slow"][1]["version"] + 1
    assert instant(slow_page["next_run"]).strftime("%H:%M:%S") == "12:30:00"

    # One invalid job: nothing applied (not even the valid new job or the valid change), exit 1.
    bad_file = cronq.write_config(
        job_lines(
            fast,
            later,
            slow,  # back to the old schedule: a valid change that must not be applied
            "{name: extra, schedule: '*/5 * * * * *', noop: {}}",
            "{name: bad, schedule: '61 * * * * *', noop: {}}",
        )
    )
    result = cronq.cli("apply", str(bad_file))
    assert result.exit_code == 1, result.stdout
    assert f"{bad_file}:" in result.stderr and "job bad" in result.stderr, result.stderr
    assert "schedule" in result.stderr, result.stderr
    assert sorted(row["id"] for row in cronq.jobs()) == list(jobs)
    assert snapshot() == after

    # Re-applying while a worker runs the jobs adds no run and loses none.
    with cronq.running(1):
        wait_until(lambda: len(cronq.runs("proj/fast")) >= 2, timeout=5, what="fast to run")
        for _ in range(3):
            plan = cronq.apply(job_lines(fast, later, slow_changed))
            assert plan["changes"] == [], plan
            time.sleep(0.7)
        wait_until(lambda: len(cronq.runs("proj/fast")) >= 5, timeout=5, what="more runs")
    assert cronq.failed_tasks() == []
    runs = cronq.runs("proj/fast")
    assert statuses(runs) == {"SUCCEEDED": len(runs)}, runs
    assert set(seconds_between(runs)) == {1.0}, runs
    assert cronq.runs("proj/slow") == [] and cronq.runs("proj/later") == []


# -- 6. workers killed mid-task ------------------------------------------------------------------

KILL_ROUNDS = 3
KILL_JOBS = 10


def every_second_jobs(names: list[str], target: str = "{}") -> str:
    return job_lines(*(f'{{name: {n}, schedule: "{EVERY_SECOND}", noop: {target}}}' for n in names))


def runs_since(cronq: Cronq, job_ids: list[str], moment: float) -> set[str]:
    """The jobs with a run scheduled at or after `moment` (epoch seconds)."""
    return {
        job_id
        for job_id in job_ids
        if any(
            instant(e["scheduled_for"]).timestamp() >= moment
            for e in cronq.runs(job_id, "SUCCEEDED")
        )
    }


def jobs_of_tasks(job_ids: list[str], task_ids: list[str]) -> set[str]:
    """The jobs these cronq task ids belong to (a task id carries a digest of its job id)."""
    digests = {task_id.split("-")[2] for task_id in task_ids}
    return {j for j in job_ids if engine_task_id("t", j, 0).split("-")[2] in digests}


def stuck_jobs(cronq: Cronq, job_ids: list[str], before: float) -> set[str]:
    """Jobs with a run that started before `before` and is still STARTING or RUNNING: a run
    killed inside its target, which only the watchdog can end."""
    return {
        job_id
        for job_id in job_ids
        for run in cronq.show(job_id)["active"]
        if instant(run["started_at"]).timestamp() < before
    }


def test_killed_workers_cause_no_duplicate_runs(cronq: Cronq) -> None:
    """SIGKILL a worker in the middle of a task, at random moments (once the worker releasing
    ticks, otherwise one that is not), enqueue again what it had in flight (as RQ's retry or an
    operator would), and start a replacement each time.

    A worker takes tasks in batches, so a kill can hit several jobs: a start killed inside its
    target leaves the invocation STARTING until the watchdog (not run here) times it out. Only
    jobs with a task in flight on a killed worker may be stuck; no run may happen twice, and
    every other job must go on firing.
    """
    rng = random.Random()
    seed = rng.randrange(1_000_000)
    rng.seed(seed)
    job_ids = [f"proj/k{i:02d}" for i in range(KILL_JOBS)]
    cronq.start_workers(2)
    # A 100 ms target keeps the workers busy half of each second: there is work to interrupt.
    cronq.apply(every_second_jobs([j.split("/")[1] for j in job_ids], "{sleep: 100ms}"))
    time.sleep(2.5)
    kills: list[dict[str, Any]] = []
    for round_number in range(KILL_ROUNDS):
        time.sleep(rng.uniform(0.2, 1.2))
        releasing = cronq.releasing_worker()
        others = [w for w in cronq.workers if w.alive() and w is not releasing]
        victim = releasing if round_number == 1 and releasing else rng.choice(others)
        # Ticks pause while a killed releaser's lock lasts (5 s): wait out that pause too.
        busy = wait_until(
            partial(cronq.in_flight, victim), timeout=8, interval=0.002, what="a task"
        )
        victim.kill()
        lost = cronq.in_flight(victim)
        kills.append({"at": time.time(), "worker": victim.name, "busy": busy, "redelivered": lost})
        cronq.redeliver(lost)
        cronq.start_worker()
    last_kill = kills[-1]["at"]
    context = f"seed {seed}, kills {kills}"

    def stuck() -> set[str]:
        return stuck_jobs(cronq, job_ids, last_kill)

    # A killed releaser's lock outlives it by up to 5 s (LOCK_TTL), then late ticks catch up.
    def firing() -> set[str]:
        """The jobs firing after the last kill, once every job is either firing or stuck."""
        recent = runs_since(cronq, job_ids, last_kill + 2)
        return recent if recent | stuck() == set(job_ids) else set()

    # 15 s timed out in 2 runs of about 45, each time with a kill just before a killed
    # releaser's lock expired; the one time it was looked at, every job was firing or stuck a
    # moment later. Why recovery took that long is not known: the message below says how the
    # jobs stand when the wait gives up.
    try:
        fired = wait_until(
            firing, timeout=30, interval=0.5, what=f"every job not hit to keep firing ({context})"
        )
    except AssertionError as exc:  # say how the jobs that are neither firing nor stuck stand
        idle = set(job_ids) - runs_since(cronq, job_ids, last_kill + 2) - stuck()
        states = {job_id: (cronq.show(job_id), cronq.history(job_id)[:3]) for job_id in idle}
        raise AssertionError(f"{exc}; now {time.time()}; idle: {states}") from None
    cronq.stop_workers()

    hit = jobs_of_tasks(job_ids, [t for kill in kills for t in kill["busy"] + kill["redelivered"]])
    assert stuck() <= hit, context
    assert fired >= set(job_ids) - hit, context
    everything = [e for job_id in job_ids for e in cronq.runs(job_id)]
    done = [e for e in everything if e["status"] in ("SUCCEEDED", "FAILED")]
    assert duplicates(done, "job", "scheduled_for") == [], context
    assert duplicates(everything, "job", "scheduled_for", "attempt") == [], context


def test_ticks_delayed_by_a_releaser_failover_are_caught_up_tick_by_tick(cronq: Cronq) -> None:
    """DESIGN §2 / docs/state-machine.md: a tick processed within misfire_grace (60 s) of its time
    is merely late, and the chain catches up tick by tick. When the worker releasing ticks dies,
    ticks wait up to LOCK_TTL (5 s) for another worker to take over; then every late second must
    still run once, not be recorded as an OVERRUN of a run that itself only started late.

    Runs take 300 ms, so while catching up, a second's run is still going when another worker
    takes the next second's tick (with one worker, tasks run in order and the race is hidden)."""
    job_ids = [f"proj/c{i}" for i in range(3)]
    cronq.start_workers(2)
    cronq.apply(every_second_jobs([j.split("/")[1] for j in job_ids], "{sleep: 300ms}"))
    time.sleep(2.5)
    releasing = cronq.releasing_worker()
    assert releasing is not None

    # Kill it between runs if possible, so that no run is left stuck (one may be, if not): runs
    # take 300 ms of every second, and targets run after their batch has left the in-progress
    # list, so "idle" means no task in progress and no job with an active invocation.
    def idle() -> bool:
        if cronq.in_flight(releasing):
            return False
        jobs = [load_job(cronq.connection, cronq.keys, job_id) for job_id in job_ids]
        return not any(job and job.state.active for job in jobs)

    wait_until(idle, timeout=3, interval=0.002, what="idle")
    releasing.kill()
    killed = time.time()
    cronq.start_worker()

    def caught_up() -> bool:
        fired = runs_since(cronq, job_ids, killed + 8)
        return fired | stuck_jobs(cronq, job_ids, killed) == set(job_ids)

    wait_until(caught_up, timeout=15, interval=0.5, what="every job to fire again")
    cronq.stop_workers()

    hit = stuck_jobs(cronq, job_ids, killed)
    assert len(hit) <= 1, hit
    report = {}
    for job_id in set(job_ids) - hit:
        entries = cronq.runs(job_id)
        gaps = seconds_between([e for e in entries if e["status"] == "SUCCEEDED"])
        if statuses(entries)["OVERRUN"] or set(gaps) != {1.0}:
            report[job_id] = [
                f"{e['scheduled_for'][11:19]} {e['status']} {(e['started_at'] or '')[11:23]}"
                for e in entries
            ]
    lines = [f"{job_id}: {', '.join(entries)}" for job_id, entries in sorted(report.items())]
    assert not report, "late ticks not run (OVERRUN instead), killed at {}:\n{}".format(
        time.strftime("%H:%M:%S", time.gmtime(killed)), "\n".join(lines)
    )
