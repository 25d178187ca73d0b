"""`cronq worker`: run cronq's tasks (and, optionally, users' queues)."""

from __future__ import annotations

import logging
from datetime import timedelta

import click

from cronq.cli.app import UserError, connect, main, redact, redis_options, service_options
from cronq.cli.watchdog_cmd import grace_option, interval_option
from cronq.engine import Engine
from cronq.executor import DEFAULT_BATCH, DEFAULT_THREADS
from cronq.logs import configure_logging
from cronq.metrics import MetricsError
from cronq.watchdog import Watchdog
from cronq.worker import DEFAULT_RELEASE_INTERVAL, run_worker


@main.command("worker")
@click.option("--burst", is_flag=True, help="Run what is due now, then exit.")
@click.option(
    "--queues",
    "-q",
    "user_queues",
    multiple=True,
    help="Also run these RQ queues (where `rq` targets send users' functions). Repeatable.",
)
@click.option(
    "--release-interval",
    type=click.FloatRange(0.01, 5.0),
    default=DEFAULT_RELEASE_INTERVAL,
    show_default=True,
    help="Longest sleep (seconds) between looks for scheduled tasks that fell due.",
)
@click.option(
    "--batch",
    type=click.IntRange(1, 10_000),
    default=DEFAULT_BATCH,
    show_default=True,
    help="Most of cronq's tasks taken and committed together.",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 1024),
    default=DEFAULT_THREADS,
    show_default=True,
    help="Targets called at once (http, noop; rq targets are enqueued in batches).",
)
@click.option("--name", default=None, help="Worker name in `cronq status` (default: random).")
@click.option(
    "--with-watchdog/--no-watchdog",
    default=True,
    show_default=True,
    help="Also run a watchdog (one sweeps per interval across the fleet, under a lock).",
)
@interval_option
@grace_option
@click.option("--verbose", "-v", is_flag=True, help="Log more: every run's outcome, too.")
@service_options
@redis_options
def worker(
    burst: bool,
    user_queues: tuple[str, ...],
    release_interval: float,
    batch: int,
    threads: int,
    name: str | None,
    with_watchdog: bool,
    interval: float,
    grace: float,
    verbose: bool,
    metrics_port: int | None,
    metrics_host: str,
    log_format: str,
    redis_url: str,
    namespace: str,
) -> None:
    """Run cronq's tasks: release due ticks, step jobs, call their targets.

    Start as many as you like, on any machines: ticks and starts are idempotent, so a task run
    twice, or by two workers, does nothing the second time. Functions of `rq` targets run on their
    own queues: in ordinary `rq worker` processes, or here with --queues. SIGTERM or Ctrl-C stops
    the worker once its running targets have finished.
    """
    configure_logging(log_format, level=logging.INFO if verbose else logging.WARNING)
    connection = connect(redis_url)
    log = logging.getLogger("cronq.worker")
    log.info("worker on %s, namespace %s", redact(redis_url), namespace)
    dog = None
    if with_watchdog:
        dog = Watchdog(
            Engine(connection, namespace),
            interval=timedelta(seconds=interval),
            grace=timedelta(seconds=grace),
        )
    try:
        run_worker(
            connection,
            namespace,
            user_queues=user_queues,
            burst=burst,
            release_interval=release_interval,
            batch=batch,
            threads=threads,
            watchdog=dog,
            name=name,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )
    except MetricsError as exc:
        raise UserError(str(exc)) from None
