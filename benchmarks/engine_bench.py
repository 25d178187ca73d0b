"""Engine throughput, lag and Redis memory: N jobs firing every second on a real server.

    python benchmarks/engine_bench.py [--jobs 100] [--workers 2] [--duration 60] [--idle-jobs 10000]
                                      [--cprofile DIR] [--py-spy DIR]

What it does, all against one Redis-compatible server it starts on loopback in a temporary
directory (`cronq.redis_server.RedisServer`) and stops at the end:

1. Memory per idle job. On an empty database, `apply_project` K jobs with schedule `0 0 1 1 *`
   (each holds exactly one pending RQ scheduled task: its TickLater) and reports
   (used_memory after - before) / K from `INFO memory`, with a breakdown by key family from
   `MEMORY USAGE key SAMPLES 0` over every key, and the field sizes of one job hash and one RQ
   job hash. Then FLUSHALL.
2. Load. Starts W `cronq worker --redis-url URL` processes, waits until they are registered, then
   `cronq apply`s a file of N jobs `* * * * * *` with `noop: {}` targets and lets them run D
   seconds. The steady window is [apply + warm-up, stop]; the CPU, command and round-trip figures
   are deltas over that window. Then the workers get SIGTERM (RQ's warm shutdown), by pid.
3. Figures, from every job's history (`{ns}:history:{job}`):
   * triggers/s: SUCCEEDED invocations that finished inside the steady window, per second;
   * lag = started_at - scheduled_for (p50/p99/max) of invocations scheduled in the window;
   * duplicates: a (job, scheduled_for) with more than one invocation;
   * misses: whole seconds in [window start, stop - tail] without a SUCCEEDED invocation, split
     into recorded (OVERRUN/SKIPPED/failed), start queued or running at the stop (in the job's
     state), not run by the stop (after the job's last record) and lost (a gap with no record);
   * CPU seconds of the worker processes and their children (all threads, the tick
     releaser included; any forked child, such as RQ's own scheduler, is counted too),
     from /proc/PID/stat utime+stime (+cutime+cstime), and of the server;
   * Redis commands per trigger (INFO commandstats deltas / triggers), and client round trips
     per trigger (counted in the workers, see below).

History keeps at most 100 entries per job (`cronq.store.HISTORY_LIMIT`, and a constant cannot be
raised across processes). With one fire a second, a run of D <= 90 s is read once after the
workers stop; a longer run is also read every 45 s during the run and the reads are merged by
invocation id (their LRANGEs are subtracted from the command counts).

Workers run `cronq.cli:main` through a small wrapper (unless --plain-workers) that counts client
round trips (each `send_packed_command` of redis-py: one command, or one whole pipeline/MULTI)
and writes the count on SIGUSR1 (a forked child would inherit it). With --cprofile DIR the
wrapper also profiles the worker and the tick releaser (TickReleaser.run) with cProfile, writes
DIR/{worker,scheduler}-PID.prof and the bench prints the top functions. With --py-spy DIR the
bench runs `py-spy record --subprocesses --format raw` on each worker for the steady window
(collapsed stacks; flamegraph.pl makes an SVG of them) and prints the hottest frames. Profiled
runs are slower: take the figures from an unprofiled run.

Everything the bench starts (server, workers, py-spy) is stopped by pid; the run is bounded by
D plus a few timeouts.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import platform
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import redis
from procstat import cpu_seconds, percentile, tree_cpu

from cronq.apply import apply_project
from cronq.config import ConfigFile
from cronq.engine import Engine
from cronq.loader import LoadedProject
from cronq.presence import workers_key
from cronq.redis_server import RedisServer
from cronq.store import HISTORY_LIMIT, Keys
from cronq.views import load_jobs

NAMESPACE = "cronq"
PROJECT = "bench"
READ_EVERY = 45.0  # seconds between history reads when D > 90 (100 entries cap, 1 fire/s)
RECORDED = {"OVERRUN", "SKIPPED"}

# Runs `cronq worker ...` (argv after the code) with a round-trip counter, and cProfile when
# CRONQ_BENCH_PROFILE names a directory. SIGUSR1 writes {"pid", "round_trips"} to
# $CRONQ_BENCH_DIR/rt-PID.json (a forked child inherits the handler; RQ's own scheduler only
# takes SIGINT/SIGTERM). The counter counts every thread, the tick releaser's included.
WORKER_WRAPPER = textwrap.dedent(
    """
    import cProfile, json, os, signal, sys, time
    import redis.connection
    out = os.environ["CRONQ_BENCH_DIR"]
    profile_dir = os.environ.get("CRONQ_BENCH_PROFILE")
    counts = {"n": 0}
    send = redis.connection.AbstractConnection.send_packed_command
    def counted(self, command, check_health=True):
        counts["n"] += 1
        return send(self, command, check_health)
    redis.connection.AbstractConnection.send_packed_command = counted
    def dump(signum, frame):
        path = os.path.join(out, "rt-%d.json" % os.getpid())
        with open(path + ".tmp", "w") as f:
            data = {"pid": os.getpid(), "round_trips": counts["n"], "t": time.time()}
            json.dump(data, f)
        os.replace(path + ".tmp", path)
    signal.signal(signal.SIGUSR1, dump)
    from cronq.cli import main
    if profile_dir:
        import cronq.worker
        # The releaser loop (a thread of each worker, or a forked process in older versions).
        loop_name = "run" if hasattr(cronq.worker.TickReleaser, "run") else "work"
        loop = getattr(cronq.worker.TickReleaser, loop_name)
        def profiled_loop(self, *args):
            profiler = cProfile.Profile()
            profiler.enable()
            try:
                return loop(self, *args)
            finally:
                profiler.disable()
                profiler.dump_stats(os.path.join(profile_dir, "scheduler-%d.prof" % os.getpid()))
        setattr(cronq.worker.TickReleaser, loop_name, profiled_loop)
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            main(sys.argv[1:], prog_name="cronq", standalone_mode=False)
        finally:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, "worker-%d.prof" % os.getpid()))
    else:
        main(sys.argv[1:], prog_name="cronq")
    """
)


# -- processes ------------------------------------------------------------------------------------


def stop_process(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM by pid, SIGKILL after timeout."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop_leftovers(pids: list[int]) -> None:
    """Descendants recorded earlier that outlived their parent: SIGTERM, then SIGKILL, by pid."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if alive:
            time.sleep(2)


