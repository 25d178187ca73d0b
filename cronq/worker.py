"""`cronq worker`: cronq's task executor, the tick releaser, a watchdog, and (with `--queues`)
an ordinary RQ worker for users' queues, in one process.

The tick releaser moves due tasks from RQ's scheduled registry into cronq's queue. RQ's own
scheduler is a forked process that looks once a second, holds its lock for a minute past its last
heartbeat, is only restarted elsewhere when a worker runs its maintenance (every ten minutes by
default), and fetches every due job into Python to move it: a tick could start a second late, a
killed worker could stop every tick for minutes, and 500 ticks due at once cost 500 fetches. Ours
takes RQ's lock for the queue (so it never races an RQ scheduler), moves due tasks in one Lua call,
and runs as a thread of every worker: one holds a short lock and sleeps exactly until the next task
falls due (never longer than `release_interval`, so a sooner task added meanwhile is not missed);
the others try the lock each second and take over within `LOCK_TTL` when the holder dies.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import time
import uuid
from collections.abc import Sequence

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.job import Job
from rq.registry import ScheduledJobRegistry
from rq.scheduler import RQScheduler
from rq.scripts import acquire_or_refresh_lock, release_lock

from cronq import metrics
from cronq.engine import Engine
from cronq.executor import DEFAULT_BATCH, DEFAULT_THREADS, TaskExecutor
from cronq.presence import WORKER_TTL, beat, workers_key
from cronq.task_queue import wake_channel
from cronq.watchdog import Watchdog

__all__ = ["DEFAULT_RELEASE_INTERVAL", "LOCK_TTL", "TickReleaser", "run_worker"]

log = logging.getLogger("cronq.worker")

DEFAULT_RELEASE_INTERVAL = 0.1
LOCK_TTL = 5  # seconds a dead releaser's lock outlives it
_MIN_SLEEP = 0.002


class TickReleaser:
    """Moves due tasks from RQ's scheduled registry of a queue into the queue, under RQ's own
    scheduler lock for it (so it never races an RQ scheduler), with a short lease."""

    def __init__(self, queue: Queue, *, release_interval: float = DEFAULT_RELEASE_INTERVAL) -> None:
        self.queue = queue
        self.connection = queue.connection
        self.release_interval = release_interval
        self.name = uuid.uuid4().hex
        self.lock_key = RQScheduler.get_locking_key(queue.name)
        self.registry_key = ScheduledJobRegistry(queue=queue).key
        self.holding = False
        self._claimed_at = 0.0

    def run(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            try:
                wait = self.release_due() if self.claim() else 1.0
            except RedisError as exc:  # Redis is away: try again, gently
                log.warning("tick releaser: %s", exc)
                wait = 1.0
            stopping.wait(wait)
        self.release()

    def release_once(self) -> None:
        """Burst mode: release what is due now, if no other releaser holds the lock."""
        if self.claim():
            self.release_due()
        self.release()

    def claim(self) -> bool:
        """Acquire or refresh the lock (at most once a second); True while we hold it."""
        if self.holding and time.monotonic() - self._claimed_at < 1:
            return True
        outcome = acquire_or_refresh_lock(self.connection, self.lock_key, self.name, LOCK_TTL)
        holding = outcome != "taken"
        if holding != self.holding:
            log.info("tick releaser %s %s", self.name, "holds the lock" if holding else "stands by")
        self.holding, self._claimed_at = holding, time.monotonic()
        return holding

    def release_due(self) -> float:
        """Move every task that is due into the queue; seconds until the next one is due."""
        now = time.time()
        next_due = self.connection.eval(
            _RELEASE,
            2,
            self.registry_key,
            self.queue.key,
            math.floor(now),
            Job.key_for(""),
            wake_channel(self.queue),
        )
        if not next_due:
            return self.release_interval
        return min(max(float(next_due) - now, _MIN_SLEEP), self.release_interval)

    def release(self) -> None:
        if self.holding:
            with contextlib.suppress(RedisError):  # else the lock expires within LOCK_TTL
                release_lock(self.connection, self.lock_key, self.name)
            self.holding = False


# RQ scores scheduled tasks in whole seconds: a task is due once the second it names has begun.
# Workers waiting for more reports hear of the release (`wake_channel`). Returns the score of the
# next task to fall due (one round trip a look: a releaser looks ten times a second).
# Lua's unpack() takes a few thousand values at most: ids go in chunks (10,000 jobs may fire in
# the same second).
_RELEASE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 10000)
for i = 1, #ids, 1000 do
  local chunk = {unpack(ids, i, math.min(i + 999, #ids))}
  for _, id in ipairs(chunk) do redis.call('HSET', ARGV[2] .. id, 'status', 'queued') end
  redis.call('ZREM', KEYS[1], unpack(chunk))
  redis.call('RPUSH', KEYS[2], unpack(chunk))
end
if #ids > 0 then redis.call('PUBLISH', ARGV[3], 'tick') end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return first[2]
"""


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
    metrics_port: int | None = None,
    metrics_host: str = metrics.DEFAULT_HOST,
) -> None:
    """Run until SIGTERM/SIGINT (or, with `burst`, until nothing is due). With `metrics_port`,
    serve Prometheus metrics meanwhile (MetricsError if the port cannot be bound)."""
    name = name or uuid.uuid4().hex
    server = None if metrics_port is None else metrics.serve(metrics_port, metrics_host)
    if server is not None:
        log.info("worker %s: metrics at %s", name, server.url, extra={"worker": name})
    engine = Engine(connection, namespace)
    stopping = threading.Event()
    releaser = TickReleaser(engine.queue, release_interval=release_interval)
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
        if server is not None:
            server.close()


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
