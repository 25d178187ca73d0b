"""Workload 5 (DST): a daily 01:30 and a daily 02:30 job in America/New_York across both 2026
transitions, driven by each system's OWN schedule computation on a fake clock. No processes, no
Redis (nothing here connects to one).

    python benchmarks/peers/dst.py [--rq-scheduler-interval 60] [--json OUT]

Transitions: 2026-03-08 02:00 EST -> 03:00 EDT (02:00-02:59 skipped) and 2026-11-01 02:00 EDT ->
01:00 EST (01:00-01:59 repeated). For each system, job and transition the fake clock runs from
00:00 the day before the transition day to 00:00 two days after; runs are counted per local day
for the day before, the transition day and the day after. The reference is the Vixie-cron rule
(cronq's DESIGN §4): a fixed time in a skipped hour runs once, at the first instant after the gap
(03:00 EDT); a fixed time in a repeated hour runs once, at its first occurrence (01:30 EDT).

How each system is driven (the code paths are the ones its scheduler loop calls):

* cronq: `cronq.schedule.parse_schedule("30 1 * * *", zone).next_after(t)`, iterated (the state
  machine arms each next tick with it: `Rules.next_fire`). The job's own zone.
* `rq cron` (RQ 3): a real `rq.cron.CronScheduler` with one `CronJob(cron=...)`; the loop of
  `CronScheduler.start` (enqueue_jobs, calculate_sleep_interval, sleep) is replayed with
  `rq.cron.now` patched to the fake clock and `CronJob.enqueue` recording instead of enqueuing.
  Cron fields match the PROCESS's local zone (`CronJob.get_next_enqueue_time`:
  `base_time.astimezone()`): there is no per-job zone, so this script sets TZ=America/New_York
  and calls time.tzset() before importing anything.
* rq-scheduler: `rq_scheduler.utils.get_next_scheduled_time(cron)` with its module's `datetime`
  patched so `datetime.now()` is the fake clock (naive local wall time, TZ as above); it computes
  the next time with the `crontab` package on the naive wall clock and converts it with
  `.astimezone()`, which reads the naive time in the local zone (use_local_timezone only changes
  how the result is labelled). The loop of `Scheduler.run` is replayed: every --interval seconds
  (rqscheduler's default 60 s; clock aligned to whole minutes) the job is enqueued if its score
  `to_unix(next)` is at or before now, and re-armed then from `datetime.now()`
  (`Scheduler.enqueue_job`): a next time in the past is enqueued again at the next poll. Local
  zone only, no per-job zone.
* APScheduler 3: `CronTrigger(hour=1, minute=30, timezone=zone).get_next_fire_time(previous,
  now)`, iterated as `BaseScheduler._process_jobs` does (the run time is the fire time; the next
  one is computed from it, with now = fire time + 10 ms).
* celery-redbeat: a `RedBeatSchedulerEntry` with Celery's `crontab(minute=30, hour=1)`, app
  timezone America/New_York, `app.now` patched to the fake clock. A beat loop is replayed:
  `last_run_at` goes through RedBeat's JSON encoder and decoder each tick (RedBeat reloads
  entries from Redis every tick, `RedBeatScheduler.schedule`; its encoder keeps the zone name but
  not `fold`), the entry is only looked at once its score (`due_at`) is at most now + max
  interval, `is_due()` decides, a due entry gets `last_run_at = now` (Celery's
  `ScheduleEntry._next_instance`), and the loop sleeps min(next, 5 s).
"""

from __future__ import annotations

import os
import time

os.environ["TZ"] = "America/New_York"  # rq cron and rq-scheduler evaluate cron in the local zone
time.tzset()

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from datetime import date, datetime, timedelta, timezone  # noqa: E402
from zoneinfo import ZoneInfo  # noqa: E402

ZONE_NAME = "America/New_York"
ZONE = ZoneInfo(ZONE_NAME)
UTC = timezone.utc
TRANSITIONS = {"spring": date(2026, 3, 8), "fall": date(2026, 11, 1)}
JOBS = {"01:30": (1, 30), "02:30": (2, 30)}
SYSTEMS = ("cronq", "rq-cron", "rq-scheduler", "apscheduler", "redbeat")
EPSILON = timedelta(milliseconds=10)  # a scheduler wakes a little after the time it slept to
BEAT_MAX_INTERVAL = 5.0
# rqscheduler's --interval: its default 60 s (the harness runs it at 0.1 s); --rq-scheduler-interval
SETTINGS = {"rq_scheduler_interval": 60.0}

