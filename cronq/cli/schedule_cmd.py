"""`cronq next`: preview a schedule's fire times, to check an expression before it goes live."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import click

from cronq.cli.app import UserError, json_option, main, print_json
from cronq.schedule import ScheduleError, parse_schedule, parse_timezone


@main.command("next")
@click.argument("expression", metavar="EXPR")
@click.option(
    "--tz",
    "zone_name",
    default="UTC",
    show_default=True,
    metavar="ZONE",
    help="IANA zone the expression is read in; times print with its offset.",
)
@click.option(
    "--after",
    metavar="ISO8601",
    help="Start strictly after this time (default: now). Without an offset it is read in --tz.",
)
@click.option(
    "-n",
    "count",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="How many fire times to print.",
)
@json_option
def next_command(
    expression: str, zone_name: str, after: str | None, count: int, as_json: bool
) -> None:
    """Print the next fire times of EXPR, one ISO 8601 time per line.

    EXPR is a cron expression (5 fields `min hour dom mon dow`, 6 with seconds first, 7 with a
    year last), a macro such as @daily, `@every <duration>` or `triggered`. Quote it in the
    shell. An expression that never fires prints nothing, as does `triggered`.

    \b
    Examples:
      cronq next '*/15 9-17 * * MON-FRI'
      cronq next '30 2 * * *' --tz America/New_York --after 2027-03-13T12:00 -n 3
      cronq next '0 0 12 ? * 5L' --json          # noon on the last Friday of each month
      cronq next '@every 1h30m' --after 2027-01-01T00:00:00Z
    """
    try:
        zone = parse_timezone(zone_name)
    except ScheduleError as error:
        raise UserError(f"--tz: {error.problem}") from None
    try:
        schedule = parse_schedule(expression, zone)
    except ScheduleError as error:
        raise UserError(str(error)) from None
    start = _start(after, zone)
    times: list[str] = []
    moment = start
    try:
        while len(times) < count:
            found = schedule.next_after(moment, anchor=start)
            if found is None:
                break
            times.append(found.astimezone(zone).isoformat())
            moment = found
    except OverflowError:  # only at the very ends of the calendar (years 1 and 9999)
        if not times:
            raise UserError(f"--after: {after!r} is outside the supported years") from None
    if as_json:
        print_json(times)
    else:
        for line in times:
            click.echo(line)


def _start(text: str | None, zone: ZoneInfo) -> datetime:
    """--after as an aware datetime: now by default, a naive time read in `zone`."""
    if text is None:
        return datetime.now(timezone.utc)
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"  # Python 3.10's fromisoformat does not read Z
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise UserError(
            f"--after: invalid time {text!r} (expected ISO 8601, e.g. 2027-03-13T12:00:00+01:00)"
        ) from None
    return moment.replace(tzinfo=zone) if moment.tzinfo is None else moment
