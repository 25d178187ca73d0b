"""`cronq worker`: cronq's task executor, the tick releaser, a watchdog, and (with `--queues`)
an ordinary RQ worker for users' queues, in one process.

The tick releaser moves due tasks from RQ's scheduled registry into cronq's queue. RQ's own
scheduler is a forked process that looks once a second, holds its lock for a minute past its last
heartbeat, and is only restarted elsewhere when a worker runs its maintenance (every ten minutes by
default): a tick could start a second late, and a killed worker could stop every tick for minutes.
Ours reuses RQ's release logic and lock script, but runs as a thread of every worker: one holds a
short lock and sleeps exactly until the next task falls due (never longer than `release_interval`,
so a sooner task added meanwhile is not missed); the others try the lock each second and take over
within `LOCK_TTL` when the holder dies.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.scheduler import RQScheduler
from rq.scripts import acquire_or_refresh_lock

from cronq.engine import Engine
from cronq.executor import DEFAULT_BATCH, DEFAULT_THREADS, TaskExecutor
from cronq.presence import WORKER_TTL, beat, workers_key
from cronq.watchdog import Watchdog

__all__ = ["DEFAULT_RELEASE_INTERVAL", "LOCK_TTL", "TickReleaser", "run_worker"]

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

    def release_once(self) -> None:
        """Burst mode: release what is due now, if no other releaser holds the lock."""
        if self.claim():
            self.enqueue_scheduled_jobs()
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


def run_worker(
    connection: Redis,
    namespace: str,
    *,
    user_queues: Sequence[str] = (),
    burst: bool = False,
    release_interval: float = DEFAULT_RELEASE_INTERVAL,
    batch: int = DEFAULT_BATCH,
    threads: int = DEFAULT_THREADS,
    watchdog: Watchdog | None = None,
    name: str | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (or, with `burst`, until nothing is due)."""
    name = name or uuid.uuid4().hex
    engine = Engine(connection, namespace)
    stopping = threading.Event()
    releaser = TickReleaser([engine.queue], connection=connection)
    releaser.release_interval = release_interval
    executor = TaskExecutor(engine, name, batch=batch, threads=threads)
    background = [] if burst else [threading.Thread(target=releaser.run, args=(stopping,))]
    if watchdog is not None and not burst:
        background.append(threading.Thread(target=watchdog.run, args=(stopping,)))
    background.append(threading.Thread(target=_heartbeat, args=(engine, name, stopping)))
    if burst:
        releaser.release_once()
    for thread in background:
        thread.daemon = True
        thread.start()
    try:
        if user_queues:
            # Users' functions run as RQ runs them: a forked work horse per job, which RQ's stop
            # command (cronq abort) can kill. cronq's own tasks go on in a thread beside it.
            tasks = threading.Thread(
                target=executor.run, args=(stopping,), kwargs={"burst": burst}, daemon=True
            )
            tasks.start()
            queues = [Queue(q, connection=connection) for q in user_queues]
            Worker(queues, connection=connection).work(burst=burst, with_scheduler=True)
            stopping.set()
            tasks.join()
        else:
            _stop_on_signals(stopping)
            executor.run(stopping, burst=burst)
    finally:
        stopping.set()
        for thread in background:
            thread.join(timeout=LOCK_TTL)


def _heartbeat(engine: Engine, name: str, stopping: threading.Event) -> None:
    while not stopping.is_set():
        with contextlib.suppress(RedisError):
            beat(engine.connection, workers_key(engine.namespace), name, time.time(), WORKER_TTL)
        stopping.wait(WORKER_TTL / 3)
    with contextlib.suppress(RedisError):
        engine.connection.zrem(workers_key(engine.namespace), name)


def _stop_on_signals(stopping: threading.Event) -> None:
    def stop(signum: int, frame: object) -> None:
        log.info("signal %d: finishing running targets, then stopping", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
