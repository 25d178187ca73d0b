"""Watchdog sweep cost: it must follow the number of lapsed jobs, not the number of jobs.

For each (registered jobs N, lapsed jobs L) the script fills an empty database of a real server
it starts on loopback with N jobs as `cronq apply` would leave them (a job hash with its spec and
an armed tick, an entry in the WatchdogTimerTs index), L of them with a tick an hour overdue whose
RQ task is gone (the repair the sweep exists for: re-arm with a new nonce), then times one sweep.
Jobs are written directly, in pipelines, because applying a million jobs one transaction at a time
would take a quarter of an hour and measure `apply`, not the sweep.

    python benchmarks/watchdog_bench.py                      # N = 10k, 100k; L = 100, 1000
    python benchmarks/watchdog_bench.py --jobs 1000000       # as memory allows
"""

from __future__ import annotations

import argparse
import logging
import platform
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import redis

from cronq.engine import Engine
from cronq.redis_server import RedisServer
from cronq.state_codec import encode_state
from cronq.statemachine import JobState, Phase, Tick
from cronq.watchdog import sweep

GRACE = timedelta(seconds=30)
SPEC = '{{"name":"j{i}","schedule":"* * * * *","noop":{{}}}}'


def fill(connection: redis.Redis, jobs: int, lapsed: int, now: datetime) -> None:
    """`jobs` jobs of project `bench`; the first `lapsed` are an hour overdue."""
    pipe = connection.pipeline(transaction=False)
    for i in range(jobs):
        overdue = i < lapsed
        at = now - timedelta(hours=1) if overdue else now + timedelta(minutes=1)
        state = JobState(phase=Phase.ENABLED, tick=Tick(nonce=i + 1, at=at), anchor=now)
        job_id = f"bench/j{i}"
        pipe.hset(
            f"cronq:job:{job_id}",
            mapping={"spec": SPEC.format(i=i), "state": encode_state(state), "version": 1},
        )
        pipe.zadd("cronq:watchdog", {job_id: at.timestamp()})
        pipe.sadd("cronq:project:bench", job_id)
        if i % 5000 == 4999:
            pipe.execute()
    pipe.sadd("cronq:project-names", "bench")
    pipe.execute()


def measure(server: RedisServer, jobs: int, lapsed: int, repeat: int) -> dict[str, float]:
    connection = redis.Redis.from_url(server.url)
    seconds: list[float] = []
    repairs = 0
    for _ in range(repeat):
        connection.flushall()
        now = datetime.now(timezone.utc)
        fill(connection, jobs, lapsed, now)
        report = sweep(Engine(connection, "cronq"), GRACE)
        assert report.lapsed == lapsed, report.as_dict()
        repairs = len(report.repairs)
        seconds.append(report.seconds)
    memory = int(connection.info("memory")["used_memory"])
    return {
        "jobs": jobs,
        "lapsed": lapsed,
        "repairs": repairs,
        "sweep_s": statistics.median(seconds),
        "per_lapsed_ms": 1000 * statistics.median(seconds) / max(lapsed, 1),
        "redis_mb": memory / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--lapsed", type=int, nargs="+", default=[100, 1_000])
    parser.add_argument("--repeat", type=int, default=3, help="sweeps per cell (median)")
    args = parser.parse_args()
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next((ln.split(":", 1)[1].strip() for ln in lines if "model name" in ln), "?")
    # A real watchdog logs each repair; here that would be thousands of lines on the terminal.
    logging.getLogger("cronq").setLevel(logging.ERROR)
    print(f"python {platform.python_version()}, CPU {cpu!r}")
    print(
        "command: python benchmarks/watchdog_bench.py",
        " ".join(
            f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in vars(args).items()
        ),
    )
    print(
        f"{'jobs':>9} {'lapsed':>7} {'repairs':>8} {'sweep s':>9} {'ms/lapsed':>10} {'redis MB':>9}"
    )
    with tempfile.TemporaryDirectory() as directory, RedisServer(Path(directory)) as server:
        for jobs in args.jobs:
            for lapsed in args.lapsed:
                began = time.perf_counter()
                row = measure(server, jobs, lapsed, args.repeat)
                print(
                    f"{row['jobs']:>9} {row['lapsed']:>7} {row['repairs']:>8} "
                    f"{row['sweep_s']:>9.3f} {row['per_lapsed_ms']:>10.3f} {row['redis_mb']:>9.0f}"
                    f"   (cell took {time.perf_counter() - began:.0f} s)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
