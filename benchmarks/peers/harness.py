"""Peers harness: the same workload on cronq, `rq cron` (RQ 3), rq-scheduler, APScheduler 3 and
celery-redbeat, each against a fresh server, for the same wall time; every run of the same user
function (`userfunc.record`) is matched to the intended fire time it belongs to.

    python benchmarks/peers/harness.py --system cronq --workload precision [--jobs 100]
        [--duration 120] [--schedulers 1] [--rq-workers 4] [--json OUT]
    python benchmarks/peers/harness.py --system cronq --workload scale [--jobs 10000]
        [--duration 180] [--setup-timeout 300] [--json OUT]
    python benchmarks/peers/harness.py --system cronq --workload downtime [--jobs 20]
        [--up 30] [--down 90] [--after 60] [--misfire coalesce|skip|catch_up]
        [--misfire-grace 60] [--json OUT]

Run it with the peers' own virtualenv (see README.md here). Per run:

1. A fresh valkey-server (`cronq.redis_server.RedisServer`) in a temporary directory, on loopback.
2. The system's setup for N jobs (see `setup_*`), user function `userfunc.record(job)`, firing
   every second (precision, ha, downtime: each system's finest form of "every second") or every
   whole minute (scale: cronq `* * * * *`, `rq cron` `cron="* * * * *"`, rq-scheduler
   `cron("* * * * *")`, APScheduler `CronTrigger(second=0)`, RedBeat `crontab()`).
3. S scheduler processes (S=2 is workload 3) and the consumers: for RQ-based systems R `rq worker
   peers` processes (SimpleWorker), for cronq `cronq worker` processes (its scheduler) plus the
   same R `rq worker peers` processes running the `rq` target's function; celery: a celery worker
   (prefork, R processes); APScheduler runs the function in its own thread pool (not RQ-based, no
   consumer processes: its consumer CPU is in its scheduler CPU).
4. The workload's wall time (below), then the schedulers are stopped (SIGTERM by pid), the
   consumers get time to drain their queue (20 s; scale: --drain-timeout, 180 s), then are stopped.
5. Every (job, intended fire time) in the workload's window is expected once. A run belongs to the
   `scheduled_for` its system passed (cronq), else to the whole second (minute, for scale) at or
   before its start; for scale, an RQ-based peer's run belongs to the minute at or before its RQ
   job's `enqueued_at` instead (start lags can pass a minute with 10,000 runs on 4 workers).
   misses = intended fire times with no run; duplicates = runs beyond the first of one intended
   fire time; lag = start - intended, of the first run; enqueue lag = that run's RQ `enqueued_at`
   - intended (RQ-based systems only). CPU seconds (utime+stime, from /proc) of the scheduler
   processes and of the consumer processes, each with their descendants, read just before they
   are stopped; and of the Redis server (precision, ha: from the schedulers' start to the end
   of the drain; scale: from the consumers' start to the end of the last drain), which serves
   the consumers too, and where a system's Lua scripts run. --json also keeps the raw records
   (`raw`, scale and downtime) for re-analysis.

Workloads:

* precision (1): 100 jobs every second, D = 120 s, one scheduler; window [scheduler start + 5 s,
  stop - 1 s]. ha (3): the same with two scheduler processes, D = 60 s.
* scale (2): N = 10,000 jobs every minute. Setup (bounded by --setup-timeout; a system that cannot
  take N jobs in that time is reported as failed, with how), Redis used_memory measured on the
  empty server, after setup (`mem_setup`), and once the schedulers hold the jobs (`mem_ready`:
  APScheduler and RedBeat store them when their process starts, `rq cron` keeps them in its own
  memory) and before the consumers start; per job = (that - empty) / N. Setup and scheduler start
  happen right after a minute boundary (so no minute fires before the memory is read, unless setup
  takes most of a minute: `queued_at_mem_ready` > 0 says so); the consumers start once the jobs
  are held, and drain what a minute before the window left. The window is the K = D / 60 whole
  minutes from the first one at least 5 s after that; the schedulers run until 55 s after the last
  one (never into the next minute). Figures also per minute: enqueue span (last
  `enqueued_at` - the minute) and start span (last start - the minute); triggers/s = runs of the
  minute / enqueue span, runs/s = runs / start span (median over the minutes); scheduler CPU ms per
  trigger = scheduler CPU / runs enqueued in the scheduler's lifetime.
* downtime (4): N = 20 jobs every second; schedulers up --up s, all stopped (SIGTERM by pid) for
  --down s while the consumers keep running, started again (same commands) for --after s.
  Windows (whole seconds): before [start + 5 s, stop - 1], down [stop, restart - 1], startup
  [restart, restart + 4] (not counted), after [restart + 5, end - 1]. Reported: misses/dups/lag
  before and after; for the down fire times how many got a run and when those runs started
  (relative to the restart); runs started after the restart beyond one per fire time after the
  restart (`late_runs`: catch-up runs; for the peers, which pass no scheduled_for, this is the only
  way their late runs show: they are attributed by start time, so a late run of a down fire time
  counts against the second it started in); the first run of each job after the restart.
  cronq's misfire policy and grace are --misfire and --misfire-grace (APScheduler's
  misfire_grace_time too); the grace must be below --down for the policy to apply.

Everything started is stopped by pid; a run is bounded by its wall time + setup + about 60 s
(scale: + the drain timeout).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

from cronq.redis_server import RedisServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/, for procstat
import procstat
from procstat import children_of, percentile

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
QUEUE = "peers"
WARMUP = 5.0
SYSTEMS = ("cronq", "rq-cron", "rq-scheduler", "apscheduler", "redbeat", "rq-floor")
WORKLOADS = ("precision", "ha", "scale", "downtime")
RQ_BASED = ("cronq", "rq-cron", "rq-scheduler")
MISFIRE = ("coalesce", "skip", "catch_up")


class SetupFailed(Exception):
    """The system could not take the jobs within --setup-timeout (scale)."""


# -- processes ------------------------------------------------------------------------------------


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds of the given processes and their live descendants, together."""
    return sum(procstat.tree_cpu(pids).values())


