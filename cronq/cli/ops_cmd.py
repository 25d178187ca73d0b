"""`cronq trigger / pause / resume / abort / delete`: an operator's hands on one job.

Each is one `cronq.Client` call, so the command line and the Python API cannot disagree. A
refusal (trigger while busy, abort with nothing running, resume of a job not paused) is the state
machine's, and its reason is what the operator reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cronq.cli.app import connect, json_option, main, print_json, redis_options
from cronq.cli.jobs_cmd import describe_job, job_errors
from cronq.client import Client, JobInfo

F = Callable[..., Any]


def _job_command(name: str) -> Callable[[F], F]:
    """A command on one job: `cronq NAME JOB [--json] [--redis-url] [--namespace]`."""

    def register(function: F) -> F:
        function = redis_options(json_option(function))
        function = click.argument("job_id", metavar="JOB")(function)
        main.command(name)(function)
        return function

    return register


def _act(
    redis_url: str, namespace: str, as_json: bool, verb: str, action: Callable[[Client], JobInfo]
) -> None:
    client = Client(connect(redis_url), namespace)
    with job_errors():
        info = action(client)
    if as_json:
        print_json(info.as_dict() | ({"deleted": True} if verb == "deleted" else {}))
    else:
        click.echo(f"{verb} {describe_job(info.as_dict())}")


@_job_command("trigger")
def trigger(job_id: str, as_json: bool, redis_url: str, namespace: str) -> None:
    """Run JOB now, outside its schedule.

    Refused (exit 1) when the job is busy and its overlap policy forbids another run, or when it
    is disabled or finished. A paused job runs once and stays paused.
    """
    _act(redis_url, namespace, as_json, "triggered", lambda client: client.trigger(job_id))


@_job_command("pause")
@click.option("--reason", default="", help="Why; shown by `cronq jobs` and `cronq show`.")
def pause(job_id: str, reason: str, as_json: bool, redis_url: str, namespace: str) -> None:
    """Stop JOB's ticks until `cronq resume`.

    Queued starts are dropped; an invocation already running goes on to its end.
    """
    _act(redis_url, namespace, as_json, "paused", lambda client: client.pause(job_id, reason))


@_job_command("resume")
def resume(job_id: str, as_json: bool, redis_url: str, namespace: str) -> None:
    """Resume a paused JOB from now: its next fire time after now, none of the missed ones."""
    _act(redis_url, namespace, as_json, "resumed", lambda client: client.resume(job_id))


@_job_command("abort")
@click.option("--reason", default="aborted by operator", show_default=True)
def abort(job_id: str, reason: str, as_json: bool, redis_url: str, namespace: str) -> None:
    """End JOB's active invocation as ABORTED (an `rq` target's RQ job is stopped).

    Refused (exit 1) when nothing is running. The schedule goes on.
    """
    _act(redis_url, namespace, as_json, "aborted", lambda client: client.abort(job_id, reason))


@_job_command("delete")
def delete(job_id: str, as_json: bool, redis_url: str, namespace: str) -> None:
    """Remove JOB. Its history stays readable (`cronq history`) until it expires.

    A job declared in a config file comes back when that file is applied again: remove it from
    the file instead. --json prints the job as it was, with `"deleted": true`.
    """
    _act(redis_url, namespace, as_json, "deleted", lambda client: client.delete(job_id))
