"""Helpers for end-to-end scenarios: a real Redis server, `cronq apply/show/history/jobs` through
the command line, and real `cronq worker` processes.

The read-only and apply commands run in-process through click's CliRunner (the same code as the
console script, without a Python start-up per call, so polling stays cheap); workers are separate
processes, started with subprocess and stopped by their own pid: SIGTERM (a warm shutdown: the task
in hand finishes), then SIGKILL if they do not exit in time. Every wait is a bounded poll.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import redis
from click.testing import CliRunner, Result
from rq import Queue
from rq.job import Job
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

from cronq.cli import main
from cronq.executor import wip_key
from cronq.presence import WORKER_TTL, present, workers_key
from cronq.store import Keys, history_entries

T = TypeVar("T")

# Launching the worker through the package rather than the console script keeps the test
# independent of PATH; it is the same `main` the `cronq` script runs.
_WORKER_COMMAND = (sys.executable, "-c", "from cronq.cli import main; main()", "worker")


def wait_until(
    predicate: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.1,
    what: str = "condition",
) -> T:
    """Poll until `predicate()` is truthy and return its value; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def sleep_until(moment: float) -> None:
    """Sleep until the wall clock (time.time()) reaches `moment`."""
    while (left := moment - time.time()) > 0:
        time.sleep(min(left, 0.5))


def instant(value: str | None) -> datetime:
    """A time from cronq's JSON output, which must be there."""
    assert value, "a time was expected, found none"
    return datetime.fromisoformat(value)