# -- memory per idle job --------------------------------------------------------------------------


def key_family(key: str) -> str:
    """A key with its job-specific parts replaced, to group MEMORY USAGE by family."""
    key = re.sub(r"cronq-[ts]-[0-9a-f]+-\d+", "<task>", key)
    return re.sub(r"(cronq:(job|history):).*", r"\1<id>", key)


def memory_phase(connection: redis.Redis, count: int) -> dict[str, Any]:
    connection.flushall()
    before = int(connection.info("memory")["used_memory"])
    config = ConfigFile.model_validate(
        {
            "project": "idle",
            "jobs": [
                {"name": f"idle{i:05d}", "schedule": "0 0 1 1 *", "noop": {}} for i in range(count)
            ],
        }
    )
    started = time.perf_counter()
    apply_project(Engine(connection, NAMESPACE), LoadedProject("idle", "<bench>", config))
    apply_seconds = time.perf_counter() - started
    time.sleep(0.5)
    after = int(connection.info("memory")["used_memory"])
    families: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    samples: dict[str, str] = {}
    for key in connection.scan_iter(count=1000):
        name = key.decode()
        family = key_family(name)
        usage = connection.memory_usage(name, samples=0) or 0
        families[family][0] += 1
        families[family][1] += usage
        samples.setdefault(family, name)
    fields: dict[str, dict[str, int]] = {}
    for family in ("cronq:job:<id>", "rq:job:<task>"):
        if family in samples:
            key = samples[family]
            fields[family] = {f.decode(): connection.hstrlen(key, f) for f in connection.hkeys(key)}
    return {
        "jobs": count,
        "used_before": before,
        "used_after": after,
        "per_job": (after - before) / count,
        "apply_seconds": apply_seconds,
        "families": {k: {"keys": v[0], "bytes": v[1]} for k, v in sorted(families.items())},
        "fields": fields,
        "encoding": {f: connection.object("encoding", samples[f]).decode() for f in samples},
    }


