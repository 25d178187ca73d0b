"""The one user function every system runs: it records (job, its own start time, scheduled_for,
enqueued_at).

Each call RPUSHes "job|start|scheduled_for|enqueued_at" to the list `peers:runs` on
$PEERS_REDIS_URL. The start time is read first thing, before any Redis call. `scheduled_for` is
what the system passes, when it passes one: cronq puts it in the RQ job's
meta["cronq"]["scheduled_for"]; the others pass nothing. `enqueued_at` is the RQ job's own
`enqueued_at` (set by RQ when the job is pushed to its queue) when the function runs in an RQ
worker, else empty (APScheduler, Celery). Readers split on "|" and take the fields they know.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

import redis

_connection: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _connection
    if _connection is None:
        _connection = redis.Redis.from_url(os.environ["PEERS_REDIS_URL"])
    return _connection


def _stamp(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


def record(job: str, scheduled_for: float | str | None = None) -> None:
    started = time.time()
    enqueued_at: float | None = None
    try:
        from rq import get_current_job

        current = get_current_job()
    except Exception:
        current = None
    if current is not None:
        if scheduled_for is None:
            meta = (current.meta or {}).get("cronq")
            if meta:
                scheduled_for = meta.get("scheduled_for")
        if current.enqueued_at is not None:
            stamp = current.enqueued_at
            if stamp.tzinfo is None:  # RQ stores UTC
                stamp = stamp.replace(tzinfo=timezone.utc)
            enqueued_at = stamp.timestamp()
    if isinstance(scheduled_for, str):
        scheduled_for = datetime.fromisoformat(scheduled_for).timestamp()
    value = f"{job}|{started:.6f}|{_stamp(scheduled_for)}|{_stamp(enqueued_at)}"
    _redis().rpush("peers:runs", value)
