"""`cronq worker`: an RQ worker for cronq's queue, with a scheduler that releases due ticks as they
fall due rather than once a second.

RQ's scheduler sleeps a fixed interval (1 s) between looks at its scheduled registries, so a tick
could start up to a second late. Ours sleeps until the earliest scheduled task is due, never longer
than `release_interval` (so a task scheduled meanwhile for sooner is not missed), and heartbeats
once a second as RQ's does. Idle, that is a handful of cheap ZRANGE calls a second.
"""

from __future__ import annotations

import time
from typing import Any

from rq import SimpleWorker
from rq.scheduler import RQScheduler

__all__ = ["DEFAULT_RELEASE_INTERVAL", "CronqWorker", "TickReleaser"]

DEFAULT_RELEASE_INTERVAL = 0.1
_MIN_SLEEP = 0.002


class TickReleaser(RQScheduler):
    """RQ's scheduler (same locks, registries and release logic), with a sleep fitted to the
    next due task."""

    release_interval = DEFAULT_RELEASE_INTERVAL

    def work(self) -> None:
        self._install_signal_handlers()
        self.register_birth()
        last_heartbeat = 0.0
        while True:
            if self._stop_requested:
                self.stop()
                break
            if self.should_reacquire_locks:
                self.acquire_locks()
            if time.monotonic() - last_heartbeat >= 1:
                self.heartbeat()
                last_heartbeat = time.monotonic()
            self.enqueue_scheduled_jobs()
            time.sleep(self.until_next_due())

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

    release_interval = DEFAULT_RELEASE_INTERVAL

    def _start_scheduler(
        self,
        burst: bool = False,
        logging_level: str | None = "INFO",
        date_format: str = "%H:%M:%S",
        log_format: str = "%(asctime)s %(message)s",
    ) -> None:
        scheduler = TickReleaser(
            self.queues,
            connection=self.connection,
            logging_level=logging_level if logging_level is not None else self.log.level,
            date_format=date_format,
            log_format=log_format,
            serializer=self.serializer,
        )
        scheduler.release_interval = self.release_interval
        self.scheduler = scheduler
        scheduler.acquire_locks()
        if not scheduler.acquired_locks:
            return
        if burst:
            try:
                scheduler.register_birth()
                scheduler.enqueue_scheduled_jobs()
            finally:
                scheduler.release_locks()
                scheduler.register_death()
        else:
            scheduler.start()

    def __init__(
        self, *args: Any, release_interval: float = DEFAULT_RELEASE_INTERVAL, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.release_interval = release_interval
