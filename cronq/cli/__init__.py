"""The `cronq` command line. Each module registers the commands of one concern on `main`."""

from cronq.cli import (  # noqa: F401  (registers commands)
    apply_cmd,
    config_cmd,
    jobs_cmd,
    ops_cmd,
    run_cmd,
    schedule_cmd,
    status_cmd,
    watchdog_cmd,
    worker_cmd,
)
from cronq.cli.app import main

__all__ = ["main"]
