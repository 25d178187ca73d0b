"""`cronq worker`: run cronq's tasks (and, optionally, users' queues)."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import click
from rq import Queue

from cronq.cli.app import connect, main, redis_options
from cronq.cli.watchdog_cmd import grace_option, interval_option
from cronq.engine import Engine
from cronq.watchdog import Watchdog
from cronq.worker import DEFAULT_RELEASE_INTERVAL, CronqWorker


@main.command("worker")
@click.option("--burst", is_flag=True, help="Run what is due now, then exit.")
@click.option(
    "--queues",
    "-q",
    "extra_queues",
    multiple=True,
    help="Also work these RQ queues (where `rq` targets send users' functions). Repeatable.",
)
@click.option(
    "--release-interval",
    type=click.FloatRange(0.01, 5.0),
    default=DEFAULT_RELEASE_INTERVAL,
    show_default=True,
    help="Longest sleep (seconds) between looks for scheduled tasks that fell due.",
)
@click.option("--name", default=None, help="Worker name (default: RQ's, unique per process).")
@click.option(
    "--with-watchdog/--no-watchdog",
    default=True,
    show_default=True,
    help="Also run a watchdog (one sweeps per interval across the fleet, under a lock).",
)
@interval_option
@grace_option
@click.option("--verbose", "-v", is_flag=True, help="Log every task.")
@redis_options
def worker(
    burst: bool,
    extra_queues: tuple[str, ...],
    release_interval: float,
    name: str | None,
    with_watchdog: bool,
    interval: float,
    grace: float,
    verbose: bool,
    redis_url: str,
    namespace: str,
) -> None:
    """Run an RQ worker for cronq's queue, with the scheduler that releases due ticks.

    Start as many as you like, on any machines: ticks and starts are idempotent, so a task run
    twice, or by two workers, does nothing the second time. Functions of `rq` targets run on their
    own queues: in ordinary `rq worker` processes, or here with --queues.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    connection = connect(redis_url)
    queues = [Queue(q, connection=connection) for q in (namespace, *extra_queues)]
    if with_watchdog:
        dog = Watchdog(
            Engine(connection, namespace),
            interval=timedelta(seconds=interval),
            grace=timedelta(seconds=grace),
        )
        threading.Thread(
            target=dog.run, args=(threading.Event(),), name="cronq-watchdog", daemon=True
        ).start()
    cronq_worker = CronqWorker(
        queues, connection=connection, name=name, release_interval=release_interval
    )
    cronq_worker.work(
        burst=burst, with_scheduler=True, logging_level="INFO" if verbose else "WARNING"
    )
