"""The one user function every system runs: it records (job, its own start time, scheduled_for).

Each call RPUSHes "job|start|scheduled_for" to the list `peers:runs` on $PEERS_REDIS_URL. The start
time is read first thing, before any Redis call. `scheduled_for` is what the system passes, when it
passes one: cronq puts it in the RQ job's meta["cronq"]["scheduled_for"]; the others pass nothing.
"""

from __future__ import annotations

import os
import time
from datetime import datetime

import redis

_connection: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _connection
    if _connection is None:
        _connection = redis.Redis.from_url(os.environ["PEERS_REDIS_URL"])
    return _connection


def record(job: str, scheduled_for: float | str | None = None) -> None:
    started = time.time()
    if scheduled_for is None:
        try:
            from rq import get_current_job

            current = get_current_job()
            meta = (current.meta or {}).get("cronq") if current is not None else None
            if meta:
                scheduled_for = meta.get("scheduled_for")
        except Exception:
            pass
    if isinstance(scheduled_for, str):
        scheduled_for = datetime.fromisoformat(scheduled_for).timestamp()
    value = f"{job}|{started:.6f}|{'' if scheduled_for is None else f'{scheduled_for:.6f}'}"
    _redis().rpush("peers:runs", value)
