"""`cronq watchdog`: the repair loop."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import click

from cronq.cli.app import connect, json_option, main, print_json, redis_options
from cronq.engine import Engine
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
@redis_options
def watchdog(
    interval: float, grace: float, once: bool, as_json: bool, redis_url: str, namespace: str
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
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stopping = threading.Event()
    dog = Watchdog(engine, interval=timedelta(seconds=interval), grace=timedelta(seconds=grace))
    try:
        dog.run(stopping)
    except KeyboardInterrupt:
        stopping.set()