def stop(processes: list[subprocess.Popen[bytes]], timeout: float = 10) -> None:
    """SIGTERM each by pid (and its descendants after), SIGKILL what is left after timeout."""
    descendants = [c for p in processes if p.poll() is None for c in children_of(p.pid)]
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in processes:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for pid in descendants:
        if Path(f"/proc/{pid}").exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def spawn(command: list[str], env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)


SPAWNED: list[subprocess.Popen[bytes]] = []  # stopped when the run's server is, whatever happened


def spawn_all(
    commands: list[list[str]], env: dict[str, str], work: Path, role: str
) -> list[subprocess.Popen[bytes]]:
    processes = [spawn(c, env, work / f"{role}-{i}.log", work) for i, c in enumerate(commands)]
    SPAWNED.extend(processes)
    return processes


def redis_cpu(args: argparse.Namespace) -> float:
    """CPU seconds the run's Redis server has used: a system can spare its own processes work
    by handing it to the server (Lua), so both are reported."""
    return procstat.cpu_seconds(args.redis_pid)


def stop_measured(processes: list[subprocess.Popen[bytes]]) -> float:
    """CPU seconds of the processes (with descendants) read just before they are stopped."""
    cpu = tree_cpu([p.pid for p in processes]) if processes else 0.0
    stop(processes)
    return cpu


def exits(processes: list[subprocess.Popen[bytes]], role: str) -> dict[str, int | None]:
    """Exit codes of stopped processes, by name."""
    return {f"{role}-{i}": p.returncode for i, p in enumerate(processes)}


def queued(connection: redis.Redis, system: str) -> int:
    """Messages waiting in the consumers' queue (RQ's list; Celery's kombu list for RedBeat)."""
    waiting = connection.llen(f"rq:queue:{QUEUE}")
    return waiting + (connection.llen(QUEUE) if system == "redbeat" else 0)


