"""Jobs declared in Python with `@cronq.job`: the functions are the targets.

From the repository root (any Redis; see the README's quick start):

    cronq apply --module examples.decorated     # project `examples.decorated`, two jobs
    cronq worker -q reports -q default          # runs cronq's tasks and these functions
    cronq trigger examples.decorated/cleanup    # run one now

Workers import this module to call the functions, so it must be importable where they run (here:
started from the repository root, or with it on PYTHONPATH). A job's function is called without
arguments; one that needs some is reported at apply time and nothing is applied.
"""

from __future__ import annotations

import logging

import cronq

log = logging.getLogger(__name__)


@cronq.job(
    "0 0 * * *",
    timezone="UTC",
    failure_policy={"constant": {"delay": "30s", "max_retries": 3}},
)
def cleanup() -> None:
    """Every midnight UTC; a failure is retried three times, 30 seconds apart."""
    log.info("cleaning up")


@cronq.job("@every 30s", name="report", queue="reports", timeout="20s", overlap="skip")
def build_report(title: str = "status") -> str:
    """Every 30 seconds on queue `reports`; a parameter with a default is fine."""
    return f"{title}: ok"
