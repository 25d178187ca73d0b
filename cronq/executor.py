"""The lean path for cronq's own tasks: pop a batch of tick, start and report tasks from cronq's
RQ queue, step all their jobs in one transaction, and call the targets of the starts it committed.

cronq's tasks are RQ jobs (RQ's tools see them queued and scheduled, and an ordinary RQ worker can
run them through `cronq.tasks`), but RQ's per-job bookkeeping (heartbeats, registries, execution
records: some 27 round trips) costs far more than a task itself (one state-machine step). Here a
batch costs a handful of round trips whatever its size. A task popped by a worker that then dies
is not lost: a batch moves atomically from the queue into the worker's in-progress list
(`{ns}:wip:{worker}`), which the watchdog puts back on the queue when the worker is gone.

Targets run in a small thread pool, so a slow target does not hold up the ticks of other jobs;
targets that only enqueue (`rq`) are enqueued together, in one thread and a few round trips.
Their outcomes are committed with the next batch.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from redis.client import PubSub
from redis.exceptions import RedisError
from rq.job import Job

from cronq import metrics
from cronq.config import JobSpec
from cronq.engine import Batch, Engine, StepResult, is_report
from cronq.presence import WORKER_TTL, present, workers_key
from cronq.statemachine import Event, Invocation, InvocationStarting
from cronq.store import text
from cronq.targets import enqueues
from cronq.task_queue import wake_channel
from cronq.tasks import call_targets, event_of

Taken = list[tuple[str, bytes]]  # task ids with their calls (empty: the task is gone)

__all__ = ["DEFAULT_BATCH", "DEFAULT_THREADS", "TaskExecutor", "return_orphaned_tasks", "wip_key"]

log = logging.getLogger("cronq.executor")

DEFAULT_BATCH = 200
DEFAULT_THREADS = 16
_IDLE_WAIT = 1  # seconds a blocking pop waits before the loop looks around again
REPORT_LINGER = 0.1  # seconds: see `TaskExecutor._linger`
_BUSY_WAIT = 0.01  # how often outcomes of running targets are collected while nothing is queued
_BACKOFF, _MAX_BACKOFF = 0.5, 5.0  # seconds between tries while Redis is unavailable


# Take up to ARGV[1] tasks: move their ids from the queue to the in-progress list (in chunks:
# Lua's unpack() takes a few thousand values at most). Return them, after the ids ARGV[4...]
# already there, each with its call (empty if the task is gone), stamped with the time it was
# taken (ARGV[2]), so that the watchdog sees it is in hand and not lost. One round trip a batch.
_TAKE = """
local ids = {}
for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
if tonumber(ARGV[1]) > 0 then
  local popped = redis.call('LPOP', KEYS[1], ARGV[1])
  if popped then
    for i = 1, #popped, 1000 do
      redis.call('RPUSH', KEYS[2], unpack(popped, i, math.min(i + 999, #popped)))
    end
    for _, id in ipairs(popped) do ids[#ids + 1] = id end
  end
end
local calls = {}
for i, id in ipairs(ids) do
  local key = ARGV[3] .. id
  calls[i] = redis.call('HGET', key, 'data') or ''
  if calls[i] ~= '' then redis.call('HSET', key, 'cronq_taken', ARGV[2]) end
end
return {ids, calls}
"""
# Put a gone worker's in-progress tasks back at the head of the queue, in their order.
_RETURN = """
local ids = redis.call('LRANGE', KEYS[1], 0, -1)
for i = #ids, 1, -1 do redis.call('LPUSH', KEYS[2], ids[i]) end
redis.call('DEL', KEYS[1])
return #ids
"""


def wip_key(namespace: str, worker: str) -> str:
    return f"{namespace}:wip:{worker}"


def wips_key(namespace: str) -> str:
    return f"{namespace}:wips"


def return_orphaned_tasks(engine: Engine, now: float) -> int:
    """Tasks taken by workers that are gone go back on the queue (the watchdog calls this)."""
    connection, namespace = engine.connection, engine.namespace
    alive = {name for name, _ in present(connection, workers_key(namespace), now, WORKER_TTL)}
    returned = 0
    for member in connection.smembers(wips_key(namespace)):
        key = text(member)
        if key.removeprefix(f"{namespace}:wip:") in alive:
            continue
        returned += int(connection.eval(_RETURN, 2, key, engine.queue.key))
        connection.srem(wips_key(namespace), key)
    return returned


class TaskExecutor:
    def __init__(
        self,
        engine: Engine,
        name: str,
        *,
        batch: int = DEFAULT_BATCH,
        threads: int = DEFAULT_THREADS,
    ) -> None:
        self.engine = engine
        self.serializer = engine.queue.serializer
        # Outcomes drained from the pool but not yet committed (kept across a Redis error).
        self.outcome_backlog: list[tuple[str, Event]] = []
        self.registered = False
        self.wip = wip_key(engine.namespace, name)
        self.batch = batch
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="cronq-target")
        self.outcomes: queue.SimpleQueue[tuple[str, Event]] = queue.SimpleQueue()
        self.running = 0  # target calls in flight (changed by this loop's thread only)
        self.done_calls = 0  # target calls finished (counted by the pool's threads)
        self._done_lock = threading.Lock()
        self.take_script = engine.connection.register_script(_TAKE)
        self.unforgotten = True  # the in-progress list may hold tasks not yet forgotten
        self.wakeups: PubSub | None = None  # subscribed to the wake channel when first needed

    def run(self, stopping: threading.Event, *, burst: bool = False) -> None:
        """Work until `stopping` is set (or, in burst mode, until nothing is left to do); then
        wait for running targets and commit their outcomes."""
        failures = 0
        while not stopping.is_set():
            block = not burst or self.in_flight > 0  # burst mode waits only for its own targets
            try:
                worked = self.run_once(block=block)
            except RedisError as exc:  # Redis is away: nothing is lost, try again, gently
                failures += 1
                delay = min(_BACKOFF * 2 ** (failures - 1), _MAX_BACKOFF)
                log.warning("Redis unavailable (%s); retrying in %.1f s", exc, delay)
                self._unsubscribe()  # subscribed afresh when next needed
                stopping.wait(delay)
                continue
            failures = 0
            if not worked and burst and not self.in_flight:
                break
        self.pool.shutdown(wait=True)
        self._unsubscribe()
        with contextlib.suppress(RedisError):  # else the watchdog returns what is left
            self.run_once(block=False, take=False)
            self.engine.connection.srem(wips_key(self.engine.namespace), self.wip)

    @property
    def in_flight(self) -> int:
        with self._done_lock:
            return self.running - self.done_calls

    def run_once(self, *, block: bool, take: bool = True) -> bool:
        """One batch: outcomes reported since the last one, then tasks from the queue. False if
        there was nothing to do."""
        if not self.registered:  # so that the watchdog finds our in-progress list if we die
            self.engine.connection.sadd(wips_key(self.engine.namespace), self.wip)
            self.registered = True
        self.outcome_backlog += self._drain_outcomes()
        events = list(self.outcome_backlog)
        wait = None if events or not block else (_BUSY_WAIT if self.in_flight else _IDLE_WAIT)
        taken = self._take(wait) if take else []
        if taken:
            self.unforgotten = True
        events += self._events_of(taken)
        if events:
            began = time.perf_counter()
            batch = self.engine.step_many(events, start_due=True)
            self.outcome_backlog.clear()  # committed: only now may they be forgotten
            if (counts := metrics.active()) is not None:
                counts.batch(self.engine.namespace, len(events), time.perf_counter() - began)
            self._call_targets(events, batch)
        if taken:
            self._forget([task_id for task_id, _ in taken])
            self.unforgotten = False
        return bool(events or taken)

    def _take(self, wait: float | None) -> Taken:
        """Up to a batch of tasks, moved into this worker's in-progress list; with `wait`, block
        that long for the first one. Tasks left there (a batch that met an error, or a worker
        restarted under the same name) come first."""
        if self.unforgotten:
            if leftover := self.engine.connection.lrange(self.wip, 0, -1):
                return self._take_ready(0, [text(task_id) for task_id in leftover])
            self.unforgotten = False
        taken = self._take_ready(self.batch)
        if not taken and wait is not None:
            taken = self._take_blocking(wait)
        return self._linger(taken)

    def _take_ready(self, count: int, held: Sequence[str] = ()) -> Taken:
        """`count` tasks from the queue, after those `held` in the in-progress list already."""
        now = self.engine.clock().timestamp()
        args: list[str | float] = [count, now, Job.key_for(""), *held]
        ids, calls = self.take_script(keys=[self.engine.queue.key, self.wip], args=args)
        return [(text(task_id), call) for task_id, call in zip(ids, calls, strict=True)]

    def _take_blocking(self, wait: float) -> Taken:
        """Block up to `wait` seconds for a task; then take what else is ready with it."""
        queue_key, connection = self.engine.queue.key, self.engine.connection
        # Redis takes fractional seconds here; redis-py's annotation says int.
        first = connection.blmove(queue_key, self.wip, wait, "LEFT", "RIGHT")  # type: ignore[arg-type]
        if first is None:
            return []
        return self._take_ready(self.batch - 1, [text(first)])

    def _linger(self, taken: Taken) -> Taken:
        """A batch of nothing but a few reports waits up to REPORT_LINGER for more tasks: the
        outcomes of RQ jobs trickle in one by one as the users' workers finish them, and a batch
        each would cost a transaction each. A tick or start that comes meanwhile ends the wait
        at once: its arrival is published (`wake_channel`), and the wait is for that, so it
        costs no round trips. (A task released by RQ's own scheduler is not published: it waits
        out the linger.)"""
        if not self._only_reports(taken):
            return taken
        wakeups = self._wakeups()
        while wakeups.get_message(timeout=0) is not None:  # what was published before now
            pass
        deadline = time.monotonic() + REPORT_LINGER
        taken += self._take_ready(self.batch - len(taken))  # what came before the subscription
        while self._only_reports(taken) and (left := deadline - time.monotonic()) > 0:
            wakeups.get_message(timeout=left)
            taken += self._take_ready(self.batch - len(taken))
        return taken

    def _only_reports(self, taken: Taken) -> bool:
        return 0 < len(taken) < self.batch and all(is_report(t) for t, _ in taken)

    def _wakeups(self) -> PubSub:
        if self.wakeups is None:
            connection = self.engine.connection
            self.wakeups = connection.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            self.wakeups.subscribe(wake_channel(self.engine.queue))
        return self.wakeups

    def _unsubscribe(self) -> None:
        if self.wakeups is not None:
            with contextlib.suppress(RedisError):
                self.wakeups.close()
            self.wakeups = None

    def _events_of(self, taken: Taken) -> list[tuple[str, Event]]:
        """The event each task carries. Only the call is read (not RQ's whole job record): for
        cronq's tasks that is all there is to know. A task gone meanwhile has nothing to do."""
        events = (self._event_for(task_id, call) for task_id, call in taken if call)
        return [event for event in events if event is not None]

    def _event_for(self, task_id: str, data: bytes) -> tuple[str, Event] | None:
        try:
            function, _, args, _ = self.serializer.loads(_inflate(data))
            event = event_of(self.engine, str(function), tuple(args))
        except Exception:
            function, event = "?", None
        if event is None:
            log.error("task %s on cronq's queue is not cronq's (%s): dropped", task_id, function)
        return event

    def _call_targets(self, events: list[tuple[str, Event]], batch: Batch) -> None:
        """Call the target of every invocation this batch committed as STARTING (from a start
        task, or in its place) that is still active at the batch's end (a later event in it may
        have replaced it)."""
        jobs = {r.job.job_id: r.job for r in batch.results if isinstance(r, StepResult)}
        starts = [
            (job_id, event.invocation_id)
            for job_id, event in events
            if isinstance(event, InvocationStarting)
        ]
        starts += [(job.job_id, invocation_id) for job, invocation_id in batch.started]
        calls: list[tuple[str, JobSpec, Invocation]] = []
        for job_id, invocation_id in starts:
            state = batch.states.get(job_id)
            active = state.active if state else ()
            invocation = next((a for a in active if a.id == invocation_id), None)
            if invocation is not None:
                calls.append((job_id, jobs[job_id].spec, invocation))
        enqueued = [call for call in calls if enqueues(call[1].target)]
        if enqueued:
            self._submit(enqueued)  # quick: all in one thread, in a few round trips
        for call in calls:
            if not enqueues(call[1].target):
                self._submit([call])  # may be slow: a thread each

    def _submit(self, calls: list[tuple[str, JobSpec, Invocation]]) -> None:
        self.running += 1
        self.pool.submit(self._call, calls)

    def _call(self, calls: list[tuple[str, JobSpec, Invocation]]) -> None:
        try:
            events = call_targets(self.engine, calls)
            for (job_id, _, _), event in zip(calls, events, strict=True):
                self.outcomes.put((job_id, event))
        finally:
            with self._done_lock:
                self.done_calls += 1

    def _drain_outcomes(self) -> list[tuple[str, Event]]:
        drained: list[tuple[str, Event]] = []
        while True:
            try:
                drained.append(self.outcomes.get_nowait())
            except queue.Empty:
                return drained

    def _forget(self, task_ids: list[str]) -> None:
        """Done tasks leave no trace, as RQ's own do with result_ttl=0."""
        self.engine.connection.delete(self.wip, *(Job.key_for(task_id) for task_id in task_ids))


def _inflate(data: bytes) -> bytes:
    """RQ stores a job's call compressed (older RQ did not)."""
    try:
        return zlib.decompress(data)
    except zlib.error:
        return data
