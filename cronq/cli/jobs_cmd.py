"""`cronq jobs`, `cronq show`, `cronq history`: what the jobs are doing, for people (aligned
tables, relative and absolute times, color on a terminal) and for tools (`--json`, whose shapes
are `cronq.views`')."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import click
from redis import Redis

from cronq.cli.app import UserError, connect, json_option, main, print_json, redis_options
from cronq.client import Invocation, history_of
from cronq.engine import JobRefused, UnknownJob
from cronq.store import Keys, StoredJob, load_job
from cronq.views import job_page, job_rows

__all__ = ["describe_job", "job_errors", "when"]

_COLORS = {
    "SCHEDULED": "green",
    "SUCCEEDED": "green",
    "QUEUED": "cyan",
    "RUNNING": "cyan",
    "STARTING": "cyan",
    "SUSPENDED": "yellow",
    "OVERRUN": "yellow",
    "SKIPPED": "yellow",
    "FAILED": "red",
    "TIMED_OUT": "red",
    "ABORTED": "magenta",
}


@contextmanager
def job_errors() -> Iterator[None]:
    """An unknown job or a refused request is the user's problem: a message and exit 1."""
    try:
        yield
    except UnknownJob as exc:
        raise _no_job(exc.job_id) from None
    except JobRefused as exc:
        raise UserError(f"refused: {exc}") from None


def _no_job(job_id: str) -> UserError:
    return UserError(f"no job {job_id!r} (job ids are project/name; `cronq jobs` lists them)")


def _job(connection: Redis, keys: Keys, job_id: str) -> StoredJob:
    job = load_job(connection, keys, job_id)
    if job is None:
        raise _no_job(job_id)
    return job


# -- rendering ---------------------------------------------------------------------------------


def _painted(text: str, word: str | None) -> str:
    """`text` in the color of the state or status `word`, on a terminal only."""
    color = _COLORS.get(word or "")
    return click.style(text, fg=color) if color and sys.stdout.isatty() else text


