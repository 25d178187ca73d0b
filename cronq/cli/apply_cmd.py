"""`cronq apply`: sync config files into Redis."""

from __future__ import annotations

import click

from cronq.apply import apply_project
from cronq.cli.app import connect, json_option, main, print_json, redis_options
from cronq.engine import Engine
from cronq.loader import load_paths


@main.command("apply")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@json_option
@redis_options
def apply(
    paths: tuple[str, ...], dry_run: bool, as_json: bool, redis_url: str, namespace: str
) -> None:
    """Make Redis hold exactly the jobs the config files declare.

    Every file is checked first; if anything is wrong nothing is applied, every problem is printed
    as `file:line: job NAME: field: problem`, and the exit status is 1. Then, per project and
    atomically: new jobs are added (+), changed ones updated (~), and jobs gone from the file
    removed (-), their history kept. Applying the same files again changes nothing.

    \b
    Examples:
      cronq apply jobs/billing.yaml
      cronq apply jobs/*.yaml --dry-run
    """
    result = load_paths(paths)
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
