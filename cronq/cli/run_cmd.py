"""`cronq run`: everything for one machine in one process tree."""

from __future__ import annotations

import click

from cronq.cli.app import main


@main.command("run")
@click.option(
    "--config",
    "configs",
    multiple=True,
    type=click.Path(),
    help="Config file to apply (repeatable).",
)
def run(configs: tuple[str, ...]) -> None:
    """Apply config files and run workers and the watchdog on an embedded Redis.

    Not yet: this command arrives with the engine. Until then `cronq validate` checks the files.
    """
    click.echo(
        "cronq run: not yet available (the engine is still being built); "
        "`cronq validate " + " ".join(configs or ("FILE",)) + "` checks config files today.",
        err=True,
    )
    raise SystemExit(1)