def _instant(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def span(delta: timedelta | None) -> str:
    """A duration the way people read it: 0.25s, 42s, 3m 12s, 2h 5m, 3d 4h."""
    if delta is None:
        return "-"
    seconds = delta.total_seconds()
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    if seconds < 10:
        return f"{sign}{seconds:.2f}s"
    whole = int(seconds)
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            return f"{sign}{whole // size}{unit} {whole % size // sub_size}{sub}"
    if whole >= 60:
        return f"{sign}{whole // 60}m {whole % 60}s"
    return f"{sign}{whole}s"


def absolute(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def when(value: object, now: datetime | None = None) -> str:
    """`in 42s (2026-11-21 13:45:00 UTC)` or `3m 2s ago (...)`; `-` for no time."""
    moment = value if isinstance(value, datetime) else _instant(value)
    if moment is None:
        return "-"
    delta = moment - (now or datetime.now(timezone.utc))
    relative = f"in {span(delta)}" if delta >= timedelta(0) else f"{span(-delta)} ago"
    return f"{relative} ({absolute(moment)})"


def _table(headers: Sequence[str], rows: Sequence[Sequence[tuple[str, str | None]]]) -> None:
    """Aligned columns; each cell is (text, the word its color follows). Padding comes before
    color, so escape codes never skew the alignment."""
    widths = [max([len(h), *(len(row[i][0]) for row in rows)]) for i, h in enumerate(headers)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in rows:
        cells = [
            _painted(text.ljust(width), word)
            for (text, word), width in zip(row, widths, strict=True)
        ]
        click.echo("  ".join(cells).rstrip())


def _plain(text: object) -> tuple[str, None]:
    return ("-" if text in (None, "") else str(text), None)


def _status(word: object) -> tuple[str, str | None]:
    return (str(word), str(word)) if word else ("-", None)


def _last(row: Mapping[str, Any]) -> tuple[str, str | None]:
    if not row["last_status"]:
        return ("-", None)
    moment = _instant(row["last_run"])
    age = f" ({span(datetime.now(timezone.utc) - moment)} ago)" if moment else ""
    return (f"{row['last_status']}{age}", row["last_status"])


def describe_job(summary: Mapping[str, Any]) -> str:
    """One line about a job: `id: STATE, next run in 3s (...)`, with its paused reason."""
    parts = [f"{summary['id']}: {_painted(summary['state'], summary['state'])}"]
    if summary["next_run"]:
        parts.append(f"next run {when(summary['next_run'])}")
    if summary["paused_reason"]:
        parts.append(f"paused: {summary['paused_reason']}")
    return ", ".join(parts)


# -- commands ----------------------------------------------------------------------------------


@main.command("jobs")
@click.option("--project", "-p", default=None, help="Only this project's jobs.")
@json_option
@redis_options
def jobs(project: str | None, as_json: bool, redis_url: str, namespace: str) -> None:
    """List jobs: id, state, schedule, zone, next run, last status, paused reason."""
    rows = job_rows(connect(redis_url), Keys(namespace), project)
    if as_json:
        print_json(rows)
        return
    if not rows:
        click.echo("no jobs" + (f" in project {project!r}" if project else ""))
        return
    headers = ["ID", "STATE", "SCHEDULE", "ZONE", "NEXT RUN", "LAST", "PAUSED"]
    cells = [
        [
            _plain(row["id"]),
            _status(row["state"]),
            _plain(row["schedule"]),
            _plain(row["timezone"]),
            _plain(when(row["next_run"])),
            _last(row),
            _plain(row["paused_reason"]),
        ]
        for row in rows
    ]
    _table(headers, cells)


@main.command("show")
@click.argument("job_id", metavar="JOB")
@json_option
@redis_options
def show(job_id: str, as_json: bool, redis_url: str, namespace: str) -> None:
    """Show one job: its spec, state, counters, next run and watchdog timer."""
    connection, keys = connect(redis_url), Keys(namespace)
    job = _job(connection, keys, job_id)
    page = job_page(connection, keys, job)
    if as_json:
        print_json(page)
        return
    click.echo(f"{page['id']}  {_painted(page['state'], page['state'])}")
    for label, value in _page_lines(page, job.origin):
        click.echo(f"  {label:<14}{value}")
    click.echo("spec:")
    for key, value in page["spec"].items():
        click.echo(f"  {key}: {value if isinstance(value, str) else json.dumps(value)}")


def _page_lines(page: Mapping[str, Any], origin: str) -> Iterator[tuple[str, str]]:
    yield "schedule", f"{page['schedule']}  ({page['timezone']})"
    yield "next run", when(page["next_run"])
    if page["last_status"]:
        yield "last run", f"{page['last_status']}, scheduled for {when(page['last_run'])}"
    if page["paused_reason"]:
        yield "paused", page["paused_reason"]
    if page["start"] or page["until"]:
        yield "lifetime", f"start {when(page['start'])}, until {when(page['until'])}"
    if page["finished_reason"]:
        yield "finished", page["finished_reason"]
    yield "counters", ", ".join(f"{name} {count}" for name, count in page["counters"].items())
    for active in page["active"]:
        started = when(active["started_at"])
        yield "running", f"{active['id']} {active['status']} since {started}"
    if page["queued_starts"]:
        yield "queued starts", str(page["queued_starts"])
    if page["backlog"]:
        yield "backlog", ", ".join(absolute(d) for d in map(_instant, page["backlog"]) if d)
    yield "watchdog", when(page["watchdog_timer"])
    yield "origin", origin or "-"


@main.command("history")
@click.argument("job_id", metavar="JOB")
@click.option("-n", "limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@json_option
@redis_options
def history(job_id: str, limit: int, as_json: bool, redis_url: str, namespace: str) -> None:
    """Show a job's invocations, newest first, with their duration (finished - started) and
    lag (started - scheduled). A deleted job's history stays until it expires."""
    with job_errors():
        entries = history_of(connect(redis_url), Keys(namespace), job_id, limit)
    if as_json:
        print_json(entries)
        return
    if not entries:
        click.echo(f"no invocations of {job_id} yet")
        return
    headers = ["ID", "STATUS", "SCHEDULED FOR", "DURATION", "LAG", "ATTEMPT", "ERROR"]
    rows = []
    for entry in entries:
        run = Invocation.of(entry)
        scheduled = absolute(run.scheduled_for) if run.scheduled_for else "-"
        attempt = f"{run.attempt}{' (manual)' if run.manual else ''}" if run.attempt else "-"
        error = (run.error or "").splitlines()[0][:80] if run.error else None
        rows.append(
            [
                _plain(run.id),
                _status(run.status.value),
                _plain(scheduled),
                _plain(span(run.duration)),
                _plain(span(run.lag)),
                _plain(attempt),
                _plain(error),
            ]
        )
    _table(headers, rows)