def print_memory(memory: dict[str, Any]) -> None:
    count = memory["jobs"]
    print(f"\n== Redis memory per idle job ({count} jobs, schedule '0 0 1 1 *') ==")
    print(
        f"used_memory {memory['used_before']} -> {memory['used_after']} B: "
        f"{memory['per_job']:.0f} B/job ({memory['per_job'] / 1024:.2f} KiB); "
        f"apply took {memory['apply_seconds']:.1f} s"
    )
    print(f"{'key family':<34}{'keys':>7}{'bytes':>11}{'B/job':>9}  encoding")
    total = 0
    for family, row in memory["families"].items():
        total += row["bytes"]
        encoding = memory["encoding"].get(family, "")
        print(
            f"{family:<34}{row['keys']:>7}{row['bytes']:>11}{row['bytes'] / count:>9.1f}  "
            f"{encoding}"
        )
    print(
        f"{'sum of MEMORY USAGE':<34}{'':>7}{total:>11}{total / count:>9.1f}\n"
        f"{'rest (keyspace dict, expires, ...)':<34}{'':>7}"
        f"{memory['used_after'] - memory['used_before'] - total:>11}"
        f"{(memory['used_after'] - memory['used_before'] - total) / count:>9.1f}"
    )
    for family, sizes in memory["fields"].items():
        text = ", ".join(f"{name}={size}" for name, size in sizes.items())
        print(f"field bytes of one {family}: {text} (total {sum(sizes.values())})")


# -- load run -------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    at: float
    commands: dict[str, int]
    cpu: dict[int, float]
    server_cpu: float
    system_cpu: float  # of the worker processes, in the kernel
    round_trips: dict[int, int] = field(default_factory=dict)


def command_counts(connection: redis.Redis) -> dict[str, int]:
    stats = connection.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def round_trips(pids: list[int], directory: Path) -> dict[int, int]:
    """Ask each instrumented process for its round-trip count (SIGUSR1) and collect them."""
    asked = time.time()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGUSR1)
    counts: dict[int, int] = {}
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and len(counts) < len(pids):
        for pid in pids:
            path = directory / f"rt-{pid}.json"
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if data["t"] >= asked:
                counts[pid] = data["round_trips"]
        time.sleep(0.02)
    return counts


def snapshot(
    connection: redis.Redis, workers: list[int], server_pid: int, rt_dir: Path | None
) -> Snapshot:
    cpu = tree_cpu(workers)
    rts = round_trips(list(cpu), rt_dir) if rt_dir is not None else {}
    system = sum(cpu_seconds(pid, system_only=True) for pid in cpu)
    return Snapshot(
        time.time(), command_counts(connection), cpu, cpu_seconds(server_pid), system, rts
    )


def read_histories(
    connection: redis.Redis, keys: Keys, job_ids: list[str], into: dict[tuple[str, str], dict]
) -> None:
    reads = connection.pipeline(transaction=False)
    for job_id in job_ids:
        reads.lrange(keys.history(job_id), 0, -1)
    for raw_entries in reads.execute():
        for raw in raw_entries:
            entry = json.loads(raw)
            into[(entry["job"], entry["id"])] = entry


def ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


def write_project(path: Path, jobs: int) -> None:
    lines = [f"project: {PROJECT}", "jobs:"]
    for i in range(jobs):
        lines += [f"  - name: j{i:05d}", '    schedule: "* * * * * *"', "    noop: {}"]
    path.write_text("\n".join(lines) + "\n")


