"""`cronq worker`: an RQ worker for cronq's queue, and the releaser that moves due ticks from RQ's
scheduled registry into the queue.

RQ's own scheduler is a forked process that looks once a second, holds its lock for a minute
past its last heartbeat, and is only restarted elsewhere when a worker runs its maintenance
(every ten minutes by default): a tick could start a second late, and a killed worker could stop
every tick for minutes. Ours reuses RQ's release logic and lock script, but runs as a thread of
every worker: one holds a short lock and sleeps exactly until the next task falls due (never
longer than `release_interval`, so a sooner task added meanwhile is not missed); the others try
the lock each second and take over within `LOCK_TTL` when the holder dies.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from redis.exceptions import RedisError
from rq import SimpleWorker
from rq.scheduler import RQScheduler
from rq.scripts import acquire_or_refresh_lock

__all__ = ["DEFAULT_RELEASE_INTERVAL", "LOCK_TTL", "CronqWorker", "TickReleaser"]

log = logging.getLogger("cronq.worker")

DEFAULT_RELEASE_INTERVAL = 0.1
LOCK_TTL = 5  # seconds a dead releaser's lock outlives it
_MIN_SLEEP = 0.002


class TickReleaser(RQScheduler):
    """RQ's scheduler with a short lock, a sleep fitted to the next due task, and a thread's
    life instead of a process's."""

    release_interval = DEFAULT_RELEASE_INTERVAL

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._claimed_at = 0.0

    def run(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            try:
                if self.claim():
                    self.enqueue_scheduled_jobs()
                    wait = self.until_next_due()
                else:
                    wait = 1.0
            except RedisError as exc:  # Redis is away: try again, gently
                log.warning("tick releaser: %s", exc)
                wait = 1.0
            stopping.wait(wait)
        self.release()

    def claim(self) -> bool:
        """Acquire or refresh each queue's lock (at most once a second); True if we hold any."""
        if self._acquired_locks and time.monotonic() - self._claimed_at < 1:
            return True
        owned = {
            name
            for name in self._queue_names
            if acquire_or_refresh_lock(
                self.connection, self.get_locking_key(name), self.name, LOCK_TTL
            )
            != "taken"
        }
        if owned != self._acquired_locks:
            log.info("tick releaser %s now releases %s", self.name, sorted(owned) or "nothing")
            self._acquired_locks = owned
            self._scheduled_job_registries = []  # rebuilt for the owned queues on next release
        self._claimed_at = time.monotonic()
        return bool(owned)

    def release(self) -> None:
        with contextlib.suppress(RedisError):  # else the lock expires by itself within LOCK_TTL
            self.release_locks()

    def until_next_due(self) -> float:
        earliest: float | None = None
        for registry in self._scheduled_job_registries:
            first = self.connection.zrange(registry.key, 0, 0, withscores=True)
            if first:
                score = float(first[0][1])
                earliest = score if earliest is None else min(earliest, score)
        if earliest is None:
            return float(self.release_interval)
        return min(max(earliest - time.time(), _MIN_SLEEP), float(self.release_interval))


class CronqWorker(SimpleWorker):
    """A non-forking worker: cronq's own tasks are tiny, and forking per task would cost more
    than the task. Users' functions run in ordinary RQ workers (or `cronq worker --queues`)."""

    def __init__(
        self, *args: Any, release_interval: float = DEFAULT_RELEASE_INTERVAL, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.release_interval = release_interval
        self._stopping = threading.Event()
        self._releaser_thread: threading.Thread | None = None

    def _start_scheduler(self, burst: bool = False, *args: Any, **kwargs: Any) -> None:
        releaser = TickReleaser(self.queues, connection=self.connection, serializer=self.serializer)
        releaser.release_interval = self.release_interval
        self.scheduler = releaser
        if burst:
            if releaser.claim():
                releaser.enqueue_scheduled_jobs()
            releaser.release()
            return
        self._releaser_thread = threading.Thread(
            target=releaser.run, args=(self._stopping,), name="cronq-tick-releaser", daemon=True
        )
        self._releaser_thread.start()

    def stop_scheduler(self) -> None:
        self._stopping.set()
        if self._releaser_thread is not None:
            self._releaser_thread.join(timeout=LOCK_TTL)

    def run_maintenance_tasks(self) -> None:
        """RQ's maintenance, without its restart of a forked scheduler (ours is a thread)."""
        self.clean_registries()
        self.clean_group_registries()
