"""`cronq jobs`, `cronq show`, `cronq history`: what the jobs are doing."""

from __future__ import annotations

from typing import Any

import click

from cronq.cli.app import UserError, connect, json_option, main, print_json, redis_options
from cronq.store import Keys, StoredJob, load_job
from cronq.views import job_history, job_page, job_rows


def _job(connection: Any, keys: Keys, job_id: str) -> StoredJob:
    job = load_job(connection, keys, job_id)
    if job is None:
        raise UserError(f"no job {job_id!r} (job ids are project/name; `cronq jobs` lists them)")
    return job


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    cells = [[str(row.get(c) if row.get(c) is not None else "-") for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


@main.command("jobs")
@click.option("--project", "-p", default=None, help="Only this project's jobs.")
@json_option
@redis_options
def jobs(project: str | None, as_json: bool, redis_url: str, namespace: str) -> None:
    """List jobs: id, state, schedule, zone, next run, last status."""
    rows = job_rows(connect(redis_url), Keys(namespace), project)
    if as_json:
        print_json(rows)
        return
    columns = ["id", "state", "schedule", "timezone", "next_run", "last_status", "paused_reason"]
    _table(rows, columns)


@main.command("show")
@click.argument("job_id")
@json_option
@redis_options
def show(job_id: str, as_json: bool, redis_url: str, namespace: str) -> None:
    """Show one job: its spec, state, counters, next run and watchdog timer."""
    connection, keys = connect(redis_url), Keys(namespace)
    page = job_page(connection, keys, _job(connection, keys, job_id))
    if as_json:
        print_json(page)
        return
    for name, value in page.items():
        click.echo(f"{name + ':':18} {value if value not in (None, [], {}) else '-'}")


@main.command("history")
@click.argument("job_id")
@click.option("-n", "limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@json_option
@redis_options
def history(job_id: str, limit: int, as_json: bool, redis_url: str, namespace: str) -> None:
    """Show a job's invocations, newest first."""
    connection, keys = connect(redis_url), Keys(namespace)
    entries = job_history(connection, keys, _job(connection, keys, job_id), limit)
    if as_json:
        print_json(entries)
        return
    columns = ["id", "scheduled_for", "started_at", "finished_at", "status", "attempt", "error"]
    _table(entries, columns)
