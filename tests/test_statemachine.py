"""Every transition of the job state machine, with a fake clock and counting nonces."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronq.policies import Misfire, Overlap
from cronq.statemachine import (
    Abort,
    AbortInvocation,
    Disable,
    Finish,
    InvocationDone,
    InvocationStarted,
    InvocationStarting,
    InvocationStatus,
    JobStateName,
    Pause,
    RecordInvocation,
    RecordOverrun,
    RecordSkip,
    Rejected,
    Repair,
    Resume,
    SpecChanged,
    StartInvocation,
    TickLater,
    TimerTick,
    TriggerNow,
    WatchdogFired,
    WatchdogReport,
)
from tests.machine_harness import T0, Job, rules

S = InvocationStatus
OK, FAILED = S.SUCCEEDED, S.FAILED


def statuses(job: Job) -> list[str]:
    return [a.status.value for a in job.log if isinstance(a, RecordInvocation)]


# -- the basic life: SCHEDULED -> QUEUED -> RUNNING -> SCHEDULED ------------------------------


def test_enable_arms_the_first_tick_after_now() -> None:
    job = Job(rules("@every 10s"))
    actions = job.enable()
    assert job.state.name is JobStateName.SCHEDULED
    assert actions == (TickLater(T0 + timedelta(seconds=10), 1),)
    assert job.state.watchdog_at == T0 + timedelta(seconds=10)


def test_a_tick_queues_a_start_and_arms_the_next_tick_from_virtual_time() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    job.advance(13)  # the worker got to it late: the next tick still counts from 00:10
    actions = job.tick()
    tick_at = T0 + timedelta(seconds=10)
    assert job.state.name is JobStateName.QUEUED
    assert actions == (
        StartInvocation(2, tick_at, 1, T0 + timedelta(seconds=13)),
        TickLater(T0 + timedelta(seconds=20), 3),
    )


def test_start_commits_starting_then_running_then_the_outcome() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    job.tick()
    invocation_id = job.begin()
    assert job.state.name is JobStateName.RUNNING
    job.send(InvocationStarted(invocation_id))
    job.finish(invocation_id, after=2)
    assert job.state.name is JobStateName.SCHEDULED
    assert statuses(job) == ["STARTING", "RUNNING", "SUCCEEDED"]
    done = [a for a in job.log if isinstance(a, RecordInvocation)][-1]
    assert done.scheduled_for == T0 + timedelta(seconds=10)
    assert done.finished_at == T0 + timedelta(seconds=12)


def test_a_schedule_that_never_fires_finishes_at_once() -> None:
    job = Job(rules("0 0 31 2 *"))
    actions = job.enable()
    assert job.state.name is JobStateName.FINISHED
    assert [type(a) for a in actions] == [Finish]


def test_a_triggered_job_waits_without_a_tick_and_runs_when_triggered() -> None:
    job = Job(rules("triggered"))
    assert job.enable() == ()
    assert job.state.name is JobStateName.SCHEDULED and job.state.tick is None
    job.send(TriggerNow())
    job.run()
    assert statuses(job)[-1] == "SUCCEEDED"
    assert job.state.name is JobStateName.SCHEDULED


# -- nonces make duplicates harmless -----------------------------------------------------------


def test_a_stale_or_duplicate_tick_changes_nothing() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    nonce = job.state.tick.nonce if job.state.tick else -1
    job.tick()
    before = job.state
    assert job.send(TimerTick(nonce)) == ()  # delivered twice
    assert job.send(TimerTick(999)) == ()  # never armed
    assert job.state == before


def test_a_duplicate_start_task_starts_nothing_more() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    job.tick()
    nonce = job.state.pending[0].nonce
    job.send(InvocationStarting(nonce, "first"))
    before = job.state
    assert job.send(InvocationStarting(nonce, "second")) == ()
    assert job.state == before and [a.id for a in job.state.active] == ["first"]


def test_late_outcome_of_an_invocation_already_ended_is_ignored() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    job.tick()
    invocation_id = job.run()
    before = job.state
    assert job.send(InvocationDone(invocation_id, FAILED, "late")) == ()
    assert job.send(InvocationStarted(invocation_id)) == ()
    assert job.state == before


# -- overlap -----------------------------------------------------------------------------------


def test_overlap_skip_records_an_overrun_and_keeps_one_run() -> None:
    job = Job(rules("@every 2s", overlap=Overlap.SKIP))
    job.enable()
    job.tick()
    invocation_id = job.begin()
    actions = job.tick()
    assert job.state.name is JobStateName.OVERRUN
    assert RecordOverrun(T0 + timedelta(seconds=4)) in actions
    assert job.state.current == 1
    job.finish(invocation_id)
    assert job.state.name is JobStateName.SCHEDULED and job.state.overruns == 0


def test_overlap_queue_runs_ticks_back_to_back_up_to_max_pending() -> None:
    job = Job(rules("@every 2s", overlap=Overlap.QUEUE, max_pending=2))
    job.enable()
    job.tick()
    first = job.begin()
    for _ in range(3):
        job.tick()
    assert [d.scheduled_for for d in job.state.backlog] == [
        T0 + timedelta(seconds=4),
        T0 + timedelta(seconds=6),
    ]
    assert any(isinstance(a, RecordSkip) and "queue full" in a.reason for a in job.log)
    job.finish(first)
    assert job.state.pending[0].scheduled_for == T0 + timedelta(seconds=4)
    job.run()
    assert job.state.pending[0].scheduled_for == T0 + timedelta(seconds=6)


def test_overlap_allow_runs_alongside_up_to_max_concurrent() -> None:
    job = Job(rules("@every 2s", overlap=Overlap.ALLOW, max_concurrent=2))
    job.enable()
    job.tick()
    job.begin()
    job.tick()
    job.begin()
    assert len(job.state.active) == 2
    actions = job.tick()
    assert any(isinstance(a, RecordOverrun) for a in actions)
    assert job.state.current == 2


def test_overlap_replace_aborts_the_active_run_and_starts_the_new_one() -> None:
    job = Job(rules("@every 2s", overlap=Overlap.REPLACE))
    job.enable()
    job.tick()
    old = job.begin()
    actions = job.tick()
    assert AbortInvocation(old) in actions
    assert statuses(job)[-1] == "ABORTED"
    assert len(job.state.pending) == 1 and not job.state.active
    assert job.send(InvocationDone(old, OK)) == ()  # the aborted run's late report


# -- failure policies (seeds/004) --------------------------------------------------------------


def attempts_for_first_tick(job: Job) -> list[int]:
    first = job.starts()[0].scheduled_for
    return [s.attempt for s in job.starts() if s.scheduled_for == first]


@pytest.mark.parametrize(
    ("failure", "attempts"),
    [
        ("drop", [1]),
        ({"constant": {"delay": "1s", "max_retries": 1}}, [1, 2]),
        ({"constant": {"delay": "1s", "max_retries": 2}}, [1, 2, 3]),
        ({"exponential": {"initial": "1s", "max_retries": 3}}, [1, 2, 3, 4]),
        ({"cron": {"schedule": "* * * * * *", "max_retries": 2}}, [1, 2, 3]),
    ],
)
def test_a_failing_target_gets_max_retries_plus_one_attempts(
    failure: object, attempts: list[int]
) -> None:
    job = Job(rules("@every 1h", failure=failure))
    job.enable()
    job.tick()
    while job.state.pending:
        job.run(FAILED)
    assert attempts_for_first_tick(job) == attempts
    assert statuses(job).count("FAILED") == len(attempts)


def test_retry_times_count_from_the_virtual_time_of_the_last_attempt() -> None:
    job = Job(
        rules(
            "@every 1h",
            failure={"exponential": {"initial": "2s", "multiplier": 3, "max_retries": 3}},
        )
    )
    job.enable()
    job.tick()
    tick_at = T0 + timedelta(hours=1)
    while job.state.pending:
        job.run(FAILED, after=0.5)
    assert [s.at for s in job.starts()][1:] == [
        tick_at + timedelta(seconds=2),
        tick_at + timedelta(seconds=2 + 6),
        tick_at + timedelta(seconds=2 + 6 + 18),
    ]


def test_retries_stop_when_the_target_succeeds() -> None:
    job = Job(rules("@every 1h", failure={"constant": {"delay": "1s", "max_retries": 5}}))
    job.enable()
    job.tick()
    job.run(FAILED)
    job.run(OK)
    assert attempts_for_first_tick(job) == [1, 2]
    assert not job.state.pending


def test_endless_retries_end_when_the_next_tick_arrives() -> None:
    job = Job(rules("@every 10s", failure={"constant": {"delay": "4s"}}))
    job.enable()
    job.tick()
    while job.state.pending:
        job.run(FAILED)
    # attempts at 10s, 14s, 18s; the one at 22s would pass the tick at 20s, so it is not queued
    assert attempts_for_first_tick(job) == [1, 2, 3]
    assert not job.state.pending


def test_a_pending_endless_retry_is_superseded_by_the_next_tick() -> None:
    job = Job(rules("@every 10s", failure={"constant": {"delay": "9s"}}))
    job.enable()
    job.tick()
    job.run(FAILED)  # retry due at 19s, queued as a delayed start
    assert job.state.pending[0].attempt == 2
    job.at(T0 + timedelta(seconds=20))
    actions = job.tick()
    assert any(isinstance(a, RecordSkip) and "retry abandoned" in a.reason for a in actions)
    assert [p.attempt for p in job.state.pending] == [1]


# -- lifetime (seeds/002) ----------------------------------------------------------------------


def test_repeats_three_gives_exactly_three_triggers_then_finished() -> None:
    job = Job(rules("@every 10s", repeats=3))
    job.enable()
    while job.state.tick is not None:
        job.tick()
        job.run()
    assert len(job.starts()) == 3
    assert job.state.name is JobStateName.FINISHED
    assert isinstance(job.log[-1], Finish)


def test_start_zero_with_every_hour_fires_at_once_but_every_hour_alone_does_not() -> None:
    with_start = Job(rules("@every 1h", start=T0))
    alone = Job(rules("@every 1h"))
    assert with_start.enable() == (TickLater(T0, 1),)
    assert alone.enable() == (TickLater(T0 + timedelta(hours=1), 1),)


def test_a_one_shot_job_fires_once_and_finishes() -> None:
    at = T0 + timedelta(minutes=5)
    job = Job(rules(None, start=at))
    job.enable()
    job.tick()
    assert job.state.tick is None
    job.run()
    assert len(job.starts()) == 1
    assert job.state.name is JobStateName.FINISHED


def test_a_failing_one_shot_job_retries_before_it_finishes() -> None:
    job = Job(rules(None, start=T0, failure={"constant": {"delay": "1s", "max_retries": 1}}))
    job.enable()
    job.tick()
    job.run(FAILED)
    assert job.state.name is JobStateName.QUEUED
    job.run(FAILED)
    assert job.state.name is JobStateName.FINISHED


def test_until_ends_a_job() -> None:
    job = Job(rules("@every 10s", until=T0 + timedelta(seconds=25)))
    job.enable()
    while job.state.tick is not None:
        job.tick()
        job.run()
    assert [s.scheduled_for for s in job.starts()] == [T0 + timedelta(seconds=s) for s in (10, 20)]
    assert job.state.name is JobStateName.FINISHED
    assert "until" in (job.state.finished_reason or "")


def test_finished_is_final() -> None:
    job = Job(rules(None, start=T0))
    job.enable()
    job.tick()
    job.run()
    finished = job.state
    for event in (TriggerNow(), Pause("x"), Resume(), Abort(), SpecChanged(), Disable()):
        actions = job.send(event)
        assert job.state == finished
        assert all(isinstance(a, Rejected) for a in actions)


# -- misfire -----------------------------------------------------------------------------------


def outage(misfire: Misfire, **more: object) -> Job:
    """An every-minute job whose tick is processed an hour late."""
    job = Job(rules("* * * * *", misfire=misfire, **more))
    job.enable()
    job.at(T0 + timedelta(hours=1, seconds=30))
    job.tick()
    return job


def test_misfire_coalesce_runs_once_then_resumes_from_now() -> None:
    job = outage(Misfire.COALESCE)
    assert [s.scheduled_for for s in job.starts()] == [T0 + timedelta(minutes=1)]
    skip = next(a for a in job.log if isinstance(a, RecordSkip))
    assert skip.count == 59 and "coalesced" in skip.reason
    assert job.state.tick is not None and job.state.tick.at == T0 + timedelta(hours=1, minutes=1)


def test_misfire_skip_drops_what_is_later_than_the_grace() -> None:
    job = outage(Misfire.SKIP, misfire_grace=timedelta(seconds=10))
    assert job.starts() == []
    skip = next(a for a in job.log if isinstance(a, RecordSkip))
    assert skip.count == 60 and skip.scheduled_for == T0 + timedelta(minutes=1)


def test_misfire_skip_runs_the_latest_fire_time_still_within_grace() -> None:
    job = outage(Misfire.SKIP, misfire_grace=timedelta(seconds=45))
    assert [s.scheduled_for for s in job.starts()] == [T0 + timedelta(hours=1)]


def test_misfire_catch_up_runs_every_missed_tick_one_after_another() -> None:
    job = outage(Misfire.CATCH_UP, max_catch_up=5)
    assert len(job.starts()) == 1
    assert [d.scheduled_for for d in job.state.backlog] == [
        T0 + timedelta(minutes=m) for m in (2, 3, 4, 5)
    ]
    skip = next(a for a in job.log if isinstance(a, RecordSkip))
    assert skip.count == 55 and "max_catch_up" in skip.reason
    while job.state.pending:
        job.run()
    assert [s.scheduled_for for s in job.starts()] == [
        T0 + timedelta(minutes=m) for m in range(1, 6)
    ]


def test_a_tick_late_within_the_grace_is_not_a_misfire() -> None:
    job = Job(rules("* * * * * *", misfire=Misfire.COALESCE))
    job.enable()
    job.at(T0 + timedelta(seconds=3))  # three ticks due; each still runs, in order
    for expected in (1, 2, 3):
        job.tick()
        job.run()
        assert job.starts()[-1].scheduled_for == T0 + timedelta(seconds=expected)


# -- operator actions --------------------------------------------------------------------------


def test_pause_disarms_and_resume_continues_from_now_without_a_storm() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    stale = job.state.tick.nonce if job.state.tick else -1
    job.send(Pause("maintenance"))
    assert job.state.name is JobStateName.SUSPENDED and job.state.paused_reason == "maintenance"
    job.advance(95)
    assert job.send(TimerTick(stale)) == ()
    actions = job.send(Resume())
    assert actions == (TickLater(T0 + timedelta(seconds=100), 3),) or actions == (
        TickLater(T0 + timedelta(seconds=100), 2),
    )
    assert job.starts() == []


def test_pause_lets_the_running_invocation_finish_without_retrying() -> None:
    job = Job(rules("@every 10s", failure={"constant": {"delay": "1s", "max_retries": 3}}))
    job.enable()
    job.tick()
    invocation_id = job.begin()
    job.send(Pause())
    job.finish(invocation_id, FAILED)
    assert statuses(job)[-1] == "FAILED"
    assert job.state.name is JobStateName.SUSPENDED and not job.state.pending


def test_resume_when_not_paused_is_rejected() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    before = job.state
    assert isinstance(job.send(Resume())[0], Rejected)
    assert job.state == before


def test_trigger_runs_now_outside_the_schedule() -> None:
    job = Job(rules("@every 1h"))
    job.enable()
    job.send(TriggerNow())
    assert job.starts()[0].scheduled_for == T0
    job.run()
    assert job.state.triggers == 0  # manual runs do not count towards repeats
    assert job.state.tick is not None


@pytest.mark.parametrize("overlap", [Overlap.SKIP, Overlap.ALLOW])
def test_trigger_while_busy_is_refused_when_overlap_forbids_it(overlap: Overlap) -> None:
    job = Job(rules("@every 1h", overlap=overlap, max_concurrent=1))
    job.enable()
    job.send(TriggerNow())
    job.begin()
    before = job.state
    (rejected,) = job.send(TriggerNow())
    assert isinstance(rejected, Rejected) and "busy" in rejected.reason
    assert job.state == before


def test_trigger_while_busy_queues_with_overlap_queue() -> None:
    job = Job(rules("@every 1h", overlap=Overlap.QUEUE))
    job.enable()
    job.send(TriggerNow())
    first = job.begin()
    job.send(TriggerNow())
    assert len(job.state.backlog) == 1
    job.finish(first)
    assert job.state.pending[0].manual


def test_abort_ends_the_active_invocation() -> None:
    job = Job(rules("@every 1h"))
    job.enable()
    job.send(TriggerNow())
    invocation_id = job.begin()
    actions = job.send(Abort("operator"))
    assert AbortInvocation(invocation_id) in actions
    assert statuses(job)[-1] == "ABORTED"
    assert job.state.name is JobStateName.SCHEDULED


def test_abort_with_nothing_running_is_rejected() -> None:
    job = Job(rules("@every 1h"))
    job.enable()
    (rejected,) = job.send(Abort())
    assert isinstance(rejected, Rejected) and "nothing" in rejected.reason


def test_disable_stops_ticks_and_enable_again_carries_on_from_now() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    job.send(Disable())
    assert job.state.name is JobStateName.DISABLED and job.state.tick is None
    for event in (TriggerNow(), Pause()):
        assert isinstance(job.send(event)[0], Rejected)
    job.advance(55)
    job.enable()
    assert job.state.tick is not None and job.state.tick.at == T0 + timedelta(seconds=60)


# -- spec changes ------------------------------------------------------------------------------


def test_an_unchanged_schedule_keeps_its_tick() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    before = job.state
    job.rules = rules("@every 10s", overlap=Overlap.QUEUE)  # a policy change only
    assert job.send(SpecChanged()) == ()
    assert job.state == before


def test_a_changed_schedule_rearms_the_tick_and_stales_the_old_one() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    old = job.state.tick.nonce if job.state.tick else -1
    job.rules = rules("@every 1h")
    job.advance(3)
    (tick,) = job.send(SpecChanged())
    assert isinstance(tick, TickLater)
    assert tick.nonce != old and tick.at == T0 + timedelta(hours=1)
    assert job.send(TimerTick(old)) == ()


# -- the watchdog ------------------------------------------------------------------------------

GRACE = timedelta(seconds=3)


def test_watchdog_rearms_a_lost_tick_with_a_new_nonce() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    lost = job.state.tick.nonce if job.state.tick else -1
    job.advance(20)
    actions = job.send(WatchdogFired(GRACE))
    assert TickLater(T0 + timedelta(seconds=10), 2) in actions
    assert WatchdogReport in [type(a) for a in actions]
    assert job.send(TimerTick(lost)) == ()  # the original, should it come back
    job.tick()
    assert job.starts()[0].scheduled_for == T0 + timedelta(seconds=10)


def test_watchdog_leaves_a_late_but_alive_tick_alone() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    tick = job.state.tick
    job.advance(20)
    assert tick is not None
    (report,) = job.send(WatchdogFired(GRACE, frozenset({tick.nonce})))
    assert isinstance(report, WatchdogReport) and report.repair is Repair.SLOW_TICK
    assert job.state.tick == tick
    # the next look comes a grace later, not on every sweep
    assert job.state.watchdog_at == job.now


def test_watchdog_requeues_a_lost_start() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    job.tick()
    lost = job.state.pending[0]
    job.advance(5)
    actions = job.send(WatchdogFired(GRACE))
    (start,) = [a for a in actions if isinstance(a, StartInvocation)]
    assert start.nonce != lost.nonce and start.scheduled_for == lost.scheduled_for
    assert job.send(InvocationStarting(lost.nonce, "ghost")) == ()


def test_watchdog_times_out_a_running_invocation_whose_worker_died() -> None:
    job = Job(rules("@every 1h", timeout=timedelta(seconds=30)))
    job.enable()
    job.tick()
    invocation_id = job.begin()
    job.advance(31)
    assert job.send(WatchdogFired(GRACE)) == ()  # within timeout plus grace
    job.advance(5)
    actions = job.send(WatchdogFired(GRACE))
    assert statuses(job)[-1] == "TIMED_OUT"
    assert any(isinstance(a, WatchdogReport) and a.repair is Repair.TIMED_OUT for a in actions)
    assert job.state.name is JobStateName.SCHEDULED and job.state.tick is not None
    assert job.send(InvocationDone(invocation_id, OK)) == ()


def test_watchdog_with_nothing_lapsed_changes_nothing() -> None:
    job = Job(rules("@every 10s"))
    job.enable()
    before = job.state
    assert job.send(WatchdogFired(GRACE)) == ()
    assert job.state == before


def test_watchdog_deadline_follows_the_earliest_expected_task() -> None:
    job = Job(rules("@every 10s", timeout=timedelta(seconds=60)))
    job.enable()
    assert job.state.watchdog_at == T0 + timedelta(seconds=10)
    job.tick()
    assert job.state.watchdog_at == T0 + timedelta(seconds=10)  # the start, due now
    job.begin()
    assert job.state.watchdog_at == T0 + timedelta(seconds=20)  # the next tick
    job.send(Pause())
    assert job.state.watchdog_at == T0 + timedelta(seconds=70)  # only the running invocation


def test_a_job_behind_schedule_catches_up_instead_of_overrunning() -> None:
    """Two workers after a failover: tick 11 s arrives while the run for 10 s has not started
    (or started only after 11 s). At 11 s nothing was running: the job is behind, not busy."""
    job = Job(rules("* * * * * *", overlap=Overlap.SKIP))
    job.enable()
    job.at(T0 + timedelta(seconds=5))
    job.tick()  # the tick for 1 s, four seconds late
    job.tick()  # the tick for 2 s, taken by a second worker while the start for 1 s waits
    assert not any(isinstance(a, RecordOverrun) for a in job.log)
    assert [d.scheduled_for for d in job.state.backlog] == [T0 + timedelta(seconds=2)]
    first = job.begin()  # starts at 5 s, after the 2 s tick's own time
    job.tick()  # the tick for 3 s: still behind
    job.finish(first)
    job.run()
    assert [s.scheduled_for for s in job.starts()] == [T0 + timedelta(seconds=n) for n in (1, 2, 3)]


def test_a_late_run_that_would_have_overlapped_anyway_still_overruns() -> None:
    """Behind schedule, the tick for 2 s waits for the run for 1 s. That run then takes 1.5 s:
    on time it would have covered 2 s too, so with overlap=skip the 2 s fire is an OVERRUN."""
    job = Job(rules("* * * * * *", overlap=Overlap.SKIP))
    job.enable()
    job.at(T0 + timedelta(seconds=5))
    job.tick()
    job.tick()
    job.tick()  # 1 s starts, 2 s and 3 s wait
    first = job.begin()
    job.finish(first, after=1.5)  # virtually 1 s .. 2.5 s
    assert RecordOverrun(T0 + timedelta(seconds=2)) in job.log
    assert job.state.pending[0].scheduled_for == T0 + timedelta(seconds=3)


@pytest.mark.parametrize(
    ("reported", "recorded"),
    [(3, 3), (9, 5), (-1, 0), (None, 5)],  # seconds after the start; the outcome comes at 5 s
    ids=["as reported", "not after the step", "not before the start", "the step's time"],
)
def test_an_outcome_reported_late_keeps_the_time_the_run_ended(
    reported: float | None, recorded: float
) -> None:
    """An RQ job's outcome reaches the machine in a report task that may wait for a batch: the
    history keeps the time in the report, within what the job's own record allows."""
    job = Job(rules("@every 10s"))
    job.enable()
    job.tick()
    invocation_id = job.begin()
    job.send(InvocationStarted(invocation_id))
    started = job.now
    job.advance(5)
    ended = None if reported is None else started + timedelta(seconds=reported)
    (record,) = [
        a
        for a in job.send(InvocationDone(invocation_id, OK, None, ended))
        if isinstance(a, RecordInvocation)
    ]
    assert record.finished_at == started + timedelta(seconds=recorded)
