"""`cronq apply`: sync config files, and modules of `@cronq.job` functions, into Redis."""

from __future__ import annotations

import os
import sys

import click

from cronq.apply import apply_project
from cronq.cli.app import connect, json_option, main, print_json, redis_options
from cronq.decorators import load_sources
from cronq.engine import Engine


@main.command("apply")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--module",
    "-m",
    "modules",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE and apply its @cronq.job functions as project MODULE. Repeatable.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@json_option
@redis_options
def apply(
    paths: tuple[str, ...],
    modules: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
    redis_url: str,
    namespace: str,
) -> None:
    """Make Redis hold exactly the jobs the config files (and modules) declare.

    Every file and module is checked first; if anything is wrong nothing is applied, every
    problem is printed as `file:line: job NAME: field: problem`, and the exit status is 1. Then,
    per project and atomically: new jobs are added (+), changed ones updated (~), and jobs gone
    from the file removed (-), their history kept. Jobs added with the Python API are never
    removed. Applying the same sources again changes nothing.

    A module is imported from the current directory or PYTHONPATH; its decorated functions
    become project MODULE with `rq` targets, so the workers serving their queues must be able
    to import it too.

    \b
    Examples:
      cronq apply jobs/billing.yaml
      cronq apply jobs/*.yaml --dry-run
      cronq apply --module myapp.jobs
    """
    if not paths and not modules:
        raise click.UsageError("give config files (PATH...) and/or --module MODULE")
    if modules and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: the console script's path is not
    result = load_sources(paths, modules)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if not result.ok:
        for problem in result.problems:
            click.echo(str(problem), err=True)
        raise SystemExit(1)
    engine = Engine(connect(redis_url), namespace)
    plans = [apply_project(engine, project, dry_run=dry_run) for project in result.projects]
    if as_json:
        print_json({"dry_run": dry_run, "projects": [plan.as_dict() for plan in plans]})
        return
    for plan in plans:
        for change in plan.changes:
            click.echo(str(change))
        suffix = " (dry run: nothing applied)" if dry_run and plan.changes else ""
        click.echo(plan.summary() + suffix)
