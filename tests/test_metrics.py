"""Prometheus metrics: what a committed step counts (once, even when its batch lost a race and
was recomputed), and real `cronq worker` / `cronq watchdog` processes serving them on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cronq import metrics
from cronq.apply import apply_project
from cronq.engine import Engine
from cronq.metrics import Metrics
from cronq.statemachine import (
    InvocationStatus,
    RecordInvocation,
    RecordOverrun,
    RecordSkip,
    Repair,
    TriggerNow,
    WatchdogReport,
)
from cronq.watchdog.sweep import SweepReport
from tests.engine_harness import Cronq, wait_until
from tests.fake_engine import TWO_JOBS, project

pytest_plugins = ["tests.fake_engine"]

T = datetime(2027, 1, 4, 9, 0, 0, tzinfo=timezone.utc)
EVERY_SECOND = 'jobs: [{name: tick, schedule: "* * * * * *", noop: {}}]\n'


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Metrics:
    """This process's metrics, fresh for the test (and off again after it)."""
    fresh = Metrics()
    monkeypatch.setattr(metrics, "_active", fresh)
    return fresh


def value(counts: Metrics, name: str, **labels: str) -> float:
    found = counts.registry.get_sample_value(name, {"namespace": "ns", **labels})
    return found or 0.0


# -- what a commit counts ----------------------------------------------------------------------


def test_committed_actions_are_counted_by_project_and_status(counts: Metrics) -> None:
    def record(status: InvocationStatus, attempt: int = 1) -> RecordInvocation:
        started = T + timedelta(seconds=2)
        finished = started + timedelta(seconds=3) if status.final else None
        return RecordInvocation("inv", T, attempt, status, started, finished)

    counts.committed(
        "ns",
        "billing/report",
        [
            record(InvocationStatus.STARTING),
            record(InvocationStatus.STARTING, attempt=2),
            record(InvocationStatus.RUNNING),
            record(InvocationStatus.SUCCEEDED),
            record(InvocationStatus.FAILED, attempt=2),
            RecordOverrun(T),
            RecordSkip(T, "misfire", count=7),
            WatchdogReport(Repair.REARMED_TICK, "lost"),
        ],
    )
    project = {"project": "billing"}
    assert value(counts, "cronq_triggers_total", **project) == 1
    assert value(counts, "cronq_retries_total", **project) == 1
    assert value(counts, "cronq_invocations_total", status="SUCCEEDED", **project) == 1
    assert value(counts, "cronq_invocations_total", status="FAILED", **project) == 1
    assert value(counts, "cronq_invocations_total", status="RUNNING", **project) == 0
    assert value(counts, "cronq_overruns_total", **project) == 1
    assert value(counts, "cronq_skips_total", **project) == 7
    assert value(counts, "cronq_watchdog_repairs_total", kind="rearmed_tick") == 1
    # Lag of the first attempt only (a retry's start is late by its delay), no job label.
    assert value(counts, "cronq_tick_lag_seconds_count") == 1
    assert value(counts, "cronq_tick_lag_seconds_sum") == 2
    assert value(counts, "cronq_invocation_duration_seconds_count") == 2
    assert value(counts, "cronq_invocation_duration_seconds_sum") == 6


def test_batches_and_sweeps_are_observed(counts: Metrics) -> None:
    counts.batch("ns", 120, 0.004)
    counts.swept("ns", SweepReport(lapsed=3, returned_tasks=5, seconds=0.2))
    assert value(counts, "cronq_executor_batch_size_sum") == 120
    assert value(counts, "cronq_executor_batch_seconds_count") == 1
    assert value(counts, "cronq_watchdog_sweep_seconds_count") == 1
    assert value(counts, "cronq_watchdog_lapsed_jobs") == 3
    assert value(counts, "cronq_watchdog_returned_tasks_total") == 5


def test_a_batch_that_lost_a_race_is_counted_once(
    engine: Engine, counts: Metrics, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer between WATCH and EXEC makes the batch run again: the step is computed twice
    but committed, and counted, once."""
    apply_project(engine, project(tmp_path, TWO_JOBS))
    fold, folds = engine._fold, []

    def fold_with_a_rival(*args: Any, **kwargs: Any) -> Any:
        folds.append(1)
        if len(folds) == 1:  # another client touches the watched job before our EXEC
            engine.connection.hset(engine.keys.job("demo/fast"), "origin", "file")
        return fold(*args, **kwargs)

    monkeypatch.setattr(engine, "_fold", fold_with_a_rival)
    engine.step_many([("demo/fast", TriggerNow())], start_due=True)
    assert len(folds) == 2
    labels = {"namespace": "cronq", "project": "demo"}
    assert counts.registry.get_sample_value("cronq_triggers_total", labels) == 1


# -- served by real processes ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample at http://127.0.0.1:PORT/metrics, by name and labels; empty while the
    server is not up yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = response.read().decode()
    except OSError:
        return {}
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str) -> float:
    """The sum of `name` over all its label sets."""
    return sum(v for (n, _), v in samples.items() if n == name)


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses that listen on `port` (Linux's /proc/net/tcp: state 0A is LISTEN)."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        pytest.skip("no /proc/net/tcp to see which address a socket binds")
    found = set()
    for line in table.read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


def test_a_worker_serves_its_counters_on_loopback(harness: Cronq) -> None:
    port = free_port()
    worker = harness.start_worker("--metrics-port", str(port), "--no-watchdog")
    harness.wait_ready([worker])
    harness.apply(EVERY_SECOND)

    def succeeded() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
        assert worker.alive(), worker.log_text()
        samples = scrape(port)
        labels = frozenset({"namespace": "cronq", "project": "proj", "status": "SUCCEEDED"}.items())
        return samples if samples.get(("cronq_invocations_total", labels), 0) > 0 else None

    samples = wait_until(succeeded, timeout=20, what="SUCCEEDED invocations in /metrics")
    assert sample(samples, "cronq_triggers_total") > 0
    assert sample(samples, "cronq_tick_lag_seconds_count") > 0
    assert sample(samples, "cronq_invocation_duration_seconds_count") > 0
    assert sample(samples, "cronq_executor_batch_size_count") > 0
    assert sample(samples, "process_cpu_seconds_total") > 0
    lag_buckets = [labels for (name, labels) in samples if name == "cronq_tick_lag_seconds_bucket"]
    assert all(dict(labels).keys() == {"namespace", "le"} for labels in lag_buckets)
    assert listening_addresses(port) == {"127.0.0.1"}
    assert f"metrics at http://127.0.0.1:{port}/metrics" in worker.log_text()


def test_a_watchdog_serves_its_sweeps(harness: Cronq, tmp_path: Path) -> None:
    port = free_port()
    command = [
        *(sys.executable, "-c", "from cronq.cli import main; main()", "watchdog"),
        *("--interval", "0.5", "--metrics-port", str(port), "--redis-url", harness.redis_url),
    ]
    with (tmp_path / "watchdog.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(
            lambda: sample(scrape(port), "cronq_watchdog_sweep_seconds_count") > 0,
            timeout=20,
            what="a sweep in /metrics",
        )
    finally:
        stop(process)


def test_a_taken_metrics_port_is_a_clear_error(harness: Cronq) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        command = [
            *(sys.executable, "-c", "from cronq.cli import main; main()", "worker", "--burst"),
            *("--metrics-port", str(port), "--redis-url", harness.redis_url),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM by pid, then SIGKILL if it lingers."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
