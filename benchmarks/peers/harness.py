"""Peers harness: the same workload on cronq, `rq cron` (RQ 3), rq-scheduler, APScheduler 3 and
celery-redbeat, each against a fresh server, for the same wall time; every run of the same user
function (`userfunc.record`) is matched to the intended fire second it belongs to.

    python benchmarks/peers/harness.py --system cronq --workload precision [--jobs 100]
        [--duration 120] [--schedulers 1] [--rq-workers 4] [--json OUT]

Run it with the peers' own virtualenv (see README.md here). Per run:

1. A fresh valkey-server (`cronq.redis_server.RedisServer`) in a temporary directory, on loopback.
2. The system's setup for N jobs firing every second (each system's finest form of "every
   second"; see `setup_*`), user function `userfunc.record(job)`.
3. S scheduler processes (S=2 is workload 3) and the consumers: for RQ-based systems R `rq worker
   peers` processes (SimpleWorker), for cronq `cronq worker` processes (its scheduler) plus the
   same R `rq worker peers` processes running the `rq` target's function; celery: a celery worker
   (prefork, R processes); APScheduler runs the function in its own thread pool (not RQ-based).
4. D seconds of wall time, then the schedulers are stopped (SIGTERM by pid), the consumers get up
   to 20 s to drain their queue, then are stopped.
5. Figures over the window [start + 5 s warm-up, stop - 1 s]: every (job, whole second) in it is an
   intended fire time. A run belongs to the `scheduled_for` its system passed (cronq), else to the
   whole second at or before its start. misses = intended fire times with no run; duplicates =
   runs beyond the first of one intended fire time; lag = start - intended, of the first run.
   CPU seconds of the scheduler processes (and their descendants), from /proc.

Everything started is stopped by pid; the run is bounded by D + about 60 s.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
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
SYSTEMS = ("cronq", "rq-cron", "rq-scheduler", "apscheduler", "redbeat")


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


# -- systems --------------------------------------------------------------------------------------
# Each setup_* writes what the system needs and returns (scheduler commands, consumer commands).


def job_names(n: int) -> list[str]:
    return [f"j{i:03d}" for i in range(n)]


def rq_workers(url: str, count: int) -> list[list[str]]:
    return [
        [str(BIN / "rq"), "worker", QUEUE, "--url", url, "-w", "rq.worker.SimpleWorker", "-q"]
        for _ in range(count)
    ]


def setup_cronq(args, url, work, first):
    lines = ["project: peers", "jobs:"]
    for name in job_names(args.jobs):
        lines += [
            f"  - name: {name}",
            '    schedule: "* * * * * *"',
            f"    rq: {{func: userfunc.record, queue: {QUEUE}, kwargs: {{job: {name}}}}}",
        ]
    (work / "peers.yaml").write_text("\n".join(lines) + "\n")
    subprocess.run(
        [str(BIN / "cronq"), "apply", str(work / "peers.yaml"), "--redis-url", url],
        check=True, env=args.env, cwd=work, stdout=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    schedulers = [
        [str(BIN / "cronq"), "worker", "--redis-url", url] for _ in range(args.schedulers)
    ]
    return schedulers, rq_workers(url, args.rq_workers)


def setup_rq_cron(args, url, work, first):
    lines = ["from rq.cron import register", "from userfunc import record"]
    for name in job_names(args.jobs):
        # croniter's 6-field form: the 6th field is seconds, so this fires at every whole second.
        lines.append(
            f"register(record, queue_name={QUEUE!r}, kwargs={{'job': {name!r}}}, "
            f"cron='* * * * * *', name={name!r})"
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
    for name in job_names(args.jobs):
        scheduler.schedule(
            scheduled_time=at, func=record, kwargs={"job": name}, interval=1, repeat=None,
            queue_name=QUEUE, result_ttl=60,
        )  # fmt: skip
    schedulers = [
        [str(BIN / "rqscheduler"), "--url", url, "--interval", str(args.poll)]
        for _ in range(args.schedulers)
    ]
    return schedulers, rq_workers(url, args.rq_workers)


def setup_apscheduler(args, url, work, first):
    args.env["PEERS_FIRST"] = f"{first:.0f}"
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


SETUP = {
    "cronq": setup_cronq,
    "rq-cron": setup_rq_cron,
    "rq-scheduler": setup_rq_scheduler,
    "apscheduler": setup_apscheduler,
    "redbeat": setup_redbeat,
}


# -- figures --------------------------------------------------------------------------------------


def figures(raw: list[bytes], jobs: list[str], first: int, last: int) -> dict[str, Any]:
    runs: dict[tuple[str, int], list[float]] = collections.defaultdict(list)
    passed = 0
    for item in raw:
        job, started_s, scheduled_s = item.decode().split("|")
        started = float(started_s)
        if scheduled_s:
            passed += 1
            intended = round(float(scheduled_s))
        else:
            intended = math.floor(started)
        runs[(job, intended)].append(started)
    lags, misses, duplicates, expected = [], 0, 0, 0
    for job in jobs:
        for second in range(first, last + 1):
            expected += 1
            starts = runs.get((job, second))
            if not starts:
                misses += 1
                continue
            duplicates += len(starts) - 1
            lags.append(min(starts) - second)
    return {
        "expected": expected,
        "runs_total": len(raw),
        "runs_with_scheduled_for": passed,
        "misses": misses,
        "duplicates": duplicates,
        "lag_p50_ms": percentile(lags, 0.50) * 1000,
        "lag_p99_ms": percentile(lags, 0.99) * 1000,
        "lag_max_ms": max(lags) * 1000 if lags else math.nan,
        "lags": lags,
    }


# -- one run --------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"peers-{args.system}-") as tmp:
        work = Path(tmp)
        server = RedisServer(work / "redis")
        server.start()
        try:
            url = server.url
            connection = redis.Redis.from_url(url)
            args.env = {
                **os.environ,
                "PEERS_REDIS_URL": url,
                "PEERS_JOBS": str(args.jobs),
                "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            }
            first_fire = math.ceil(time.time()) + 3
            schedulers_cmd, consumers_cmd = SETUP[args.system](args, url, work, first_fire)
            consumers = [
                spawn(c, args.env, work / f"consumer-{i}.log", work)
                for i, c in enumerate(consumers_cmd)
            ]
            started = time.time()
            schedulers = [
                spawn(c, args.env, work / f"scheduler-{i}.log", work)
                for i, c in enumerate(schedulers_cmd)
            ]
            scheduler_pids = [p.pid for p in schedulers]
            time.sleep(args.duration)
            cpu = tree_cpu(scheduler_pids)
            stopped = time.time()
            stop(schedulers)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and connection.llen(f"rq:queue:{QUEUE}") + (
                connection.llen(QUEUE) if args.system == "redbeat" else 0
            ):
                time.sleep(0.2)
            time.sleep(2)
            stop(consumers)
            died = {f"scheduler-{i}": p.returncode for i, p in enumerate(schedulers)}
            raw = connection.lrange("peers:runs", 0, -1)
            logs = {
                log.name: log.read_text(errors="replace")[-1500:]
                for log in sorted(work.glob("*.log"))
            }
        finally:
            server.stop()
    first = max(first_fire, math.ceil(started + WARMUP))
    last = math.floor(stopped) - 1
    result = figures(raw, job_names(args.jobs), first, last)
    result.update(
        system=args.system, workload=args.workload, jobs=args.jobs, duration=args.duration,
        schedulers=args.schedulers, consumers=args.rq_workers, window=[first, last],
        scheduler_cpu_s=cpu, scheduler_exit=died, logs=logs,
    )  # fmt: skip
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=SYSTEMS, required=True)
    parser.add_argument("--workload", choices=("precision", "ha"), default="precision")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--schedulers", type=int, default=None)
    parser.add_argument("--rq-workers", type=int, default=4)
    parser.add_argument("--poll", type=float, default=0.1, help="rqscheduler/beat poll interval")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.duration is None:
        args.duration = 120.0 if args.workload == "precision" else 60.0
    if args.schedulers is None:
        args.schedulers = 1 if args.workload == "precision" else 2
    result = run(args)
    summary = {k: v for k, v in result.items() if k not in ("lags", "logs")}
    print(json.dumps(summary, indent=1))
    if result["misses"] or result["duplicates"] or result["runs_total"] == 0:
        for name, text in result["logs"].items():
            print(f"--- {name} (tail)\n{text}")
    if args.json:
        result["machine"] = {"nproc": os.cpu_count(), "python": platform.python_version()}
        args.json.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
