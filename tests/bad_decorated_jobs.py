"""A module whose `@cronq.job` functions are wrong: applying it must apply nothing and name each
problem (`cronq apply --module tests.bad_decorated_jobs`)."""

from __future__ import annotations

import cronq


@cronq.job("@hourly")
def fine() -> None:
    """Valid on its own; not applied, because its module has problems."""


@cronq.job("@daily")
def needs_customer(customer_id: int) -> None:
    """A worker calls a job's function without arguments: this one can never run."""


@cronq.job("61 * * * *")
def bad_minute() -> None:
    """An invalid schedule is reported at the function's line, like a config file's."""
