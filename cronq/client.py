"""`cronq.Client`: the Python API, the command line's twin (DESIGN §7).

Every method is one engine step or one transaction, exactly what the matching `cronq` command
does, so a job added here behaves like one from a config file. Jobs added here are marked
`origin: api` and are never removed by `apply` of their project's file.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from redis import Redis

from cronq.apply import ProjectPlan, apply_project, delete_job, put_job
from cronq.config import JobSpec
from cronq.config_problems import ConfigProblem
from cronq.decorators import Place, load_sources, validate_jobs
from cronq.engine import Engine, StepResult, UnknownJob
from cronq.errors import ConfigError
from cronq.statemachine import (
    Abort,
    Event,
    InvocationStatus,
    JobStateName,
    Pause,
    Resume,
    TriggerNow,
)
from cronq.store import Keys, StoredJob, history_entries, load_job
from cronq.views import job_history, job_summary, last_entries, load_jobs

__all__ = ["API_SOURCE", "Client", "Invocation", "JobInfo", "history_of"]

API_SOURCE = "<api>"
"""The `file` of problems found in jobs given to `Client.add`."""

_CONFIG_SUFFIXES = (".yaml", ".yml", ".toml")


@dataclass(frozen=True)
class JobInfo:
    """One job as `cronq jobs` shows it, typed; `spec` is the job as declared."""

    id: str
    project: str
    name: str
    state: JobStateName
    schedule: str
    timezone: str
    next_run: datetime | None
    last_status: InvocationStatus | None
    last_run: datetime | None
    paused_reason: str | None
    origin: str
    spec: JobSpec = field(repr=False)
    summary: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, job: StoredJob, last: Mapping[str, Any] | None) -> JobInfo:
        summary = job_summary(job, dict(last) if last else None)
        return cls(
            id=job.job_id,
            project=job.project,
            name=job.job_id.partition("/")[2],
            state=job.state.name,
            schedule=summary["schedule"],
            timezone=summary["timezone"],
            next_run=job.state.next_run,
            last_status=InvocationStatus(last["status"]) if last else None,
            last_run=_instant(summary["last_run"]),
            paused_reason=job.state.paused_reason,
            origin=job.origin,
            spec=job.spec,
            summary=summary,
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: a row of `cronq jobs --json`."""
        return dict(self.summary)


@dataclass(frozen=True)
class Invocation:
    """One history entry: a run (or an OVERRUN/SKIPPED tick), as `cronq history` shows it."""

    id: str
    job: str
    status: InvocationStatus
    scheduled_for: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    attempt: int
    error: str | None
    manual: bool = False

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Invocation:
        return cls(
            id=str(entry["id"]),
            job=str(entry["job"]),
            status=InvocationStatus(entry["status"]),
            scheduled_for=_instant(entry.get("scheduled_for")),
            started_at=_instant(entry.get("started_at")),
            finished_at=_instant(entry.get("finished_at")),
            attempt=int(entry.get("attempt") or 0),
            error=entry.get("error"),
            manual=bool(entry.get("manual")),
        )

    @property
    def duration(self) -> timedelta | None:
        """finished - started: how long the target ran."""
        return _between(self.started_at, self.finished_at)

    @property
    def lag(self) -> timedelta | None:
        """started - scheduled_for: how late the run began after its (virtual) time."""
        return _between(self.scheduled_for, self.started_at)


