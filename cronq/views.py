"""What `cronq jobs`, `show` and `history` print, as JSON-ready dicts (DESIGN §7): one place that
knows the shapes, for the command line and the Python API alike."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from redis import Redis

from cronq.statemachine import Invocation
from cronq.store import JOB_FIELDS, Keys, StoredJob, all_job_ids, history_entries, parse_job, text

__all__ = ["job_history", "job_page", "job_rows", "job_summary", "last_entries", "load_jobs"]


def load_jobs(connection: Redis, keys: Keys, project: str | None = None) -> list[StoredJob]:
    if project is None:
        job_ids = all_job_ids(connection, keys)
    else:
        job_ids = sorted(text(m) for m in connection.smembers(keys.project(project)))
    reads = connection.pipeline(transaction=False)
    for job_id in job_ids:
        reads.hmget(keys.job(job_id), JOB_FIELDS)
    jobs = (
        parse_job(job_id, values) for job_id, values in zip(job_ids, reads.execute(), strict=True)
    )
    return [job for job in jobs if job is not None]


def job_summary(job: StoredJob, last: dict[str, Any] | None) -> dict[str, Any]:
    spec, state = job.spec, job.state
    return {
        "id": job.job_id,
        "project": job.project,
        "state": state.name.value,
        "schedule": spec.schedule or f"once at {_iso(job.start)}",
        "timezone": spec.timezone,
        "next_run": _iso(state.next_run),
        "last_status": last["status"] if last else None,
        "last_run": last["scheduled_for"] if last else None,
        "paused_reason": state.paused_reason,
    }


def job_rows(connection: Redis, keys: Keys, project: str | None = None) -> list[dict[str, Any]]:
    jobs = load_jobs(connection, keys, project)
    lasts = last_entries(connection, keys, jobs)
    return [job_summary(job, last) for job, last in zip(jobs, lasts, strict=True)]


def last_entries(
    connection: Redis, keys: Keys, jobs: list[StoredJob]
) -> list[dict[str, Any] | None]:
    """The newest history entry of each job (None where it has none), in one round trip."""
    reads = connection.pipeline(transaction=False)
    for job in jobs:
        reads.lindex(keys.history(job.job_id), 0)
    return [_json(last) if last else None for last in reads.execute()]


def job_page(connection: Redis, keys: Keys, job: StoredJob) -> dict[str, Any]:
    state = job.state
    score = connection.zscore(keys.watchdog, job.job_id)
    last = history_entries(connection, keys, job.job_id, 1)
    return {
        **job_summary(job, last[0] if last else None),
        "spec": job.spec.model_dump(mode="json", exclude_defaults=True),
        "start": _iso(job.start),
        "until": _iso(job.until),
        "finished_reason": state.finished_reason,
        "counters": {
            "triggers": state.triggers,
            "overruns": state.overruns,
            "version": job.version,
        },
        "active": [_active_entry(job.job_id, a) for a in state.active],
        "queued_starts": len(state.pending),
        "backlog": [_iso(d.scheduled_for) for d in state.backlog],
        "watchdog_timer": _iso(datetime.fromtimestamp(score).astimezone()) if score else None,
    }


def job_history(connection: Redis, keys: Keys, job: StoredJob, limit: int) -> list[dict[str, Any]]:
    """Newest first: what is running now (from the job's state), then the recorded entries."""
    active = sorted(job.state.active, key=lambda a: a.started_at, reverse=True)
    running = [_active_entry(job.job_id, a) for a in active][:limit]
    return running + history_entries(connection, keys, job.job_id, limit - len(running))


def _active_entry(job_id: str, invocation: Invocation) -> dict[str, Any]:
    return {
        "id": invocation.id,
        "job": job_id,
        "scheduled_for": _iso(invocation.scheduled_for),
        "started_at": _iso(invocation.started_at),
        "finished_at": None,
        "status": invocation.status.value,
        "attempt": invocation.attempt,
        "error": None,
        "manual": invocation.manual,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _json(raw: bytes | str) -> dict[str, Any]:
    value = json.loads(raw)
    assert isinstance(value, dict)
    return value
