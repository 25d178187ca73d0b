"""`cronq status`: the first thing an operator looks at. Jobs per state, lapsed watchdog timers,
recent repairs, live workers and watchdogs, and how far behind the task queue is."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import ScheduledJobRegistry
from rq.utils import utcparse

from cronq.presence import WORKER_TTL, present
from cronq.state_codec import decode_state
from cronq.store import Keys, all_job_ids, text
from cronq.watchdog import DEFAULT_INTERVAL

__all__ = ["service_status"]

# A watchdog beats at least once per interval; status does not know the interval, so it allows
# the default's three.
_WATCHDOG_TTL = 3 * DEFAULT_INTERVAL.total_seconds()


def service_status(
    connection: Redis, namespace: str, now: datetime, grace: timedelta
) -> dict[str, Any]:
    keys = Keys(namespace)
    queue = Queue(namespace, connection=connection)
    stamp = now.timestamp()
    return {
        "jobs": _jobs_per_state(connection, keys),
        "lapsed_watchdog_timers": connection.zcount(
            keys.watchdog, "-inf", stamp - grace.total_seconds()
        ),
        "repairs_last_hour": connection.zcount(keys.repairs, stamp - 3600, "+inf"),
        "repairs_total": {
            text(k).removeprefix("watchdog:"): int(v)
            for k, v in connection.hgetall(keys.stats).items()
            if text(k).startswith("watchdog:")
        },
        "workers": _present(connection, f"{namespace}:workers", stamp, WORKER_TTL),
        "watchdogs": _present(connection, f"{namespace}:watchdogs", stamp, _WATCHDOG_TTL),
        "queued_tasks": queue.count,
        "oldest_queued_task_age_seconds": _oldest_queued_age(queue, now),
        "oldest_due_tick_lag_seconds": _oldest_due_lag(queue, stamp),
    }


def _present(connection: Redis, key: str, stamp: float, ttl: float) -> list[dict[str, Any]]:
    return [
        {"name": name, "last_seen_seconds_ago": age}
        for name, age in present(connection, key, stamp, ttl)
    ]


def _jobs_per_state(connection: Redis, keys: Keys) -> dict[str, int]:
    job_ids = all_job_ids(connection, keys)
    reads = connection.pipeline(transaction=False)
    for job_id in job_ids:
        reads.hget(keys.job(job_id), "state")
    states = Counter(decode_state(raw).name.value for raw in reads.execute() if raw is not None)
    return dict(sorted(states.items()))


def _oldest_queued_age(queue: Queue, now: datetime) -> float | None:
    first = queue.connection.lindex(queue.key, 0)  # RQ pushes right and pops left: the oldest
    if first is None:
        return None
    enqueued = queue.connection.hget(Job.key_for(text(first)), "enqueued_at")
    if enqueued is None:
        return None
    return round((now - utcparse(text(enqueued))).total_seconds(), 3)


def _oldest_due_lag(queue: Queue, stamp: float) -> float | None:
    """How long the most overdue scheduled task has been due: a releaser should keep it near 0."""
    first = queue.connection.zrange(ScheduledJobRegistry(queue=queue).key, 0, 0, withscores=True)
    if not first:
        return None
    return round(max(stamp - float(first[0][1]), 0.0), 3)
