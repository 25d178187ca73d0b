"""Jobs declared with `@cronq.job`, applied in the tests by `cronq apply --module
tests.decorated_jobs`; a `cronq worker -q cronq-test-decorated` imports this module to run them
(the repository root is on its PYTHONPATH)."""

from __future__ import annotations

import cronq
from tests.rq_funcs import add  # a plain function imported here is not a job of this module

QUEUE = "cronq-test-decorated"

__all__ = ["QUEUE", "add", "every_second", "on_demand"]


@cronq.job("* * * * * *", queue=QUEUE, timeout="10s", metadata={"team": "tests"})
def every_second() -> str:
    return "tick"


@cronq.job("triggered", name="on-demand", queue=QUEUE)
def on_demand(greeting: str = "hello", *rest: str, **extra: str) -> str:
    """Optional, variadic and keyword parameters: callable without arguments, so a valid job."""
    return greeting
