"""`cronq apply`: make a project in Redis what its config file says, atomically (DESIGN §6).

New jobs are enabled, changed jobs get a spec-changed event (a changed schedule re-arms the tick,
an unchanged one keeps it), jobs gone from the file are removed (their history stays until it
expires). Change is judged on the job as declared, so `start: 90s` is not a change on re-apply.

Jobs added through the Python API (`put_job`, origin `api`) share their project's key space but
not its file: applying the project's file never removes them, and a file that declares one takes
it over (shown as a change of `origin`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, TypeVar

from redis.client import Pipeline
from redis.exceptions import WatchError

from cronq.config import JobSpec
from cronq.engine import Engine
from cronq.errors import JobExists
from cronq.loader import LoadedProject
from cronq.statemachine import Enable, Event, JobState, Phase, SpecChanged, step
from cronq.store import JOB_FIELDS, ORIGIN_API, StoredJob, load_job, parse_job
from cronq.writes import Writes

__all__ = [
    "Change",
    "ProjectPlan",
    "apply_project",
    "canonical_spec",
    "delete_job",
    "put_job",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Change:
    op: Literal["+", "~", "-"]
    job_id: str
    fields: tuple[str, ...] = ()

    def __str__(self) -> str:
        detail = f" ({', '.join(self.fields)})" if self.fields else ""
        return f"{self.op} {self.job_id}{detail}"

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, "job": self.job_id, "fields": list(self.fields)}


@dataclass(frozen=True)
class ProjectPlan:
    project: str
    file: str
    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0
    applied: bool = False

    def summary(self) -> str:
        counts = {op: sum(1 for c in self.changes if c.op == op) for op in "+~-"}
        return (
            f"{self.project}: {counts['+']} added, {counts['~']} changed, {counts['-']} removed, "
            f"{self.unchanged} unchanged"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "file": self.file,
            "applied": self.applied,
            "changes": [c.as_dict() for c in self.changes],
            "unchanged": self.unchanged,
        }


def canonical_spec(spec: JobSpec) -> str:
    """The job as declared, in one spelling: what change is judged on and what Redis keeps."""
    return spec.model_dump_json(exclude_defaults=True)


def apply_project(engine: Engine, project: LoadedProject, *, dry_run: bool = False) -> ProjectPlan:
    """Sync one project in one transaction; retried if another writer touches its jobs."""
    keys = engine.keys
    declared = {spec.job_id(project.name): spec for spec in project.jobs}
    while True:
        with engine.connection.pipeline() as pipe:
            try:
                pipe.watch(keys.project(project.name))
                existing = {_text(m) for m in pipe.smembers(keys.project(project.name))}
                job_ids = sorted(existing | declared.keys())
                if job_ids:
                    pipe.watch(*(keys.job(job_id) for job_id in job_ids))
                stored = _load_all(engine, job_ids)
                plan = _plan(project, declared, stored, existing)
                if dry_run or not plan.changes:
                    return plan
                writes = Writes()
                _write(engine, writes, project, declared, stored, plan)
                writes.commit_in(pipe)
                pipe.execute()
                return replace(plan, applied=True)
            except WatchError:
                continue


def _load_all(engine: Engine, job_ids: list[str]) -> dict[str, StoredJob]:
    reads = engine.connection.pipeline(transaction=False)
    for job_id in job_ids:
        reads.hmget(engine.keys.job(job_id), JOB_FIELDS)
    loaded = (
        parse_job(job_id, values) for job_id, values in zip(job_ids, reads.execute(), strict=True)
    )
    return {job.job_id: job for job in loaded if job is not None}


def _plan(
    project: LoadedProject,
    declared: dict[str, JobSpec],
    stored: dict[str, StoredJob],
    existing: set[str],
) -> ProjectPlan:
    changes: list[Change] = []
    unchanged = 0
    for job_id, spec in declared.items():
        change = _job_change(job_id, spec, stored.get(job_id), project.file)
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    gone = (
        job_id
        for job_id in sorted(existing - declared.keys())
        if job_id not in stored or stored[job_id].origin != ORIGIN_API
    )
    changes += [Change("-", job_id) for job_id in gone]
    return ProjectPlan(project.name, project.file, changes, unchanged)


def _job_change(job_id: str, spec: JobSpec, old: StoredJob | None, origin: str) -> Change | None:
    """What writing `spec` from `origin` changes; None if nothing. Only a move between the API
    and a file counts as a change of origin: a file applied by another path is the same file."""
    if old is None:
        return Change("+", job_id)
    respecified = old.spec_json != canonical_spec(spec)
    moved = (old.origin == ORIGIN_API) != (origin == ORIGIN_API)
    if not (respecified or moved):
        return None
    fields = _changed_fields(old.spec, spec) if respecified else ()
    return Change("~", job_id, (*fields, "origin") if moved else fields)


def _changed_fields(old: JobSpec, new: JobSpec) -> tuple[str, ...]:
    before, after = old.model_dump(mode="json"), new.model_dump(mode="json")
    return tuple(name for name in after if before.get(name) != after[name])


def _write(
    engine: Engine,
    writes: Writes,
    project: LoadedProject,
    declared: dict[str, JobSpec],
    stored: dict[str, StoredJob],
    plan: ProjectPlan,
) -> None:
    now = engine.clock()
    for change in plan.changes:
        if change.op == "-":
            _remove_job(engine, writes, project.name, change.job_id)
        else:
            spec, old = declared[change.job_id], stored.get(change.job_id)
            _put_job(engine, writes, project.name, spec, old, project.file, now)
    revision = {
        "digest": _digest(declared),
        "file": project.file,
        "applied_at": now.isoformat(),
        "jobs": len(declared),
    }
    writes.hset(engine.keys.projects, {project.name: json.dumps(revision)})


def _put_job(
    engine: Engine,
    writes: Writes,
    project: str,
    spec: JobSpec,
    old: StoredJob | None,
    origin: str,
    now: datetime,
) -> None:
    """The writes that make `spec` the job: enable a new one, tell an existing one its spec
    changed."""
    keys = engine.keys
    job_id = spec.job_id(project)
    # A finished job whose definition changes is a new job: FINISHED itself stays final.
    fresh = old is None or old.state.phase is Phase.FINISHED
    start, until = _lifetime(spec, None if fresh else old, now)
    job = StoredJob(
        job_id=job_id,
        project=project,
        spec_json=canonical_spec(spec),
        start=start,
        until=until,
        state=JobState() if fresh or old is None else old.state,
        version=0 if old is None else old.version,
        origin=origin,
    )
    fields = {
        "spec": job.spec_json,
        "start": _timestamp(start),
        "until": _timestamp(until),
        "origin": origin,
    }
    # Empty fields are left out, not stored empty: each costs some 50 bytes per job in Redis.
    writes.hset(keys.job(job_id), mapping={name: v for name, v in fields.items() if v})
    if empty := [name for name, value in fields.items() if not value]:
        writes.hdel(keys.job(job_id), *empty)
    writes.sadd(keys.project_names, project)
    writes.sadd(keys.project(project), job_id)
    event: Event = Enable() if fresh else SpecChanged()
    state, actions = step(job.state, event, engine.world(now, job.rules))
    engine.write(writes, job, state, actions, now)


def _remove_job(engine: Engine, writes: Writes, project: str, job_id: str) -> None:
    """The removal of a job; its history stays until its TTL ends it."""
    keys = engine.keys
    writes.delete(keys.job(job_id))
    writes.zrem(keys.watchdog, job_id)
    writes.srem(keys.project(project), job_id)


def put_job(
    engine: Engine,
    project: str,
    spec: JobSpec,
    *,
    overwrite: bool = True,
    origin: str = ORIGIN_API,
) -> Change | None:
    """Add or replace one job and leave the rest of its project alone (the Python API). Returns
    the change, None when the job was already exactly this. Raises JobExists when the job exists
    and `overwrite` is false."""
    job_id = spec.job_id(project)

    def write(pipe: Pipeline) -> Change | None:
        old = load_job(pipe, engine.keys, job_id)
        if old is not None and not overwrite:
            raise JobExists(job_id)
        change = _job_change(job_id, spec, old, origin)
        if change is not None:
            writes = Writes()
            _put_job(engine, writes, project, spec, old, origin, engine.clock())
            writes.commit_in(pipe)
        return change

    return _transaction(engine, job_id, write)


def delete_job(engine: Engine, job_id: str) -> StoredJob | None:
    """Remove one job, whatever added it; its history stays until it expires. Returns the job
    as it was, None if there was none. Like a job gone from its file, a running invocation is not
    stopped (abort it first): its outcome finds no job and is dropped."""

    def remove(pipe: Pipeline) -> StoredJob | None:
        job = load_job(pipe, engine.keys, job_id)
        if job is not None:
            writes = Writes()
            _remove_job(engine, writes, job.project, job_id)
            writes.commit_in(pipe)
        return job

    return _transaction(engine, job_id, remove)


def _transaction(engine: Engine, job_id: str, body: Callable[[Pipeline], _T]) -> _T:
    """Run `body` with the job's key WATCHed, again whenever another writer got in between."""
    results: list[_T] = []

    def run(pipe: Pipeline) -> None:
        results.append(body(pipe))

    engine.connection.transaction(run, engine.keys.job(job_id))
    return results[-1]


def _lifetime(
    spec: JobSpec, old: StoredJob | None, now: datetime
) -> tuple[datetime | None, datetime | None]:
    """Resolve `start`/`until` to instants; a relative one keeps its instant while the declared
    value is unchanged. Relative starts fall on whole seconds, like fire times."""
    same_start = old is not None and old.spec.start == spec.start
    if same_start and old is not None:
        start = old.start
    else:
        start = spec.start.resolve(now.replace(microsecond=0)) if spec.start else None
    if same_start and old is not None and old.spec.until == spec.until:
        until = old.until
    else:
        until = spec.until.resolve(start or now) if spec.until else None
    return start, until


def _digest(declared: dict[str, JobSpec]) -> str:
    text = json.dumps({job_id: canonical_spec(s) for job_id, s in sorted(declared.items())})
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def _timestamp(value: datetime | None) -> str:
    return f"{value.timestamp():.6f}" if value else ""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
