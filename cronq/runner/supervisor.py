"""`cronq run`'s process tree: the server (embedded unless a URL is given), the config, the
workers, and the lines printed as invocations finish, until a signal stops it all in order.

One thread does everything, in a loop a tenth of a second long: no locks, and `preexec_fn` (which
is unsafe once threads exist) stays safe. Stopping order matters: workers first, warmly (they
finish their running targets, which needs Redis), then the server (SIGTERM: its append-only file
is flushed), then the data directory's lock.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType

from redis import Redis
from redis.exceptions import RedisError

from cronq.engine import Engine
from cronq.loader import LoadResult
from cronq.redis_server import RedisServer, RedisServerError
from cronq.runner.configs import ConfigFiles, apply_all, declared, report, user_queues
from cronq.runner.embedded import DataDir, DataDirBusy, start_server
from cronq.runner.fires import FireWatcher, describe
from cronq.runner.workers import WorkerPool
from cronq.views import load_jobs

__all__ = ["RunOptions", "Runner"]

_TICK = 0.1
_FIRES_EVERY = 0.5
_FILES_EVERY = 1.0
_JOBS_EVERY = 5.0  # with no config file: how often the list of jobs to follow is read again
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class RunOptions:
    configs: tuple[str, ...] = ()
    workers: int = 1
    queues: tuple[str, ...] = ()
    redis_url: str | None = None  # None: the embedded server in data_dir
    namespace: str = "cronq"
    data_dir: str = "./.cronq"
    stop_timeout: float = 30.0
    worker_args: tuple[str, ...] = ()  # more `cronq worker` options, for every worker
    metrics_port: int | None = None  # worker i serves metrics on metrics_port + i (0: any port)


class _Failed(Exception):
    """Something that ends `cronq run` with status 1; the message says what."""


class _Signals:
    """Counts SIGINT/SIGTERM/SIGHUP while installed: the first asks for a warm stop, a second
    one for haste."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        for number in _STOP_SIGNALS:
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]

    def _handle(self, number: int, frame: FrameType | None) -> None:
        self.count += 1

    @property
    def stopping(self) -> bool:
        return self.count > 0


