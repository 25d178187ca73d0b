"""`cronq watchdog`: the repair loop."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import click

from cronq.cli.app import (
    UserError,
    connect,
    json_option,
    main,
    print_json,
    redact,
    redis_options,
    service_options,
)
from cronq.engine import Engine
from cronq.logs import configure_logging
from cronq.metrics import MetricsError, serve
from cronq.watchdog import DEFAULT_GRACE, DEFAULT_INTERVAL, Watchdog, sweep


def interval_option(command: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--interval",
        type=click.FloatRange(0.5, 3600),
        default=DEFAULT_INTERVAL.total_seconds(),
        show_default=True,
        help="Seconds between sweeps.",
    )(command)


def grace_option(command: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--grace",
        type=click.FloatRange(0.1, 86400),
        default=DEFAULT_GRACE.total_seconds(),
        show_default=True,
        help="Seconds a task may be late before the watchdog looks at it.",
    )(command)


@main.command("watchdog")
@interval_option
@grace_option
@click.option("--once", is_flag=True, help="Sweep once now (no lock), print the repairs, exit.")
@json_option
@service_options
@redis_options
def watchdog(
    interval: float,
    grace: float,
    once: bool,
    as_json: bool,
    metrics_port: int | None,
    metrics_host: str,
    log_format: str,
    redis_url: str,
    namespace: str,
) -> None:
    """Repair jobs whose tasks were lost: re-arm lost ticks, re-queue lost starts, time out
    invocations whose worker died.

    Run any number of them: one sweeps per interval under a Redis lock, and another takes over
    about one interval after it dies. `cronq worker` runs one too unless --no-watchdog.
    """
    engine = Engine(connect(redis_url), namespace)
    if once:
        report = sweep(engine, timedelta(seconds=grace))
        if as_json:
            print_json(report.as_dict())
        else:
            for repair in report.repairs:
                click.echo(f"{repair.job_id}: {repair.repair}: {repair.detail}")
            click.echo(f"{report.lapsed} lapsed, {len(report.repairs)} repairs")
        return
    configure_logging(log_format, level=logging.INFO)
    try:
        server = None if metrics_port is None else serve(metrics_port, metrics_host)
    except MetricsError as exc:
        raise UserError(str(exc)) from None
    stopping = threading.Event()
    dog = Watchdog(engine, interval=timedelta(seconds=interval), grace=timedelta(seconds=grace))
    log = logging.getLogger("cronq.watchdog")
    log.info("watchdog %s on %s, namespace %s", dog.name, redact(redis_url), namespace)
    if server is not None:
        log.info("watchdog %s: metrics at %s", dog.name, server.url)
    try:
        dog.run(stopping)
    except KeyboardInterrupt:
        stopping.set()
    finally:
        if server is not None:
            server.close()
