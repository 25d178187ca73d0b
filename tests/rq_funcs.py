"""Functions the RQ target tests enqueue by dotted path (`tests.rq_funcs.<name>`)."""

from __future__ import annotations

import time


def add(a: int, b: int = 0) -> int:
    return a + b


def boom(message: str) -> None:
    raise ValueError(message)


def nap(seconds: float) -> None:
    time.sleep(seconds)
