"""Log lines: JSON with the job and invocation as fields of their own, one event per line, and no
password of a Redis URL in any line, from the formatters up to a real `cronq worker`'s stderr."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from cronq.logs import JsonFormatter, TextFormatter, scrub
from tests.conftest import MakeRedisServer
from tests.engine_harness import Cronq, WorkerProcess, wait_until

EVERY_SECOND = 'jobs: [{name: tick, schedule: "* * * * * *", noop: {}}]\n'
_CLI = (sys.executable, "-c", "from cronq.cli import main; main()")


def record(message: str, *args: object, **extra: Any) -> logging.LogRecord:
    made = logging.LogRecord("cronq.test", logging.WARNING, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


def test_json_lines_carry_extras_and_tracebacks_on_one_line() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        failing = record("job %s: target raised", "a/b", job="a/b", invocation="i-1")
        failing.exc_info = sys.exc_info()
    line = JsonFormatter().format(failing)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "WARNING" and entry["logger"] == "cronq.test"
    assert entry["message"] == "job a/b: target raised"
    assert (entry["job"], entry["invocation"]) == ("a/b", "i-1")
    assert "ValueError: bad\nvalue" in entry["exc"]
    assert entry["ts"].endswith("+00:00")


def test_passwords_in_urls_are_masked_in_both_formats() -> None:
    text = "cannot reach rediss://user:hunter2@db:6380/0 or redis://:p%40ss@h/1, redis://h/2"
    assert scrub(text) == (
        "cannot reach rediss://user:***@db:6380/0 or redis://:***@h/1, redis://h/2"
    )
    leaky = record("%s", text, url="redis://:hunter2@h/0")
    assert "hunter2" not in JsonFormatter().format(leaky)
    assert "hunter2" not in TextFormatter().format(leaky)


# -- a real worker -----------------------------------------------------------------------------


def start_worker(cronq: Cronq, *extra: str) -> WorkerProcess:
    """A `cronq worker -v` whose stderr (its log) goes to a file of its own; stopped by pid at
    the test's end through the harness."""
    name = f"logs-{uuid.uuid4().hex[:8]}"
    log = cronq.workdir / f"{name}.stderr"
    command = [
        *(*_CLI, "worker", "-v", "--no-watchdog", "--name", name),
        *("--redis-url", cronq.redis_url, "--namespace", cronq.namespace, *extra),
    ]
    with log.open("wb") as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    worker = WorkerProcess(name, process, log)
    cronq.workers.append(worker)
    return worker


def wait_for_a_run(cronq: Cronq, *workers: WorkerProcess) -> None:
    """Apply a job firing every second; stop the workers once one of them logged a run."""
    cronq.wait_ready(workers)
    cronq.apply(EVERY_SECOND)
    wait_until(
        lambda: any("SUCCEEDED" in worker.log_text() for worker in workers),
        timeout=20,
        what="a run in a worker's log",
    )
    cronq.stop_workers()


def test_a_json_worker_writes_one_object_per_line_with_job_and_invocation(
    harness: Cronq,
) -> None:
    worker = start_worker(harness, "--log-format", "json")
    wait_for_a_run(harness, worker)
    lines = worker.log_text().splitlines()
    entries = [json.loads(line) for line in lines]  # every line, or this fails
    assert all({"ts", "level", "logger", "message"} <= entry.keys() for entry in entries)
    runs = [e for e in entries if e.get("status") == "SUCCEEDED"]
    assert runs, lines
    history = {entry["id"] for entry in harness.history("proj/tick")}
    for run in runs:
        assert run["job"] == "proj/tick" and run["invocation"] in history
        assert run["logger"] == "cronq.engine"


def test_no_log_line_holds_the_redis_password(
    make_redis_server: MakeRedisServer, tmp_path: Path
) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    server = make_redis_server(password=password)
    cronq = Cronq(server.url, tmp_path / "work")
    try:
        text_worker = start_worker(cronq)
        json_worker = start_worker(cronq, "--log-format", "json")
        wait_for_a_run(cronq, text_worker, json_worker)
        refused = subprocess.run(
            [*_CLI, "worker", "-v", "--redis-url", server.url.replace(password, "wrong-pw")],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        cronq.stop_workers()
        cronq.kill_all()
    assert refused.returncode == 1 and "redis://:***@" in refused.stderr
    logs = text_worker.log_text() + json_worker.log_text() + refused.stderr + refused.stdout
    assert f"worker on redis://:***@127.0.0.1:{server.port}/0" in logs
    assert password not in logs and "wrong-pw" not in logs
