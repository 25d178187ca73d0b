"""The Redis layout of cronq's own state, under the namespace prefix (DESIGN §2).

    {ns}:job:{id}        hash: spec (the declared job, canonical JSON), start/until (resolved
                         instants, when set), state (JobState JSON), version, origin
                         (`api` for jobs added with cronq.Client, else the file or module
                         that applied it: apply never removes an `api` job)
    {ns}:watchdog        sorted set: job id -> WatchdogTimerTs (epoch seconds)
    {ns}:project:{p}     set of the project's job ids
    {ns}:project-names   set of project names (every job is in one project's set)
    {ns}:projects        hash: project -> JSON {revision, digest, applied_at}
    {ns}:history:{id}    list of finished history entries, newest first, capped, with a TTL
    {ns}:stats           hash of counters (watchdog repairs by kind)
    {ns}:repairs         sorted set of recent watchdog repairs, by time

Task-queue state is RQ's own keys; none of it is needed to rebuild a job's chain.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from redis import Redis

from cronq.config import JobSpec
from cronq.state_codec import decode_state
from cronq.statemachine import JobRules, JobState

__all__ = [
    "HISTORY_LIMIT",
    "HISTORY_TTL",
    "ORIGIN_API",
    "Keys",
    "StoredJob",
    "all_job_ids",
    "history_entries",
    "load_job",
    "rules_for",
    "text",
]

HISTORY_LIMIT = 100
HISTORY_TTL = timedelta(days=30)
ORIGIN_API = "api"


class Keys:
    """Key names under one namespace."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.watchdog = f"{namespace}:watchdog"
        self.project_names = f"{namespace}:project-names"
        self.projects = f"{namespace}:projects"
        self.stats = f"{namespace}:stats"
        self.repairs = f"{namespace}:repairs"

    def job(self, job_id: str) -> str:
        return f"{self.namespace}:job:{job_id}"

    def project(self, project: str) -> str:
        return f"{self.namespace}:project:{project}"

    def history(self, job_id: str) -> str:
        return f"{self.namespace}:history:{job_id}"


@dataclass(frozen=True)
class StoredJob:
    """One job as Redis holds it."""

    job_id: str
    project: str
    spec_json: str
    start: datetime | None
    until: datetime | None
    state: JobState
    version: int
    origin: str = ""

    @property
    def spec(self) -> JobSpec:
        return _evaluated(self.spec_json, self.start, self.until)[0]

    @property
    def rules(self) -> JobRules:
        return _evaluated(self.spec_json, self.start, self.until)[1]


JOB_FIELDS = ("spec", "start", "until", "state", "version", "origin")


def parse_job(job_id: str, values: list[Any]) -> StoredJob | None:
    """From HMGET of JOB_FIELDS; None when the job does not exist."""
    spec, start, until, state, version, origin = (_text(v) for v in values)
    if spec is None:
        return None
    return StoredJob(
        job_id=job_id,
        project=job_id.split("/", 1)[0],
        spec_json=spec,
        start=_instant(start),
        until=_instant(until),
        state=decode_state(state),
        version=int(version or 0),
        origin=origin or "",
    )


def all_job_ids(connection: Redis, keys: Keys) -> list[str]:
    """Every job id: the union of the project sets (one set entry per job, not two)."""
    projects = [text(name) for name in connection.smembers(keys.project_names)]
    if not projects:
        return []
    return sorted(text(m) for m in connection.sunion([keys.project(p) for p in projects]))


def load_job(connection: Redis, keys: Keys, job_id: str) -> StoredJob | None:
    return parse_job(job_id, connection.hmget(keys.job(job_id), JOB_FIELDS))


def rules_for(spec: JobSpec, start: datetime | None, until: datetime | None) -> JobRules:
    """The state machine's view of a declared job, with its lifetime resolved to instants."""
    return JobRules(
        schedule=spec.parsed_schedule(),
        zone=spec.zone,
        start=start,
        until=until,
        repeats=spec.repeats,
        overlap=spec.overlap,
        max_pending=spec.max_pending,
        max_concurrent=spec.max_concurrent,
        misfire=spec.misfire,
        misfire_grace=spec.misfire_grace,
        max_catch_up=spec.max_catch_up,
        failure=spec.failure_policy,
        timeout=spec.timeout,
    )


@functools.lru_cache(maxsize=32_768)
def _evaluated(
    spec_json: str, start: datetime | None, until: datetime | None
) -> tuple[JobSpec, JobRules]:
    """Validating a spec costs more than a step (~0.2 ms): a worker does it once per spec. An
    entry holds ~3 KB; the cache must hold every job a worker steps, or each step misses (the
    jobs come round in turn, the worst order for an LRU). The checks of a whole job (consistency,
    payload size, which has a limit of its own when applied) were made when it was applied."""
    spec = JobSpec.model_validate_json(spec_json, context={"stored": True})
    return spec, rules_for(spec, start, until)


def history_entries(connection: Redis, keys: Keys, job_id: str, limit: int) -> list[dict[str, Any]]:
    raw = connection.lrange(keys.history(job_id), 0, max(limit, 1) - 1)
    return [json.loads(item) for item in raw]


def text(value: Any) -> str:
    """A Redis reply as text (replies are bytes unless the client decodes them)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return text(value)


def _instant(value: str | None) -> datetime | None:
    return datetime.fromtimestamp(float(value), tz=timezone.utc) if value else None