class Client:
    """The jobs of one namespace, on a Redis given as a URL or a redis-py connection (one made
    without decode_responses, like RQ needs). Use it as a context manager to close a connection
    it opened itself."""

    def __init__(self, redis: Redis | str, namespace: str = "cronq") -> None:
        self._owned = isinstance(redis, str)
        connection = Redis.from_url(redis) if isinstance(redis, str) else redis
        if connection.connection_pool.connection_kwargs.get("decode_responses"):
            raise ValueError("cronq (like RQ) needs a Redis connection without decode_responses")
        self.connection = connection
        self.engine = Engine(connection, namespace)
        self.keys = self.engine.keys

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owned:
            self.connection.close()

    # -- jobs ----------------------------------------------------------------------------------

    def add(
        self, job_id: str, spec: JobSpec | Mapping[str, Any], overwrite: bool = True
    ) -> JobInfo:
        """Add the job `project/name`, or replace its spec (a spec change: the armed tick stays
        when the timing is the same). `spec` is a JobSpec or a config file's job without `name`.
        Raises ConfigError (nothing written) or JobExists (`overwrite=False`)."""
        project, spec = _validated(job_id, spec)
        put_job(self.engine, project, spec, overwrite=overwrite)
        return self.get(job_id)

    def get(self, job_id: str) -> JobInfo:
        return self._info(self._job(job_id))

    def list(self, project: str | None = None) -> builtins.list[JobInfo]:
        """Every job (or one project's), sorted by id."""
        jobs = load_jobs(self.connection, self.keys, project)
        lasts = last_entries(self.connection, self.keys, jobs)
        return [JobInfo.of(job, last) for job, last in zip(jobs, lasts, strict=True)]

    def delete(self, job_id: str) -> JobInfo:
        """Remove the job; its history stays until it expires. Returns the job as it was.
        Raises UnknownJob."""
        job = delete_job(self.engine, job_id)
        if job is None:
            raise UnknownJob(job_id)
        return self._info(job)

    def delete_prefix(self, prefix: str) -> int:
        """Remove every job whose id starts with `prefix` (`billing/` is a project); returns how
        many. An empty prefix is refused: it would remove everything."""
        if not prefix:
            raise ValueError("an empty prefix would delete every job; name a project or prefix")
        job_ids = sorted(job.job_id for job in load_jobs(self.connection, self.keys))
        return sum(
            delete_job(self.engine, job_id) is not None
            for job_id in job_ids
            if job_id.startswith(prefix)
        )

    # -- operator actions: each raises UnknownJob, or JobRefused with the machine's reason --------

    def trigger(self, job_id: str) -> JobInfo:
        """Run the job now, outside its schedule (refused if busy and overlap forbids it)."""
        return self._step(job_id, TriggerNow())

    def pause(self, job_id: str, reason: str = "") -> JobInfo:
        """No ticks until resumed; queued starts are dropped, a running invocation goes on."""
        return self._step(job_id, Pause(reason))

    def resume(self, job_id: str) -> JobInfo:
        """Continue from now: the next fire time after now, no storm of missed ones."""
        return self._step(job_id, Resume())

    def abort(self, job_id: str, reason: str = "aborted by operator") -> JobInfo:
        """End the active invocations as ABORTED (an `rq` target's RQ job is stopped)."""
        return self._step(job_id, Abort(reason))

    def history(self, job_id: str, limit: int = 20) -> builtins.list[Invocation]:
        """Newest first, what runs now included. A deleted job's history stays readable until
        it expires; UnknownJob when there is neither job nor history."""
        entries = history_of(self.connection, self.keys, job_id, limit)
        return [Invocation.of(entry) for entry in entries]

    def apply(
        self, sources: Iterable[str | os.PathLike[str]] | str, dry_run: bool = False
    ) -> builtins.list[ProjectPlan]:
        """`cronq apply` for config files and modules with `@cronq.job` functions (a name like
        `myapp.jobs`; paths are existing files or names ending in .yaml/.yml/.toml). Raises
        ConfigError with every problem; then nothing is applied."""
        paths, modules = _split_sources([sources] if isinstance(sources, str) else sources)
        result = load_sources(paths, modules)
        if not result.ok:
            raise ConfigError(result.problems)
        return [apply_project(self.engine, p, dry_run=dry_run) for p in result.projects]

    # -- internals -----------------------------------------------------------------------------

    def _job(self, job_id: str) -> StoredJob:
        job = load_job(self.connection, self.keys, job_id)
        if job is None:
            raise UnknownJob(job_id)
        return job

    def _info(self, job: StoredJob) -> JobInfo:
        return JobInfo.of(job, last_entries(self.connection, self.keys, [job])[0])

    def _step(self, job_id: str, event: Event) -> JobInfo:
        result: StepResult = self.engine.step(job_id, event)
        return self._info(replace(result.job, state=result.state))


def history_of(connection: Redis, keys: Keys, job_id: str, limit: int) -> list[dict[str, Any]]:
    """History entries as `cronq history --json` prints them; a deleted job's until they
    expire. Raises UnknownJob when there is neither the job nor a history."""
    job = load_job(connection, keys, job_id)
    if job is not None:
        return job_history(connection, keys, job, limit)
    entries = history_entries(connection, keys, job_id, limit)
    if not entries:
        raise UnknownJob(job_id)
    return entries


def _validated(job_id: str, spec: JobSpec | Mapping[str, Any]) -> tuple[str, JobSpec]:
    """The project and the checked spec of `add`, by the config file's own models."""
    project, slash, name = job_id.partition("/")
    raw = spec.model_dump(mode="json", exclude_defaults=True) if isinstance(spec, JobSpec) else spec
    if not slash or not name or "/" in name:
        message = f"expected a job id project/name, got {job_id!r}"
        raise ConfigError([ConfigProblem(API_SOURCE, None, None, "job_id", message)])
    given = raw.get("name", name)
    if given != name:
        message = f"the spec is named {given!r} but the job id says {name!r}"
        raise ConfigError([ConfigProblem(API_SOURCE, None, name, "name", message)])
    result = validate_jobs(project, [{**raw, "name": name}], [Place(API_SOURCE)], API_SOURCE)
    if not result.ok:
        raise ConfigError(result.problems)
    return project, result.projects[0].jobs[0]


def _split_sources(sources: Iterable[str | os.PathLike[str]]) -> tuple[list[str], list[str]]:
    paths: list[str] = []
    modules: list[str] = []
    for source in sources:
        text = os.fspath(source)
        is_path = (
            not isinstance(source, str)
            or os.path.exists(text)
            or text.endswith(_CONFIG_SUFFIXES)
            or os.sep in text
            or "/" in text
        )
        (paths if is_path else modules).append(text)
    return paths, modules


def _instant(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def _between(first: datetime | None, last: datetime | None) -> timedelta | None:
    return last - first if first is not None and last is not None else None
