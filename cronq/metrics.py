"""Prometheus metrics of a cronq process, served at `/metrics` on a port of its own.

What the engine committed is counted in one place, `Engine.after_commit` (after EXEC succeeded),
so a batch that lost a race and was recomputed counts once, and a worker, a watchdog and an
operator's command count alike. Labels stay bounded: namespace, project, status, repair kind;
never a job id (there may be 100k jobs).

Nothing is counted until a process turns metrics on (`enable` or `serve`): the hot path then
pays one function call per commit. prometheus_client is imported only then, so commands that
never serve metrics do not pay for its import either.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from cronq.statemachine import (
    Action,
    InvocationStatus,
    RecordInvocation,
    RecordOverrun,
    RecordSkip,
    WatchdogReport,
)

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    from cronq.watchdog.sweep import SweepReport

__all__ = ["DEFAULT_HOST", "Metrics", "MetricsError", "MetricsServer", "active", "enable", "serve"]

DEFAULT_HOST = "127.0.0.1"  # metrics tell about jobs: not on every interface unless asked

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_DURATIONS = (0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)
_BATCH_SIZES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
_BATCH_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_SWEEP_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


M = TypeVar("M", "Counter", "Gauge", "Histogram")


class MetricsError(Exception):
    """The metrics server cannot listen where it was asked to; the message is for a person."""


class _Children(Generic[M]):
    """The children of one labelled metric, cached in a dict: prometheus_client's `labels()`
    takes a lock and validates on every call, too much for every action of every commit."""

    def __init__(self, family: M) -> None:
        self.family: M = family
        self.cache: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self.cache.get(values)
        if child is None:
            child = self.cache[values] = self.family.labels(*values)
        return child


class Metrics:
    """cronq's metrics in a registry of their own (with the process, platform and GC collectors),
    so that tests and embedding applications can hold several without name clashes."""

    def __init__(self) -> None:
        from prometheus_client import (
            CollectorRegistry,
            Counter,
            Gauge,
            GCCollector,
            Histogram,
            PlatformCollector,
            ProcessCollector,
        )

        self.registry: CollectorRegistry = CollectorRegistry()
        registry = self.registry
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=registry)

        def counter(name: str, doc: str, *labels: str) -> _Children[Counter]:
            return _Children(Counter(name, doc, ["namespace", *labels], registry=registry))

        def histogram(name: str, doc: str, buckets: Iterable[float]) -> _Children[Histogram]:
            metric = Histogram(name, doc, ["namespace"], buckets=tuple(buckets), registry=registry)
            return _Children(metric)

        self.triggers = counter(
            "cronq_triggers_total",
            "Runs started for a fire time or a manual trigger (first attempts).",
            "project",
        )
        self.retries = counter(
            "cronq_retries_total", "Retry attempts started (attempt > 1).", "project"
        )
        self.invocations = counter(
            "cronq_invocations_total", "Invocations ended, by final status.", "project", "status"
        )
        self.overruns = counter(
            "cronq_overruns_total", "Fire times recorded OVERRUN (the job was busy).", "project"
        )
        self.skips = counter(
            "cronq_skips_total", "Fire times recorded SKIPPED (misfire, queue full...).", "project"
        )
        self.repairs = counter(
            "cronq_watchdog_repairs_total", "Watchdog repairs and reports, by kind.", "kind"
        )
        self.lag = histogram(
            "cronq_tick_lag_seconds", "started_at - scheduled_for of first attempts.", _SECONDS
        )
        self.duration = histogram(
            "cronq_invocation_duration_seconds",
            "finished_at - started_at of ended invocations.",
            _DURATIONS,
        )
        self.batch_size = histogram(
            "cronq_executor_batch_size", "Events committed in one executor batch.", _BATCH_SIZES
        )
        self.batch_seconds = histogram(
            "cronq_executor_batch_seconds",
            "Time to step and commit one executor batch.",
            _BATCH_SECONDS,
        )
        self.sweep_seconds = histogram(
            "cronq_watchdog_sweep_seconds", "Duration of one watchdog sweep.", _SWEEP_SECONDS
        )
        self.returned_tasks = counter(
            "cronq_watchdog_returned_tasks_total",
            "Tasks taken by workers that died, put back on the queue by the watchdog.",
        )
        self.lapsed = _Children(
            Gauge(
                "cronq_watchdog_lapsed_jobs",
                "Jobs whose watchdog timer had lapsed at the last sweep.",
                ["namespace"],
                registry=registry,
            )
        )

    def committed(self, namespace: str, job_id: str, actions: Iterable[Action]) -> None:
        """Count the actions of one job's committed step."""
        project = job_id.partition("/")[0]
        for action in actions:
            if isinstance(action, RecordInvocation):
                self._invocation(namespace, project, action)
            elif isinstance(action, RecordOverrun):
                self.overruns(namespace, project).inc()
            elif isinstance(action, RecordSkip):
                self.skips(namespace, project).inc(action.count)
            elif isinstance(action, WatchdogReport):
                self.repairs(namespace, action.repair.value).inc()

    def _invocation(self, namespace: str, project: str, record: RecordInvocation) -> None:
        started = record.started_at
        if record.status is InvocationStatus.STARTING:
            if record.attempt > 1:
                self.retries(namespace, project).inc()
                return
            self.triggers(namespace, project).inc()
            if started is not None:
                lag = (started - record.scheduled_for).total_seconds()
                self.lag(namespace).observe(max(lag, 0.0))
        elif record.status.final:
            self.invocations(namespace, project, record.status.value).inc()
            if started is not None and record.finished_at is not None:
                seconds = (record.finished_at - started).total_seconds()
                self.duration(namespace).observe(max(seconds, 0.0))

    def batch(self, namespace: str, size: int, seconds: float) -> None:
        """One executor batch: how many events, how long its transaction took."""
        self.batch_size(namespace).observe(size)
        self.batch_seconds(namespace).observe(seconds)

    def swept(self, namespace: str, report: SweepReport) -> None:
        """One watchdog sweep (its repairs are counted where they are committed)."""
        self.sweep_seconds(namespace).observe(report.seconds)
        self.lapsed(namespace).set(report.lapsed)
        if report.returned_tasks:
            self.returned_tasks(namespace).inc(report.returned_tasks)


@dataclass
class MetricsServer:
    """The HTTP server of `serve`, in a daemon thread."""

    host: str
    port: int
    server: WSGIServer
    thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


_active: Metrics | None = None
_lock = threading.Lock()


def active() -> Metrics | None:
    """This process's metrics, or None while nothing is counted."""
    return _active


def enable() -> Metrics:
    """Count from now on (once per process; later calls return the same metrics)."""
    global _active
    with _lock:
        if _active is None:
            _active = Metrics()
        return _active


def serve(port: int, host: str = DEFAULT_HOST) -> MetricsServer:
    """Count, and serve the counts in Prometheus's text format at http://HOST:PORT/metrics (port
    0: any free port, see `.port`). Raises MetricsError when the address cannot be bound."""
    from prometheus_client import start_http_server

    metrics = enable()
    try:
        server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:  # taken, not an address of this host, or a privileged port
        raise MetricsError(f"cannot serve metrics on {host}:{port}: {exc}") from None
    return MetricsServer(host, int(server.server_port), server, thread)
