"""`cronq validate` and `cronq schema`: config files checked and described, without Redis."""

from __future__ import annotations

import json

import click

from cronq.cli.app import json_option, main, print_json
from cronq.config import config_json_schema
from cronq.loader import LoadResult, load_paths


@main.command("validate")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@json_option
def validate(paths: tuple[str, ...], as_json: bool) -> None:
    """Check config files (YAML or TOML) the way `cronq apply` will; nothing touches Redis.

    Every problem of every file is printed on stderr, one line each, as
    `file:line: job NAME: field: problem`, and the exit status is 1. Warnings (valid but
    suspicious, e.g. a schedule that never fires) are printed with a `warning: ` prefix and do
    not fail the check. With --json, one object with `ok`, `projects`, `problems` and `warnings`
    is printed on stdout instead.

    \b
    Examples:
      cronq validate examples/billing.yaml
      cronq validate jobs/*.yaml jobs/*.toml --json
    """
    result = load_paths(paths)
    if as_json:
        print_json(_as_json(result))
    else:
        for warning in result.warnings:
            click.echo(f"warning: {warning}", err=True)
        for problem in result.problems:
            click.echo(str(problem), err=True)
        if result.ok:
            click.echo(_summary(result))
    if not result.ok:
        raise click.exceptions.Exit(1)


def _summary(result: LoadResult) -> str:
    jobs, projects = result.job_count, len(result.projects)
    files = ", ".join(project.file for project in result.projects)
    return f"ok: {_plural(jobs, 'job')} in {_plural(projects, 'project')} ({files})"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _as_json(result: LoadResult) -> dict[str, object]:
    return {
        "ok": result.ok,
        "projects": [
            {"project": project.name, "file": project.file, "jobs": project.job_ids()}
            for project in result.projects
        ],
        "problems": [problem.as_dict() for problem in result.problems],
        "warnings": [warning.as_dict() for warning in result.warnings],
    }


@main.command("schema")
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of cronq config files on stdout.

    Editors use it to complete and check config files as you type, e.g. with the YAML language
    server: put `# yaml-language-server: $schema=cronq.schema.json` at the top of a file.

    \b
    Example:
      cronq schema > cronq.schema.json
    """
    click.echo(json.dumps(config_json_schema(), indent=2))