def drain(connection: redis.Redis, system: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and queued(connection, system):
        time.sleep(0.2)
    time.sleep(2)


def sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


def used_memory(connection: redis.Redis) -> int:
    return int(connection.info("memory")["used_memory"])


def tails(work: Path) -> dict[str, str]:
    return {log.name: log.read_text(errors="replace")[-1500:] for log in sorted(work.glob("*.log"))}


# -- systems --------------------------------------------------------------------------------------
# Each setup_* writes what the system needs and returns (scheduler commands, consumer commands).
# args.every is "second" or "minute" (scale).


def job_names(n: int) -> list[str]:
    return [f"j{i:03d}" for i in range(n)]


def rq_workers(url: str, count: int) -> list[list[str]]:
    return [
        [str(BIN / "rq"), "worker", QUEUE, "--url", url, "-w", "rq.worker.SimpleWorker", "-q"]
        for _ in range(count)
    ]


def setup_cronq(args, url, work, first):
    schedule = "* * * * * *" if args.every == "second" else "* * * * *"
    policy = []
    if args.workload == "downtime":
        policy = [f"    misfire: {args.misfire}", f"    misfire_grace: {args.misfire_grace:g}"]
    if args.overlap:
        policy.append(f"    overlap: {args.overlap}")
    lines = ["project: peers", "jobs:"]
    for name in job_names(args.jobs):
        lines += [
            f"  - name: {name}",
            f'    schedule: "{schedule}"',
            f"    rq: {{func: userfunc.record, queue: {QUEUE}, kwargs: {{job: {name}}}}}",
            *policy,
        ]
    (work / "peers.yaml").write_text("\n".join(lines) + "\n")
    try:
        subprocess.run(
            [str(BIN / "cronq"), "apply", str(work / "peers.yaml"), "--redis-url", url],
            check=True, env=args.env, cwd=work, stdout=subprocess.DEVNULL,
            timeout=args.setup_timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise SetupFailed(f"cronq apply of {args.jobs} jobs > {args.setup_timeout:g} s") from exc
    schedulers = [
        [str(BIN / "cronq"), "worker", "--redis-url", url] for _ in range(args.schedulers)
    ]
    return schedulers, rq_workers(url, args.rq_workers)


def setup_rq_cron(args, url, work, first):
    # croniter's 6-field form: the 6th field is seconds, so this fires at every whole second.
    cron = "* * * * * *" if args.every == "second" else "* * * * *"
    lines = ["from rq.cron import register", "from userfunc import record"]
    for name in job_names(args.jobs):
        lines.append(
            f"register(record, queue_name={QUEUE!r}, kwargs={{'job': {name!r}}}, "
            f"cron={cron!r}, name={name!r})"
        )
    (work / "rq_cron_config.py").write_text("\n".join(lines) + "\n")
    schedulers = [
        [str(BIN / "rq"), "cron", str(work / "rq_cron_config.py"), "--url", url, "-l", "WARNING"]
        for _ in range(args.schedulers)
    ]
    return schedulers, rq_workers(url, args.rq_workers)


def setup_rq_scheduler(args, url, work, first):
    from datetime import datetime, timezone

    from rq_scheduler import Scheduler

    sys.path.insert(0, str(HERE))
    from userfunc import record

    connection = redis.Redis.from_url(url)
    scheduler = Scheduler(queue_name=QUEUE, connection=connection)
    # rq-scheduler works in naive UTC; first fire at the first whole second after the start.
    at = datetime.fromtimestamp(first, timezone.utc).replace(tzinfo=None)
    deadline = time.monotonic() + args.setup_timeout
    for i, name in enumerate(job_names(args.jobs)):
        if args.every == "second":
            # result_ttl left at rq-scheduler's default for periodic jobs (-1: kept): with a
            # shorter one, a job hash expires while the scheduler is down and the job is gone.
            scheduler.schedule(
                scheduled_time=at, func=record, kwargs={"job": name}, interval=1, repeat=None,
                queue_name=QUEUE,
            )  # fmt: skip
        else:
            # rq_scheduler.utils.get_next_scheduled_time: next whole minute (machine local zone).
            scheduler.cron(
                "* * * * *", func=record, kwargs={"job": name}, repeat=None, queue_name=QUEUE
            )  # fmt: skip
        if time.monotonic() > deadline:
            raise SetupFailed(f"rq-scheduler: {i + 1} of {args.jobs} jobs scheduled in time")
    schedulers = [
        [str(BIN / "rqscheduler"), "--url", url, "--interval", str(args.poll)]
        for _ in range(args.schedulers)
    ]
    return schedulers, rq_workers(url, args.rq_workers)


def setup_apscheduler(args, url, work, first):
    args.env["PEERS_FIRST"] = f"{first:.0f}"
    args.env["PEERS_MISFIRE_GRACE"] = f"{args.misfire_grace:g}"
    schedulers = [
        [str(BIN / "python"), str(HERE / "apscheduler_run.py")] for _ in range(args.schedulers)
    ]
    return schedulers, []


def setup_redbeat(args, url, work, first):
    common = ["-A", "celery_app", "--workdir", str(HERE)]
    schedulers = [
        [str(BIN / "celery"), *common, "beat", "-S", "redbeat.RedBeatScheduler",
         "--max-interval", str(max(1, round(args.poll))), "-l", "WARNING",
         "--schedule", str(work / f"beat-{i}")]
        for i in range(args.schedulers)
    ]  # fmt: skip
    consumers = [
        [str(BIN / "celery"), *common, "worker", "-c", str(args.rq_workers), "-l", "WARNING",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-Q", QUEUE]
    ]  # fmt: skip
    return schedulers, consumers


def setup_rq_floor(args, url, work, first):
    """Not a peer: the floor of every RQ-based system (rq_floor.py), precision and ha only."""
    schedulers = [[str(BIN / "python"), str(HERE / "rq_floor.py")] for _ in range(args.schedulers)]
    return schedulers, rq_workers(url, args.rq_workers)


SETUP = {
    "rq-floor": setup_rq_floor,
    "cronq": setup_cronq,
    "rq-cron": setup_rq_cron,
    "rq-scheduler": setup_rq_scheduler,
    "apscheduler": setup_apscheduler,
    "redbeat": setup_redbeat,
}


def jobs_held(connection: redis.Redis, system: str) -> int | None:
    """How many jobs the started scheduler has stored so far, where it stores them when it starts
    (APScheduler's RedisJobStore hash, RedBeat's schedule sorted set); `rq cron` counts as
    holding them all once it has registered itself (it loads its config first); None: the setup
    already stored them (cronq, rq-scheduler)."""
    if system == "apscheduler":
        return int(connection.hlen("apscheduler.jobs"))
    if system == "redbeat":
        return int(connection.zcard("redbeat::schedule"))
    if system == "rq-cron":
        return -1 if not connection.keys("rq:cron_scheduler:*") else None
    return None


def wait_held(connection: redis.Redis, args: argparse.Namespace) -> float:
    """Wait (at least 3 s, at most --setup-timeout) until the schedulers hold all N jobs; the
    seconds it took. SetupFailed if they don't."""
    began = time.monotonic()
    time.sleep(3)
    while True:
        held = jobs_held(connection, args.system)
        if held is None or held >= args.jobs:
            return time.monotonic() - began
        if time.monotonic() - began > args.setup_timeout:
            raise SetupFailed(
                f"{args.system}: schedulers hold {held} of {args.jobs} jobs after "
                f"{args.setup_timeout:g} s"
            )
        time.sleep(0.5)


# -- runs and figures -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
    job: str
    started: float
    scheduled_for: float | None
    enqueued: float | None


def parse(raw: list[bytes]) -> list[Run]:
    """userfunc's "job|start|scheduled_for|enqueued_at" records (older ones have no 4th field)."""
    runs = []
    for item in raw:
        job, started, scheduled, enqueued = ([*item.decode().split("|"), "", ""])[:4]
        runs.append(
            Run(
                job,
                float(started),
                float(scheduled) if scheduled else None,
                float(enqueued) if enqueued else None,
            )
        )
    return runs


def intended(run: Run, period: int, by_enqueue: bool) -> int:
    """The fire time a run belongs to: its scheduled_for, else the period boundary at or before
    its RQ enqueue time (by_enqueue) or its start."""
    if run.scheduled_for is not None:
        return round(run.scheduled_for)
    basis = run.enqueued if by_enqueue and run.enqueued is not None else run.started
    return math.floor(basis / period) * period


def match(
    runs: list[Run], period: int, by_enqueue: bool = False
) -> dict[tuple[str, int], list[Run]]:
    matched: dict[tuple[str, int], list[Run]] = collections.defaultdict(list)
    for run in runs:
        matched[(run.job, intended(run, period, by_enqueue))].append(run)
    return matched


def ms(values: list[float], prefix: str) -> dict[str, float]:
    return {
        f"{prefix}_p50_ms": percentile(values, 0.50) * 1000,
        f"{prefix}_p99_ms": percentile(values, 0.99) * 1000,
        f"{prefix}_max_ms": max(values) * 1000 if values else math.nan,
    }


def fire_figures(
    matched: dict[tuple[str, int], list[Run]], jobs: list[str], times: list[int]
) -> dict[str, Any]:
    """misses, duplicates and lags over the intended fire times `times` of each job."""
    lags: list[float] = []
    enqueue_lags: list[float] = []
    misses = duplicates = 0
    for job in jobs:
        for moment in times:
            runs = matched.get((job, moment))
            if not runs:
                misses += 1
                continue
            duplicates += len(runs) - 1
            first = min(runs, key=lambda r: r.started)
            lags.append(first.started - moment)
            if first.enqueued is not None:
                enqueue_lags.append(first.enqueued - moment)
    result: dict[str, Any] = {
        "expected": len(jobs) * len(times),
        "misses": misses,
        "duplicates": duplicates,
        **ms(lags, "lag"),
    }
    if enqueue_lags:
        result.update(ms(enqueue_lags, "enqueue_lag"))
    result["lags"] = lags
    return result


def figures(raw: list[bytes], jobs: list[str], first: int, last: int) -> dict[str, Any]:
    """Workloads 1 and 3: every (job, whole second) in [first, last]."""
    runs = parse(raw)
    result = fire_figures(match(runs, 1), jobs, list(range(first, last + 1)))
    result["runs_total"] = len(runs)
    result["runs_with_scheduled_for"] = sum(r.scheduled_for is not None for r in runs)
    return result


def minute_figures(matched: dict[tuple[str, int], list[Run]], minutes: list[int]) -> dict[str, Any]:
    """Per intended minute: runs, enqueue span and start span (last - the minute), and the rates
    (median over the minutes) they give."""
    per_minute = []
    by_minute: dict[int, list[Run]] = collections.defaultdict(list)
    for (_, moment), runs in matched.items():
        by_minute[moment].append(min(runs, key=lambda r: r.started))
    for minute in minutes:
        firsts = by_minute.get(minute, [])
        enqueued = [r.enqueued for r in firsts if r.enqueued is not None]
        per_minute.append(
            {
                "minute": minute,
                "runs": len(firsts),
                "enqueue_span_s": max(enqueued) - minute if enqueued else None,
                "start_span_s": max(r.started for r in firsts) - minute if firsts else None,
            }
        )
    triggers = [m["runs"] / m["enqueue_span_s"] for m in per_minute if m["enqueue_span_s"]]
    runs_rate = [m["runs"] / m["start_span_s"] for m in per_minute if m["start_span_s"]]
    return {
        "per_minute": per_minute,
        "triggers_per_s": statistics.median(triggers) if triggers else None,
        "runs_per_s": statistics.median(runs_rate) if runs_rate else None,
    }


def downtime_figures(
    runs: list[Run], jobs: list[str], window: dict[str, list[int]], restart: float
) -> dict[str, Any]:
    """Workload 4 over the windows before / down / after (lists of [first, last] seconds). A run
    without scheduled_for that started after the restart belongs to the second it started in, and
    never to a down second (the restart falls inside a whole second)."""
    from_restart = window["startup"][0]
    matched: dict[tuple[str, int], list[Run]] = collections.defaultdict(list)
    for run in runs:
        moment = intended(run, 1, False)
        if run.scheduled_for is None and run.started >= restart:
            moment = max(moment, from_restart)
        matched[(run.job, moment)].append(run)

    def seconds(name: str) -> list[int]:
        first, last = window[name]
        return list(range(first, last + 1))

    before, after = (
        fire_figures(matched, jobs, seconds("before")),
        fire_figures(matched, jobs, seconds("after")),
    )
    down_times = seconds("down")
    down_runs = [r for job in jobs for t in down_times for r in matched.get((job, t), [])]
    down_with_run = sum(1 for job in jobs for t in down_times if matched.get((job, t)))
    late_starts = [r.started - restart for r in down_runs if r.started >= restart]
    started_after = [r for r in runs if r.started >= restart]
    fired_after = {key for key, found in matched.items() if key[1] >= from_restart and found}
    first_after: dict[str, Run] = {}
    for run in sorted(started_after, key=lambda r: r.started):
        first_after.setdefault(run.job, run)
    first_lags = [r.started - restart for r in first_after.values()]
    return {
        "before": {k: v for k, v in before.items() if k != "lags"},
        "after": {k: v for k, v in after.items() if k != "lags"},
        "down": {
            "intended": len(jobs) * len(down_times),
            "with_run": down_with_run,
            "runs": len(down_runs),
            "runs_during_down": sum(1 for r in down_runs if r.started < restart),
            "runs_after_restart": len(late_starts),
            "after_restart_first_s": min(late_starts) if late_starts else None,
            "after_restart_last_s": max(late_starts) if late_starts else None,
        },
        "runs_started_after_restart": len(started_after),
        "late_runs": len(started_after) - len(fired_after),
        "first_run_after_restart_s": {
            "jobs": len(first_lags),
            "p50": percentile(first_lags, 0.5),
            "max": max(first_lags) if first_lags else None,
            "intended_minus_stop_s_p50": percentile(
                [
                    intended(r, 1, False) - window["down"][0]
                    for r in first_after.values()
                    if r.scheduled_for is not None
                ],
                0.5,
            ),
        },
    }


# -- one run --------------------------------------------------------------------------------------


@contextlib.contextmanager
def server_session(args: argparse.Namespace) -> Iterator[tuple[Path, str, redis.Redis]]:
    """A temporary directory with a fresh valkey-server; sets args.env for every process."""
    with tempfile.TemporaryDirectory(prefix=f"peers-{args.system}-") as tmp:
        work = Path(tmp)
        server = RedisServer(work / "redis")
        server.start()
        args.redis_pid = server.pid  # its CPU is measured too (`redis_cpu`)
        try:
            url = server.url
            args.env = {
                **os.environ,
                "PEERS_REDIS_URL": url,
                "PEERS_JOBS": str(args.jobs),
                "PEERS_EVERY": args.every,
                "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            }
            yield work, url, redis.Redis.from_url(url)
        finally:
            stop(SPAWNED)  # a run that failed half way leaves nothing running
            server.stop()


@dataclasses.dataclass(frozen=True)
class System:
    """A system started: its first intended fire second, when its schedulers started, its
    processes, and the scheduler commands (to start them again)."""

    first_fire: int
    started: float
    consumers: list[subprocess.Popen[bytes]]
    schedulers: list[subprocess.Popen[bytes]]
    schedulers_cmd: list[list[str]]

    def run_for(self, seconds: float) -> tuple[float, float, dict[str, int | None]]:
        """Let the schedulers run, then stop them: when, their CPU seconds, their exit codes."""
        time.sleep(seconds)
        stopped = time.time()
        return stopped, stop_measured(self.schedulers), exits(self.schedulers, "scheduler")

    @property
    def measured_from(self) -> int:
        """The first fire second of the window: the first fire, after the warm-up."""
        return max(self.first_fire, math.ceil(self.started + WARMUP))


def start_system(args: argparse.Namespace, work: Path, url: str) -> System:
    """The system's setup, then its consumers, then its schedulers."""
    first_fire = math.ceil(time.time()) + 3
    schedulers_cmd, consumers_cmd = SETUP[args.system](args, url, work, first_fire)
    consumers = spawn_all(consumers_cmd, args.env, work, "consumer")
    started = time.time()
    schedulers = spawn_all(schedulers_cmd, args.env, work, "scheduler")
    return System(first_fire, started, consumers, schedulers, schedulers_cmd)


def run_fixed(args: argparse.Namespace) -> dict[str, Any]:
    """Workloads 1 (precision) and 3 (ha)."""
    with server_session(args) as (work, url, connection):
        system = start_system(args, work, url)
        redis_began = redis_cpu(args)
        stopped, cpu, died = system.run_for(args.duration)
        drain(connection, args.system, args.drain_timeout)
        consumer_cpu = stop_measured(system.consumers)
        redis_used = redis_cpu(args) - redis_began
        raw = connection.lrange("peers:runs", 0, -1)
        logs = tails(work)
        statuses = cronq_statuses(connection) if args.system == "cronq" else None
    first = system.measured_from
    last = math.floor(stopped) - 1
    result = figures(raw, job_names(args.jobs), first, last)
    result.update(
        system=args.system, workload=args.workload, jobs=args.jobs, duration=args.duration,
        schedulers=args.schedulers, consumers=args.rq_workers, window=[first, last],
        scheduler_cpu_s=cpu, consumer_cpu_s=consumer_cpu, redis_cpu_s=redis_used,
        scheduler_exit=died, logs=logs, cronq_history=statuses,
    )  # fmt: skip
    return result


def cronq_statuses(connection: redis.Redis) -> dict[str, int]:
    """How cronq's own history saw the runs (an OVERRUN is a fire skipped because the run
    before it had not ended: `overlap: skip`, the default), over every job's last 100 entries."""
    counts: collections.Counter[str] = collections.Counter()
    for key in connection.scan_iter("cronq:history:*"):
        for entry in connection.lrange(key, 0, -1):
            counts[json.loads(entry)["status"]] += 1
    return dict(counts)


def run_scale(args: argparse.Namespace) -> dict[str, Any]:
    """Workload 2: N jobs every minute for K = D / 60 whole minutes (see the module docstring)."""
    minutes_wanted = max(1, round(args.duration / 60))
    result: dict[str, Any] = {
        "system": args.system, "workload": "scale", "jobs": args.jobs,
        "minutes": minutes_wanted, "schedulers": args.schedulers, "consumers": args.rq_workers,
    }  # fmt: skip
    with server_session(args) as (work, url, connection):
        empty = used_memory(connection)
        began = time.monotonic()
        schedulers: list[subprocess.Popen[bytes]] = []
        consumers: list[subprocess.Popen[bytes]] = []
        try:
            # Setup and scheduler start right after a minute boundary: no fire until the jobs
            # are held and the memory read (unless the setup takes most of a minute).
            sleep_until(math.ceil(time.time() / 60) * 60 + 1)
            began = time.monotonic()
            first_fire = math.ceil(time.time() / 60) * 60
            schedulers_cmd, consumers_cmd = SETUP[args.system](args, url, work, first_fire)
            result["setup_s"] = time.monotonic() - began
            result["mem_setup_per_job_b"] = (used_memory(connection) - empty) / args.jobs
            schedulers = spawn_all(schedulers_cmd, args.env, work, "scheduler")
            result["hold_s"] = wait_held(connection, args)
            result["mem_ready_per_job_b"] = (used_memory(connection) - empty) / args.jobs
            result["queued_at_mem_ready"] = queued(connection, args.system)
            result["mem_empty_b"] = empty
        except SetupFailed as exc:
            stop(schedulers)
            result.update(failed=str(exc), setup_s=time.monotonic() - began, logs=tails(work))
            return result
        consumers = spawn_all(consumers_cmd, args.env, work, "consumer")
        redis_began = redis_cpu(args)
        drain(connection, args.system, args.drain_timeout)  # runs of a minute before the window
        first_minute = math.ceil((time.time() + WARMUP) / 60) * 60
        minutes = [first_minute + 60 * k for k in range(minutes_wanted)]
        sleep_until(minutes[-1] + 55)
        cpu = stop_measured(schedulers)
        drain(connection, args.system, args.drain_timeout)
        result["queued_after_drain"] = queued(connection, args.system)
        consumer_cpu = stop_measured(consumers)
        result["redis_cpu_s"] = redis_cpu(args) - redis_began
        died = exits(schedulers, "scheduler")
        raw = connection.lrange("peers:runs", 0, -1)
        runs = parse(raw)
        result["mem_end_per_job_b"] = (used_memory(connection) - empty) / args.jobs
        logs = tails(work)
    result["raw"] = [item.decode() for item in raw]
    matched = match(runs, 60, by_enqueue=args.system in RQ_BASED)
    jobs = job_names(args.jobs)
    result.update(fire_figures(matched, jobs, minutes))
    result.update(minute_figures(matched, minutes))
    triggers = sum(1 for r in runs if r.enqueued is not None or args.system not in RQ_BASED)
    result.update(
        runs_total=len(runs),
        runs_with_scheduled_for=sum(r.scheduled_for is not None for r in runs),
        window=[minutes[0], minutes[-1]], scheduler_cpu_s=cpu, consumer_cpu_s=consumer_cpu,
        scheduler_cpu_ms_per_trigger=cpu * 1000 / triggers if triggers else None,
        scheduler_exit=died, logs=logs,
    )  # fmt: skip
    return result


def run_downtime(args: argparse.Namespace) -> dict[str, Any]:
    """Workload 4: up, every scheduler process stopped for --down s, up again."""
    with server_session(args) as (work, url, connection):
        system = start_system(args, work, url)
        stopped, cpu, died = system.run_for(args.up)
        sleep_until(stopped + args.down)
        args.env["PEERS_RESTART"] = "1"
        restarted = time.time()
        schedulers = spawn_all(system.schedulers_cmd, args.env, work, "restarted")
        time.sleep(args.after)
        ended = time.time()
        cpu += stop_measured(schedulers)
        died.update(exits(schedulers, "restarted"))
        drain(connection, args.system, args.drain_timeout)
        consumer_cpu = stop_measured(system.consumers)
        raw = connection.lrange("peers:runs", 0, -1)
        runs = parse(raw)
        logs = tails(work)
    back = math.ceil(restarted)
    window = {
        "before": [system.measured_from, math.floor(stopped) - 1],
        "down": [math.ceil(stopped), back - 1],
        "startup": [back, back + round(WARMUP) - 1],
        "after": [back + round(WARMUP), math.floor(ended) - 1],
    }
    result = downtime_figures(runs, job_names(args.jobs), window, restarted)
    result["raw"] = [item.decode() for item in raw]
    result.update(
        system=args.system, workload="downtime", jobs=args.jobs, up_s=args.up, down_s=args.down,
        after_s=args.after, misfire=args.misfire if args.system == "cronq" else None,
        misfire_grace=args.misfire_grace if args.system in ("cronq", "apscheduler") else None,
        schedulers=args.schedulers, consumers=args.rq_workers, window=window,
        stopped=stopped, restarted=restarted, runs_total=len(runs),
        runs_with_scheduled_for=sum(r.scheduled_for is not None for r in runs),
        scheduler_cpu_s=cpu, consumer_cpu_s=consumer_cpu, scheduler_exit=died, logs=logs,
    )  # fmt: skip
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.workload == "scale":
        return run_scale(args)
    if args.workload == "downtime":
        return run_downtime(args)
    return run_fixed(args)


def troubled(result: dict[str, Any]) -> bool:
    """Worth printing the process logs: a failure, misses, duplicates or no run at all."""
    parts = [result, result.get("before", {}), result.get("after", {})]
    return bool(
        result.get("failed")
        or not result.get("runs_total")
        or any(p.get("misses") or p.get("duplicates") for p in parts)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=SYSTEMS, required=True)
    parser.add_argument("--workload", choices=WORKLOADS, default="precision")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--schedulers", type=int, default=None)
    parser.add_argument("--rq-workers", type=int, default=4)
    parser.add_argument("--poll", type=float, default=0.1, help="rqscheduler/beat poll interval")
    parser.add_argument("--setup-timeout", type=float, default=300, help="scale: setup bound (s)")
    parser.add_argument("--drain-timeout", type=float, default=None)
    parser.add_argument("--up", type=float, default=30, help="downtime: seconds before the stop")
    parser.add_argument("--down", type=float, default=90, help="downtime: seconds stopped")
    parser.add_argument("--after", type=float, default=60, help="downtime: seconds after restart")
    parser.add_argument("--misfire", choices=MISFIRE, default="coalesce", help="cronq: downtime")
    parser.add_argument(
        "--overlap", choices=("skip", "queue", "allow"), help="cronq (default: its own, skip)"
    )
    parser.add_argument(
        "--misfire-grace", type=float, default=60, help="cronq, APScheduler: seconds"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    defaults = {"precision": (100, 120.0, 1), "ha": (100, 60.0, 2), "scale": (10_000, 180.0, 1)}
    jobs, duration, schedulers = defaults.get(args.workload, (20, 0.0, 1))
    args.jobs = jobs if args.jobs is None else args.jobs
    args.duration = duration if args.duration is None else args.duration
    args.schedulers = schedulers if args.schedulers is None else args.schedulers
    if args.drain_timeout is None:
        args.drain_timeout = 180.0 if args.workload == "scale" else 20.0
    args.every = "minute" if args.workload == "scale" else "second"
    result = run(args)
    summary = {k: v for k, v in result.items() if k not in ("lags", "logs", "raw")}
    print(json.dumps(summary, indent=1))
    if troubled(result):
        for name, text in result.get("logs", {}).items():
            print(f"--- {name} (tail)\n{text}")
    if args.json:
        result["machine"] = {"nproc": os.cpu_count(), "python": platform.python_version()}
        args.json.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