def start_workers(
    args: argparse.Namespace, url: str, workdir: Path, rt_dir: Path
) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "CRONQ_BENCH_DIR": str(rt_dir)}
    if args.cprofile:
        env["CRONQ_BENCH_PROFILE"] = str(Path(args.cprofile).resolve())
        Path(args.cprofile).mkdir(parents=True, exist_ok=True)
    if args.plain_workers:
        cronq = shutil.which("cronq")
        prefix = [cronq] if cronq else [sys.executable, "-c", "from cronq.cli import main; main()"]
    else:
        wrapper = workdir / "bench_worker.py"
        wrapper.write_text(WORKER_WRAPPER)
        prefix = [sys.executable, str(wrapper)]
    workers = []
    for i in range(args.workers):
        log = (workdir / f"worker-{i}.log").open("wb")
        command = [*prefix, "worker", "--redis-url", url, "--namespace", NAMESPACE]
        workers.append(
            subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)
        )
        log.close()
    return workers


def wait_registered(connection: redis.Redis, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = connection.zcard(workers_key(NAMESPACE))
        if workers >= count and connection.keys("rq:scheduler-lock:*"):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{count} workers did not register within {timeout:g} s")


def start_py_spy(
    args: argparse.Namespace, workers: list[int], seconds: float
) -> list[subprocess.Popen[bytes]]:
    out = Path(args.py_spy).resolve()
    out.mkdir(parents=True, exist_ok=True)
    spies = []
    for pid in workers:
        command = [
            "py-spy", "record", "--pid", str(pid), "--subprocesses", "--rate", "200",
            "--duration", str(max(1, int(seconds))), "--format", "raw",
            "--output", str(out / f"worker-{pid}.txt"), "--nonblocking", "--function",
        ]  # fmt: skip
        spies.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
    return spies


def run_load(args: argparse.Namespace, server: RedisServer, workdir: Path) -> dict[str, Any]:
    connection = redis.Redis.from_url(server.url)
    connection.flushall()
    connection.config_resetstat()
    keys = Keys(NAMESPACE)
    rt_dir = workdir / "rt"
    rt_dir.mkdir()
    project_file = workdir / "bench.yaml"
    write_project(project_file, args.jobs)
    job_ids = [f"{PROJECT}/j{i:05d}" for i in range(args.jobs)]
    workers = start_workers(args, server.url, workdir, rt_dir)
    worker_pids = [w.pid for w in workers]
    spies: list[subprocess.Popen[bytes]] = []
    descendants: list[int] = []
    entries: dict[tuple[str, str], dict] = {}
    bench_lranges = 0
    try:
        wait_registered(connection, args.workers)
        cronq = shutil.which("cronq")
        apply_cmd = (
            [cronq] if cronq else [sys.executable, "-c", "from cronq.cli import main; main()"]
        )
        subprocess.run(
            [*apply_cmd, "apply", str(project_file), "--redis-url", server.url],
            check=True, stdout=subprocess.DEVNULL, timeout=120,
        )  # fmt: skip
        t0 = time.time()
        stop_at = t0 + args.duration
        time.sleep(max(0.0, t0 + args.warmup - time.time()))
        rt_dir_or_none = None if args.plain_workers else rt_dir
        first = snapshot(connection, worker_pids, server.pid or 0, rt_dir_or_none)
        descendants = [pid for pid in first.cpu if pid not in worker_pids]
        if args.py_spy:
            spies = start_py_spy(args, worker_pids, stop_at - time.time())
        next_read = time.time() + READ_EVERY
        while time.time() < stop_at:
            if args.duration > 90 and time.time() >= next_read:
                read_histories(connection, keys, job_ids, entries)
                bench_lranges += len(job_ids)
                next_read += READ_EVERY
            time.sleep(min(1.0, max(0.0, stop_at - time.time())))
        last = snapshot(connection, worker_pids, server.pid or 0, rt_dir_or_none)
    finally:
        for spy in spies:
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop_process(spy, 5)
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        stop_leftovers(descendants)
    read_histories(connection, keys, job_ids, entries)
    in_flight = {
        (job.job_id, round(run.scheduled_for.timestamp()))
        for job in load_jobs(connection, keys, PROJECT)
        for run in (*job.state.pending, *job.state.active, *job.state.backlog)
    }
    failed_tasks = connection.zcard(f"rq:failed:{NAMESPACE}")
    watchdog = {k.decode(): int(v) for k, v in connection.hgetall(keys.stats).items()}
    return analyse(args, first, last, entries, in_flight, bench_lranges, failed_tasks, watchdog)


def analyse(
    args: argparse.Namespace,
    first: Snapshot,
    last: Snapshot,
    entries: dict[tuple[str, str], dict],
    in_flight: set[tuple[str, int]],
    bench_lranges: int,
    failed_tasks: int,
    watchdog: dict[str, int],
) -> dict[str, Any]:
    window = last.at - first.at
    sched_lo = math.ceil(first.at)
    sched_hi = math.floor(last.at - args.tail)
    invocations = [e for e in entries.values() if e["status"] not in RECORDED]
    succeeded = [e for e in invocations if e["status"] == "SUCCEEDED"]
    completed = [e for e in succeeded if first.at <= ts(e["finished_at"]) <= last.at]
    lags = [
        ts(e["started_at"]) - ts(e["scheduled_for"])
        for e in succeeded
        if sched_lo <= ts(e["scheduled_for"]) <= sched_hi
    ]
    by_fire = collections.Counter((e["job"], e["scheduled_for"]) for e in invocations)
    duplicates = sum(n - 1 for n in by_fire.values() if n > 1)
    statuses = collections.Counter(e["status"] for e in entries.values())

    per_job: dict[str, dict[int, str]] = collections.defaultdict(dict)
    for e in entries.values():
        second = round(ts(e["scheduled_for"]))
        if per_job[e["job"]].get(second) != "SUCCEEDED":
            per_job[e["job"]][second] = e["status"]
    expected = range(sched_lo, sched_hi + 1)
    misses = collections.Counter()
    for i in range(args.jobs):
        job_id = f"{PROJECT}/j{i:05d}"
        fires = per_job.get(job_id, {})
        last_run = max(fires, default=0)
        for second in expected:
            status = fires.get(second)
            if status == "SUCCEEDED":
                continue
            if status is not None:
                misses[f"recorded {status}"] += 1
            elif (job_id, second) in in_flight:
                misses["start queued or running at the stop"] += 1
            elif second > last_run:
                misses["not run by the stop"] += 1
            else:
                misses["lost (no record)"] += 1

    triggers = len(completed)
    commands = {
        name: last.commands.get(name, 0) - first.commands.get(name, 0)
        for name in set(last.commands) | set(first.commands)
    }
    commands["lrange"] = commands.get("lrange", 0) - bench_lranges
    commands["info"] = commands.get("info", 0) - 1
    commands = {k: v for k, v in commands.items() if v > 0}
    worker_cpu = sum(last.cpu.get(pid, 0.0) - first.cpu.get(pid, 0.0) for pid in first.cpu)
    trips = sum(last.round_trips.get(p, 0) - first.round_trips.get(p, 0) for p in first.round_trips)
    return {
        "jobs": args.jobs,
        "workers": args.workers,
        "duration": args.duration,
        "window": window,
        "triggers": triggers,
        "triggers_per_s": triggers / window,
        "offered_per_s": args.jobs,
        "lag": {
            "n": len(lags),
            "p50": percentile(lags, 0.5),
            "p99": percentile(lags, 0.99),
            "max": max(lags, default=math.nan),
        },
        "duplicates": duplicates,
        "expected_fires": len(expected) * args.jobs,
        "misses": sum(misses.values()),
        "miss_kinds": dict(misses),
        "statuses": dict(statuses),
        "failed_tasks": failed_tasks,
        "watchdog": watchdog,
        "worker_cpu": worker_cpu,
        "worker_system_cpu": last.system_cpu - first.system_cpu,
        "server_cpu": last.server_cpu - first.server_cpu,
        "cpu_by_pid": {pid: last.cpu.get(pid, 0.0) - first.cpu.get(pid, 0.0) for pid in first.cpu},
        "commands": dict(sorted(commands.items(), key=lambda kv: -kv[1])),
        "round_trips": trips if first.round_trips else None,
    }


def print_load(result: dict[str, Any]) -> None:
    r, lag = result, result["lag"]
    window, triggers = r["window"], max(r["triggers"], 1)
    print(
        f"\n== Load: {r['jobs']} jobs '* * * * * *' (noop), {r['workers']} workers, "
        f"{r['duration']} s; steady window {window:.1f} s =="
    )
    print(
        f"triggers/s sustained: {r['triggers_per_s']:.1f} (offered {r['offered_per_s']}/s; "
        f"{r['triggers']} SUCCEEDED finished in the window)"
    )
    print(
        f"lag started_at - scheduled_for: p50 {lag['p50'] * 1000:.0f} ms, "
        f"p99 {lag['p99'] * 1000:.0f} ms, max {lag['max'] * 1000:.0f} ms (n={lag['n']})"
    )
    kinds = ", ".join(f"{k}: {v}" for k, v in r["miss_kinds"].items()) or "none"
    print(
        f"duplicates: {r['duplicates']}; misses: {r['misses']} of {r['expected_fires']} "
        f"expected fires ({kinds})"
    )
    print(
        f"history statuses: {r['statuses']}; failed RQ tasks: {r['failed_tasks']}; "
        f"watchdog: {r['watchdog'] or 'no repairs'}"
    )
    per_pid = ", ".join(f"{pid}: {cpu:.1f}" for pid, cpu in r["cpu_by_pid"].items())
    print(
        f"CPU seconds in the window: workers+scheduler {r['worker_cpu']:.1f} "
        f"({r['worker_cpu'] / window:.2f} cores, {r['worker_system_cpu'] / r['worker_cpu']:.0%} in "
        f"the kernel; by pid {per_pid}), server {r['server_cpu']:.1f} "
        f"({r['server_cpu'] / window:.2f} cores); per trigger: workers "
        f"{r['worker_cpu'] / triggers * 1000:.2f} ms, "
        f"server {r['server_cpu'] / triggers * 1000:.2f} ms"
    )
    total = sum(r["commands"].values())
    print(f"Redis commands per trigger: {total / triggers:.1f}")
    print("  " + ", ".join(f"{k} {v / triggers:.2f}" for k, v in r["commands"].items()))
    if r["round_trips"] is not None:
        print(
            "client round trips per trigger (all worker processes): "
            f"{r['round_trips'] / triggers:.1f}"
        )


# -- profiles -------------------------------------------------------------------------------------


def print_cprofile(directory: Path) -> None:
    for kind in ("worker", "scheduler"):
        files = sorted(directory.glob(f"{kind}-*.prof"))
        if not files:
            continue
        stats = pstats.Stats(*(str(f) for f in files), stream=sys.stdout)
        print(f"\n== cProfile: {kind} ({len(files)} process(es)), top 25 by own time ==")
        stats.sort_stats("tottime").print_stats(25)
        print(f"== cProfile: {kind}, top 30 by cumulative time ==")
        stats.sort_stats("cumulative").print_stats(30)


PROFILE_CATEGORIES = [  # first marker frame found in a stack names its category
    ("TickReleaser.run", "tick releaser thread"),
    ("Engine.step", "cronq Engine.step (WATCH, HMGET, state machine, MULTI/EXEC)"),
    ("Job.perform", "cronq task, rest (target call, setup)"),
    ("BaseWorker.dequeue_job_and_maintain_ttl", "RQ dequeue (BLMOVE, fetch, heartbeat)"),
    ("BaseWorker.handle_job_success", "RQ success bookkeeping (dependents, executions, delete)"),
    ("BaseWorker.prepare_execution", "RQ start bookkeeping (execution records, started)"),
    ("BaseWorker.prepare_job_execution", "RQ start bookkeeping (execution records, started)"),
    ("BaseWorker.perform_job", "RQ per-task, rest"),
    ("SimpleWorker.execute_job", "RQ per-task, rest"),
    ("BaseWorker.work", "RQ work loop (heartbeats, state, suspension check)"),
]
IO_FRAMES = ("SocketBuffer._read_from_socket", "AbstractConnection.send_packed_command")


def print_py_spy(directory: Path, top: int = 25) -> None:
    """Aggregate py-spy raw (collapsed) stacks: by category, by frame on the stack (inclusive)
    and on top of it (own). Samples are of running threads only (py-spy leaves idle ones out)."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    categories: collections.Counter[str] = collections.Counter()
    io: collections.Counter[str] = collections.Counter()
    total = 0
    for path in directory.glob("worker-*.txt"):
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [
                re.sub(r":\d+\)$", ")", re.sub(r" \(.*?/(site-packages|main)/", " (", f))
                for f in stack.split(";")[1:]
                if not f.startswith("thread (")
            ]
            names = {f.split(" ", 1)[0] for f in frames}
            total += count
            for frame in set(frames):
                inclusive[frame] += count
            if frames:
                own[frames[-1]] += count
            category = next((c for m, c in PROFILE_CATEGORIES if m in names), "other")
            categories[category] += count
            if names & set(IO_FRAMES):
                io[category] += count
    if not total:
        return
    print(f"\n== py-spy: {total} samples over all worker processes ==")
    print("by category (% of samples; of which in socket send/recv):")
    for category, count in categories.most_common():
        print(f"  {count / total * 100:5.1f}  ({io[category] / total * 100:4.1f})  {category}")
    print(f"  total in socket send/recv: {sum(io.values()) / total * 100:.1f}")
    print("inclusive %:")
    for frame, count in inclusive.most_common(top):
        print(f"  {count / total * 100:5.1f}  {frame}")
    print("own %:")
    for frame, count in own.most_common(top):
        print(f"  {count / total * 100:5.1f}  {frame}")


def machine() -> str:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return f"nproc {os.cpu_count()}, CPU {cpu!r}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[2:]),
    )
    parser.add_argument("--jobs", type=int, default=100, help="jobs firing every second (N)")
    parser.add_argument("--workers", type=int, default=2, help="`cronq worker` processes (W)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds after apply (D)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds left out at the start")
    parser.add_argument(
        "--tail", type=float, default=3.0, help="fires this close to the stop are not judged"
    )
    parser.add_argument(
        "--idle-jobs", type=int, default=10_000, help="K for the memory figure (0: skip it)"
    )
    parser.add_argument(
        "--hash-max-listpack-value",
        type=int,
        metavar="BYTES",
        help="what-if: CONFIG SET this on the bench's server before the memory figure "
        "(default: the server's, 64)",
    )
    parser.add_argument("--skip-load", action="store_true", help="only the memory figure")
    parser.add_argument("--cprofile", metavar="DIR", help="cProfile the workers into DIR")
    parser.add_argument("--py-spy", metavar="DIR", help="py-spy record the workers into DIR")
    parser.add_argument(
        "--plain-workers", action="store_true", help="run `cronq worker` without the wrapper"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    if args.py_spy and not shutil.which("py-spy"):
        parser.error("--py-spy needs py-spy on PATH (pip install py-spy)")
    if HISTORY_LIMIT < 100:
        parser.error(f"history keeps only {HISTORY_LIMIT} entries per job")

    with tempfile.TemporaryDirectory(prefix="cronq-engine-bench-") as tmp:
        workdir = Path(tmp)
        server = RedisServer(workdir / "redis")
        server.start()
        try:
            connection = redis.Redis.from_url(server.url)
            version = connection.info("server")
            server_name = "valkey" if "valkey_version" in version else "redis"
            server_version = version.get("valkey_version", version["redis_version"])
            print(f"{machine()}, {server_name} {server_version} ({server.binary})")
            print(f"command: {' '.join(sys.argv)}")
            result: dict[str, Any] = {
                "machine": machine(),
                "server": f"{server_name} {server_version}",
            }
            if args.hash_max_listpack_value is not None:
                value = str(args.hash_max_listpack_value)
                connection.config_set("hash-max-listpack-value", value)
                print(f"hash-max-listpack-value set to {value} (what-if)")
            if args.idle_jobs:
                result["memory"] = memory_phase(connection, args.idle_jobs)
                print_memory(result["memory"])
            if not args.skip_load:
                result["load"] = run_load(args, server, workdir)
                print_load(result["load"])
            connection.close()
        finally:
            server.stop()
    if args.cprofile:
        print_cprofile(Path(args.cprofile))
    if args.py_spy:
        print_py_spy(Path(args.py_spy))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
