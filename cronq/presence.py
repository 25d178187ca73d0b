"""Who is alive: workers and watchdogs beat into a sorted set by time; `cronq status` reads it.
An entry not refreshed within its `ttl` is gone."""

from __future__ import annotations

from redis import Redis

from cronq.store import text

__all__ = ["WORKER_TTL", "beat", "present", "workers_key"]

WORKER_TTL = 15  # seconds without a heartbeat after which a worker counts as gone


def workers_key(namespace: str) -> str:
    return f"{namespace}:workers"


def beat(connection: Redis, key: str, name: str, now: float, ttl: float) -> None:
    with connection.pipeline(transaction=False) as pipe:
        pipe.zadd(key, {name: now})
        pipe.zremrangebyscore(key, "-inf", now - ttl)
        pipe.execute()


def present(connection: Redis, key: str, now: float, ttl: float) -> list[tuple[str, float]]:
    """(name, seconds since its last beat) of every member still alive."""
    entries = connection.zrangebyscore(key, now - ttl, "+inf", withscores=True)
    return [(text(entry[0]), round(now - float(entry[1]), 1)) for entry in entries]
