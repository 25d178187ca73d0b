"""`cronq status`: the service at a glance."""

from __future__ import annotations

from datetime import timedelta

import click

from cronq.cli.app import connect, json_option, main, print_json, redis_options
from cronq.cli.watchdog_cmd import grace_option
from cronq.engine import utcnow
from cronq.status import service_status


@main.command("status")
@grace_option
@json_option
@redis_options
def status(grace: float, as_json: bool, redis_url: str, namespace: str) -> None:
    """Jobs per state, lapsed watchdog timers, watchdog repairs in the last hour, live workers and
    watchdogs, and how far behind cronq's task queue is."""
    report = service_status(connect(redis_url), namespace, utcnow(), timedelta(seconds=grace))
    if as_json:
        print_json(report)
        return
    jobs = ", ".join(f"{n} {s}" for s, n in report["jobs"].items()) or "none"
    click.echo(f"jobs:                    {jobs}")
    click.echo(f"lapsed watchdog timers:  {report['lapsed_watchdog_timers']}")
    click.echo(f"repairs in the last hour: {report['repairs_last_hour']}")
    click.echo(f"workers:                 {len(report['workers'])}")
    click.echo(f"watchdogs:               {len(report['watchdogs'])}")
    click.echo(f"queued tasks:            {report['queued_tasks']}")
    click.echo(f"oldest due tick lag:     {report['oldest_due_tick_lag_seconds']} s")