@dataclass
class WorkerProcess:
    """One `cronq worker` process; its output goes to `log`."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would; reaped at once."""
        if self.alive():
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 8.0) -> None:
        """SIGTERM, then SIGKILL if the warm shutdown takes longer than `timeout`."""
        self.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Cronq:
    """The command line and the workers of one namespace on one Redis server."""

    redis_url: str
    workdir: Path
    namespace: str = "cronq"
    workers: list[WorkerProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.connection = redis.Redis.from_url(self.redis_url)
        self.keys = Keys(self.namespace)
        self.queue = Queue(self.namespace, connection=self.connection)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._files = 0

    # -- the command line ------------------------------------------------------------------------

    def cli(self, *args: str) -> Result:
        """`cronq ARGS --redis-url URL --namespace NS`, in-process."""
        command = [*args, "--redis-url", self.redis_url, "--namespace", self.namespace]
        return CliRunner().invoke(main, command, catch_exceptions=False)

    def cli_json(self, *args: str) -> Any:
        result = self.cli(*args, "--json")
        assert result.exit_code == 0, f"cronq {' '.join(args)}: {result.stderr}"
        return json.loads(result.stdout)

    def write_config(self, text: str, name: str = "proj") -> Path:
        """A config file whose project is its stem (`name`), unless the text says otherwise."""
        self._files += 1
        folder = self.workdir / f"config-{self._files}"
        folder.mkdir()
        path = folder / f"{name}.yaml"
        path.write_text(text)
        return path

    def apply(self, text: str, name: str = "proj") -> dict[str, Any]:
        """Apply a YAML config (its project is `name` unless it says); the `--json` plan of the
        one project it holds."""
        plan = self.cli_json("apply", str(self.write_config(text, name)))
        assert len(plan["projects"]) == 1, plan
        project: dict[str, Any] = plan["projects"][0]
        return project

    def show(self, job_id: str) -> dict[str, Any]:
        page: dict[str, Any] = self.cli_json("show", job_id)
        return page

    def jobs(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.cli_json("jobs")
        return rows

    def history(self, job_id: str) -> list[dict[str, Any]]:
        """Every entry `cronq history` shows (newest first)."""
        entries: list[dict[str, Any]] = self.cli_json("history", job_id, "-n", "1000")
        return entries

    def stored_history(self, job_id: str) -> list[dict[str, Any]]:
        """The recorded entries straight from Redis: also for jobs that were removed."""
        return history_entries(self.connection, self.keys, job_id, 1000)

    def runs(self, job_id: str, *statuses: str) -> list[dict[str, Any]]:
        """Entries with one of `statuses` (all if none), oldest scheduled_for first."""
        entries = [e for e in self.history(job_id) if not statuses or e["status"] in statuses]
        return sorted(entries, key=lambda e: (e["scheduled_for"], e["attempt"]))

    # -- workers ---------------------------------------------------------------------------------

    def start_worker(self, *extra: str) -> WorkerProcess:
        name = f"w{len(self.workers)}-{uuid.uuid4().hex[:8]}"
        log = self.workdir / f"{name}.log"
        command = [
            *_WORKER_COMMAND,
            "-v",
            "--name",
            name,
            "--redis-url",
            self.redis_url,
            "--namespace",
            self.namespace,
            *extra,
        ]
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        worker = WorkerProcess(name, process, log)
        self.workers.append(worker)
        return worker

    def registered_workers(self) -> set[str]:
        alive = present(self.connection, workers_key(self.namespace), time.time(), WORKER_TTL)
        return {name for name, _ in alive}

    def wait_ready(self, workers: Iterable[WorkerProcess], timeout: float = 15.0) -> None:
        """Until every worker listens and one of them holds the tick releaser's lock."""
        names = {w.name for w in workers}

        def ready() -> bool:
            dead = [w.name for w in self.workers if w.name in names and not w.alive()]
            assert not dead, f"workers exited at start: {dead}: {self.logs()}"
            return names <= self.registered_workers() and self.releaser() is not None

        wait_until(ready, timeout=timeout, what=f"workers {sorted(names)} to be ready")

    def start_workers(self, count: int) -> list[WorkerProcess]:
        started = [self.start_worker() for _ in range(count)]
        self.wait_ready(started)
        return started

    def releaser(self) -> str | None:
        """The name of the tick releaser that holds the lock of cronq's queue, if any."""
        value = self.connection.get(f"rq:scheduler-lock:{self.namespace}")
        return _text(value) if value else None

    def releasing_worker(self) -> WorkerProcess | None:
        """The live worker whose tick releaser holds the lock (from its -v log)."""
        name = self.releaser()
        if name is None:
            return None
        marker = f"tick releaser {name} holds the lock"
        return next((w for w in self.workers if w.alive() and marker in w.log_text()), None)

    def stop_workers(self, timeout: float = 8.0) -> None:
        """Warm shutdown of every live worker at once, then SIGKILL for any that lingers."""
        live = [w for w in self.workers if w.alive()]
        for worker in live:
            worker.terminate()
        deadline = time.monotonic() + timeout
        for worker in live:
            try:
                worker.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                worker.kill()

    def kill_all(self) -> None:
        for worker in self.workers:
            worker.kill()

    @contextmanager
    def running(self, count: int) -> Iterator[list[WorkerProcess]]:
        """`count` ready workers for the block; all stopped at its end, pass or fail."""
        try:
            yield self.start_workers(count)
        finally:
            self.stop_workers()

    def logs(self, tail: int = 30) -> str:
        parts = []
        for worker in self.workers:
            lines = worker.log_text().splitlines()[-tail:]
            parts.append(f"--- {worker.name} (pid {worker.pid}) ---\n" + "\n".join(lines))
        return "\n".join(parts)

    # -- RQ's side -------------------------------------------------------------------------------

    def failed_tasks(self) -> list[str]:
        """cronq tasks that raised (RQ's failed registry), with their exception text."""
        registry = FailedJobRegistry(queue=self.queue)
        found = []
        for job_id in registry.get_job_ids():
            job = Job.fetch_many([job_id], connection=self.connection)[0]
            result = job.latest_result() if job is not None else None
            detail = result.exc_string if result is not None else "(no detail kept)"
            found.append(f"{job_id}: {detail}")
        return found

    def scheduled_tasks(self) -> list[str]:
        return ScheduledJobRegistry(queue=self.queue).get_job_ids()

    def in_flight(self, worker: WorkerProcess) -> list[str]:
        """Ids of the tasks `worker` has taken and not finished (its in-progress list)."""
        members = self.connection.lrange(wip_key(self.namespace, worker.name), 0, -1)
        return sorted(_text(m) for m in members)

    def redeliver(self, task_ids: Iterable[str]) -> list[str]:
        """Enqueue these tasks again, as RQ's retry of an abandoned job or an operator's requeue
        would; those that are gone (finished: cronq's tasks keep no result) are passed over."""
        redelivered = []
        for task_id in task_ids:
            job = Job.fetch_many([task_id], connection=self.connection)[0]
            if job is not None:
                self.queue.enqueue_job(job)
                redelivered.append(task_id)
        return redelivered


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def seconds_between(entries: list[dict[str, Any]]) -> list[float]:
    """Gaps between consecutive scheduled_for values (entries oldest first)."""
    times = [instant(e["scheduled_for"]) for e in entries]
    return [(b - a).total_seconds() for a, b in itertools.pairwise(times)]


def intervals(entries: list[dict[str, Any]]) -> list[tuple[datetime, datetime]]:
    """(started_at, finished_at) of finished invocations, by start."""
    spans = []
    for entry in entries:
        if entry["started_at"] and entry["finished_at"]:
            spans.append((instant(entry["started_at"]), instant(entry["finished_at"])))
    return sorted(spans)


def overlapping(spans: list[tuple[datetime, datetime]], slack: float = 0.0) -> bool:
    """True when some interval starts before the previous one (by start) has finished."""
    margin = timedelta(seconds=slack)
    latest_end: datetime | None = None
    for start, end in spans:
        if latest_end is not None and start + margin < latest_end:
            return True
        latest_end = end if latest_end is None else max(latest_end, end)
    return False


@contextmanager
def worker(harness: Cronq, *queues: str) -> Iterator[WorkerProcess]:
    """One ready `cronq worker` (also serving `queues`) for the block, stopped at its end."""
    started = harness.start_worker(*(arg for queue in queues for arg in ("-q", queue)))
    try:
        harness.wait_ready([started])
        yield started
    finally:
        started.stop()