class Runner:
    """One `cronq run`: `run()` returns its exit status."""

    def __init__(
        self, options: RunOptions, say: Callable[[str], None], warn: Callable[[str], None]
    ) -> None:
        self.options = options
        self.say = say
        self.warn = warn
        self.files = ConfigFiles(options.configs)
        self.data: DataDir | None = None
        self.server: RedisServer | None = None
        self.connection: Redis | None = None
        self.workers: WorkerPool | None = None
        self.fires: FireWatcher | None = None

    def run(self) -> int:
        """Check the config (nothing starts if it is wrong), then serve until a signal."""
        result = self.files.load()
        if not report(result, self.warn):
            return 1
        with _Signals() as signals:
            try:
                return self._serve(result, signals)
            except (_Failed, DataDirBusy, RedisServerError) as error:
                self.warn(f"cronq run: {error}")
                return 1
            except RedisError as error:
                self.warn(f"cronq run: Redis: {error}")
                return 1
            finally:
                self._shutdown(signals)

    def _serve(self, result: LoadResult, signals: _Signals) -> int:
        url = self._start_redis()
        if signals.stopping:
            return 0
        self.connection = Redis.from_url(url)
        engine = Engine(self.connection, self.options.namespace)
        apply_all(engine, result, self.say)
        job_ids, queues = self._followed(engine, result)
        self.fires = FireWatcher(self.connection, engine.keys)
        self.fires.watch(job_ids)
        self.workers = WorkerPool(
            self.options.workers,
            redis_url=url,
            namespace=self.options.namespace,
            queues=queues,
            extra_args=self.options.worker_args,
            metrics_port=self.options.metrics_port,
            say=self.say,
        )
        self.workers.start()
        self.say("running: Ctrl-C stops everything")
        return self._loop(engine, signals)

    def _start_redis(self) -> str:
        """The embedded server's URL once it answers, or the given URL once it answers."""
        if self.options.redis_url is not None:
            # Here, not at the top: cronq.cli imports this module to register `cronq run`.
            from cronq.cli.app import redact

            url = self.options.redis_url
            try:
                with Redis.from_url(url) as probe:
                    probe.ping()
            except (RedisError, ValueError) as error:
                raise _Failed(f"cannot use Redis at {redact(url)}: {error}") from None
            self.say(f"redis: {redact(url)}")
            return url
        data = DataDir(Path(self.options.data_dir), self.options.data_dir)
        data.lock()  # only then is it ours to clean up
        self.data = data
        leftover = self.data.stop_leftover_server()
        if leftover is not None:
            self.say(f"stopped the server a previous cronq run left running (pid {leftover})")
        self.server = start_server(self.data)
        self.say(f"redis: {self.server.url} (embedded, data in {self.data.shown})")
        return self.server.url

    def _followed(self, engine: Engine, result: LoadResult) -> tuple[list[str], set[str]]:
        """The jobs whose runs are printed, and the user queues the workers serve: those of the
        applied files or, with no file, of every job (read again every few seconds, to follow
        what `cronq apply` does meanwhile). --queues come on top."""
        if self.options.configs:
            job_ids, specs = declared(result)
        else:
            jobs = load_jobs(engine.connection, engine.keys)
            job_ids, specs = [job.job_id for job in jobs], [job.spec for job in jobs]
        return job_ids, user_queues(specs) | set(self.options.queues)

    def _follow(self, engine: Engine, result: LoadResult) -> None:
        assert self.fires is not None and self.workers is not None
        job_ids, queues = self._followed(engine, result)
        self.fires.watch(job_ids)
        self.workers.use_queues(queues)

    def _loop(self, engine: Engine, signals: _Signals) -> int:
        assert self.workers is not None
        next_fires = next_files = 0.0
        next_jobs = time.monotonic() + _JOBS_EVERY
        while not signals.stopping:
            if self.server is not None and not self.server.running:
                raise _Failed(f"the embedded server exited; see {self.server.log_path}")
            self.workers.check()
            now = time.monotonic()
            try:
                if now >= next_fires:
                    next_fires = now + _FIRES_EVERY
                    self._print_fires()
                if now >= next_files:
                    next_files = now + _FILES_EVERY
                    self._reapply_if_changed(engine)
                if not self.options.configs and now >= next_jobs:
                    next_jobs = now + _JOBS_EVERY
                    self._follow(engine, LoadResult())
            except RedisError as error:
                self.warn(f"Redis: {error} (trying again)")
                next_fires = next_files = now + _FILES_EVERY
            time.sleep(_TICK)
        return 0

    def _print_fires(self) -> None:
        assert self.fires is not None
        for entry in self.fires.poll():
            self.say(describe(entry))

    def _reapply_if_changed(self, engine: Engine) -> None:
        """A changed file is applied again; a broken one is reported and the last good config
        keeps running."""
        if not self.files.changed():
            return
        result = self.files.load()
        if not report(result, self.warn):
            self.warn("config not applied: the last good config keeps running")
            return
        self.say("config changed: applying it")
        try:
            apply_all(engine, result, self.say)
        except RedisError:
            self.files.forget()  # try again at the next look
            raise
        self._follow(engine, result)

    def _shutdown(self, signals: _Signals) -> None:
        """Workers, then the server, then the lock; each step even if one before it failed."""
        try:
            if self.workers is not None:
                self.say("stopping: workers finish their running targets (Ctrl-C again: kill)")
                self.workers.stop(self.options.stop_timeout, hurry=lambda: signals.count > 1)
                with contextlib.suppress(RedisError):
                    self._print_fires()  # what the workers finished while stopping
        finally:
            if self.connection is not None:
                self.connection.close()
            if self.server is not None:
                self.server.stop()
                self.say("server stopped")
            if self.data is not None:
                for name in ("url", "server.pid"):
                    self.data.remove(name)
                self.data.unlock()
            if self.workers is not None or self.server is not None:
                self.say("stopped")