Runner = Callable[[int, int, datetime, datetime], list[datetime]]


def local_midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=ZONE).astimezone(UTC)


# -- one function per system: (hour, minute, start, end) -> run instants (aware, UTC) ------------


def runs_cronq(hour: int, minute: int, start: datetime, end: datetime) -> list[datetime]:
    from cronq.schedule import parse_schedule

    schedule = parse_schedule(f"{minute} {hour} * * *", ZONE_NAME)
    runs, moment = [], start
    while (moment := schedule.next_after(moment)) is not None and moment < end:
        runs.append(moment.astimezone(UTC))
    return runs


def runs_rq_cron(hour: int, minute: int, start: datetime, end: datetime) -> list[datetime]:
    import redis
    import rq.cron as rq_cron

    clock = [start]
    runs: list[datetime] = []
    original_now, original_enqueue = rq_cron.now, rq_cron.CronJob.enqueue
    rq_cron.now = lambda: clock[0]
    rq_cron.CronJob.enqueue = lambda job, connection: runs.append(clock[0])  # type: ignore[method-assign]
    try:
        # A Redis client connects lazily; nothing below sends a command.
        scheduler = rq_cron.CronScheduler(connection=redis.Redis(port=1), name="dst")
        scheduler.register(print, queue_name="dst", cron=f"{minute} {hour} * * *")
        while clock[0] < end:
            scheduler.enqueue_jobs()
            sleep = scheduler.calculate_sleep_interval()
            clock[0] += timedelta(seconds=sleep) + EPSILON
    finally:
        rq_cron.now, rq_cron.CronJob.enqueue = original_now, original_enqueue  # type: ignore[method-assign]
    return [r.astimezone(UTC) for r in runs if r < end]


