"""The `cronq` command line. Each module registers the commands of one concern on `main`."""

from cronq.cli import apply_cmd, config_cmd, jobs_cmd, run_cmd, schedule_cmd, worker_cmd  # noqa: F401  (registers commands)
from cronq.cli.app import main

__all__ = ["main"]