def runs_rq_scheduler(hour: int, minute: int, start: datetime, end: datetime) -> list[datetime]:
    import rq_scheduler.utils as rq_utils

    clock = [start]

    class FakeDatetime(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            moment = clock[0].astimezone(tz) if tz else clock[0].astimezone()
            return moment if tz else moment.replace(tzinfo=None)  # naive local, as datetime.now()

    original = rq_utils.datetime
    rq_utils.datetime = FakeDatetime  # type: ignore[misc]
    cron, runs = f"{minute} {hour} * * *", []
    try:
        due = rq_utils.to_unix(rq_utils.get_next_scheduled_time(cron))  # Scheduler.cron
        clock[0] = start + EPSILON
        while clock[0] < end:  # Scheduler.run: one enqueue_jobs per --interval
            if due <= clock[0].timestamp():  # get_jobs_to_queue: score <= now
                runs.append(clock[0])
                due = rq_utils.to_unix(rq_utils.get_next_scheduled_time(cron))  # enqueue_job
            clock[0] += timedelta(seconds=SETTINGS["rq_scheduler_interval"])
    finally:
        rq_utils.datetime = original  # type: ignore[misc]
    return runs


def runs_apscheduler(hour: int, minute: int, start: datetime, end: datetime) -> list[datetime]:
    from apscheduler.triggers.cron import CronTrigger

    trigger = CronTrigger(hour=hour, minute=minute, timezone=ZONE)
    runs = []
    fire = trigger.get_next_fire_time(None, start.astimezone(ZONE))
    while fire is not None and fire < end:
        runs.append(fire.astimezone(UTC))
        now = (fire.astimezone(UTC) + EPSILON).astimezone(ZONE)  # arithmetic in UTC
        fire = trigger.get_next_fire_time(fire, now)
    return runs


def runs_redbeat(hour: int, minute: int, start: datetime, end: datetime) -> list[datetime]:
    from celery import Celery
    from celery.schedules import crontab
    from redbeat.decoder import RedBeatJSONDecoder, RedBeatJSONEncoder
    from redbeat.schedulers import RedBeatSchedulerEntry

    clock = [start]  # UTC: aware arithmetic in a zone is wall-clock arithmetic
    app = Celery("dst", set_as_current=False)
    app.conf.timezone = ZONE_NAME
    app.now = lambda: clock[0].astimezone(app.timezone)  # type: ignore[method-assign]
    entry = RedBeatSchedulerEntry(
        name="dst", task="dst.noop", schedule=crontab(minute=minute, hour=hour, app=app), app=app
    )
    last_run_at = app.now()  # as if beat had been running: it last ran at the start
    runs = []
    while clock[0] < end:
        stored = json.dumps({"last_run_at": last_run_at}, cls=RedBeatJSONEncoder)
        entry.last_run_at = json.loads(stored, cls=RedBeatJSONDecoder)["last_run_at"]
        due_at = entry.due_at
        sleep = BEAT_MAX_INTERVAL
        if due_at is not None and due_at.timestamp() <= clock[0].timestamp() + BEAT_MAX_INTERVAL:
            due, next_time = entry.is_due()
            if due:
                runs.append(clock[0].astimezone(UTC))
                last_run_at = app.now()
            sleep = min(next_time, BEAT_MAX_INTERVAL)
        clock[0] = clock[0] + timedelta(seconds=max(sleep, 0.0)) + EPSILON
    return runs


RUNNERS: dict[str, Runner] = {
    "cronq": runs_cronq,
    "rq-cron": runs_rq_cron,
    "rq-scheduler": runs_rq_scheduler,
    "apscheduler": runs_apscheduler,
    "redbeat": runs_redbeat,
}


# -- the table ----------------------------------------------------------------------------------


def vixie(job: str, transition: str) -> list[str]:
    """Local wall times of the runs on the transition day by the Vixie-cron rule."""
    return {
        ("01:30", "spring"): ["01:30 EST"],
        ("02:30", "spring"): ["03:00 EDT"],
        ("01:30", "fall"): ["01:30 EDT"],
        ("02:30", "fall"): ["02:30 EST"],
    }[(job, transition)]


def wall(moment: datetime) -> str:
    local = moment.astimezone(ZONE)
    text = local.strftime("%H:%M:%S")
    return f"{text.removesuffix(':00')} {local.tzname()}"


def by_day(runs: list[datetime], days: list[date]) -> dict[date, list[datetime]]:
    found: dict[date, list[datetime]] = {day: [] for day in days}
    for run in runs:
        day = run.astimezone(ZONE).date()
        if day in found:
            found[day].append(run)
    return found


def measure() -> list[dict[str, object]]:
    rows = []
    for system, runner in RUNNERS.items():
        for job, (hour, minute) in JOBS.items():
            for transition, day in TRANSITIONS.items():
                days = [day - timedelta(days=1), day, day + timedelta(days=1)]
                start = local_midnight(day - timedelta(days=1))
                end = local_midnight(day + timedelta(days=2))
                runs = by_day(runner(hour, minute, start, end), days)
                counts = [len(runs[d]) for d in days]
                walls = [wall(r) for r in runs[day]]
                # Seconds dropped: a late wake-up of a few ms is not a different rule.
                plain = [w.split(":")[0] + ":" + w.split(":")[1][:2] + w[-4:] for w in walls]
                expected = vixie(job, transition)
                rows.append(
                    {
                        "system": system,
                        "job": job,
                        "transition": transition,
                        "days": [d.isoformat() for d in days],
                        "runs_per_day": counts,
                        "transition_day_walls": walls,
                        "vixie": expected,
                        "differs": counts != [1, 1, 1] or plain != expected,
                    }
                )
    return rows


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| system | job | transition | runs: day before / day / day after | "
        "wall times on the day | Vixie |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        counts = " / ".join(str(c) for c in row["runs_per_day"])  # type: ignore[attr-defined]
        every: list[str] = row["transition_day_walls"]  # type: ignore[assignment]
        shown = every if len(every) <= 4 else [*every[:2], "...", every[-1]]
        walls = ", ".join(shown) or "none"
        mark = "**differs**" if row["differs"] else "same"
        lines.append(
            f"| {row['system']} | {row['job']} | {row['transition']} {row['days'][1]} | "  # type: ignore[index]
            f"{counts} | {walls} | {mark} ({', '.join(row['vixie'])}) |"  # type: ignore[arg-type]
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rq-scheduler-interval", type=float, default=60.0)
    parser.add_argument("--json", type=argparse.FileType("w"))
    args = parser.parse_args()
    SETTINGS["rq_scheduler_interval"] = args.rq_scheduler_interval
    rows = measure()
    print(table(rows))
    print(
        f"\nTZ={os.environ['TZ']}, python {sys.version.split()[0]}, rqscheduler --interval "
        f"{args.rq_scheduler_interval:g} s, beat max interval {BEAT_MAX_INTERVAL:g} s"
    )
    if args.json:
        json.dump(rows, args.json, indent=1)


if __name__ == "__main__":
    main()
