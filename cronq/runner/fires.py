"""What `cronq run` prints as invocations finish: one line each, read from the jobs' history lists.

Every history list is newest first, so a poll reads one entry per watched job (LINDEX 0, all in
one round trip) and only a job whose head changed has its few newest entries read: the cost is
per job and per poll, never per entry kept. Entries are compared whole (their JSON text), which
tells apart two entries with the same invocation id (a retried tick).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from redis import Redis

from cronq.store import Keys

__all__ = ["FireWatcher", "describe"]

_CATCH_UP = 50  # newest entries read when a head changed; more in half a second are not shown
_MAX_ERROR = 200


class FireWatcher:
    """Finds the history entries added since the last look, for a set of jobs."""

    def __init__(self, connection: Redis, keys: Keys) -> None:
        self.connection = connection
        self.keys = keys
        self._heads: dict[str, bytes | None] = {}

    def watch(self, job_ids: Iterable[str]) -> None:
        """Follow these jobs from now on (what they ran before is not shown)."""
        wanted = sorted(set(job_ids))
        new = [job_id for job_id in wanted if job_id not in self._heads]
        self._heads = {job_id: self._heads.get(job_id) for job_id in wanted}
        self._heads.update(zip(new, self._read_heads(new), strict=True))

    def poll(self) -> list[dict[str, Any]]:
        """Entries finished since the last poll, oldest first."""
        job_ids = list(self._heads)
        changed = [
            (job_id, head)
            for job_id, head in zip(job_ids, self._read_heads(job_ids), strict=True)
            if head != self._heads[job_id]
        ]
        if not changed:
            return []
        reads = self.connection.pipeline(transaction=False)
        for job_id, _ in changed:
            reads.lrange(self.keys.history(job_id), 0, _CATCH_UP - 1)
        found: list[dict[str, Any]] = []
        for (job_id, head), entries in zip(changed, reads.execute(), strict=True):
            seen = self._heads[job_id]
            fresh = []
            for raw in entries:
                if raw == seen:
                    break
                fresh.append(raw)
            self._heads[job_id] = entries[0] if entries else head
            found += [json.loads(raw) for raw in reversed(fresh)]
        return sorted(found, key=_moment_of)

    def _read_heads(self, job_ids: list[str]) -> list[bytes | None]:
        if not job_ids:
            return []
        reads = self.connection.pipeline(transaction=False)
        for job_id in job_ids:
            reads.lindex(self.keys.history(job_id), 0)
        heads: list[bytes | None] = reads.execute()
        return heads


def describe(entry: dict[str, Any]) -> str:
    """`13:40:02 hello/tick SUCCEEDED 12 ms (lag 20 ms)`: local time it ended, how long it ran,
    and how late it started after its scheduled time."""
    scheduled = _instant(entry.get("scheduled_for"))
    started = _instant(entry.get("started_at"))
    finished = _instant(entry.get("finished_at"))
    moment = finished or scheduled
    parts = [
        f"{moment.astimezone():%H:%M:%S}" if moment else "--:--:--",
        str(entry.get("job")),
        str(entry.get("status")),
    ]
    if started and finished:
        parts.append(_span(finished - started))
        if scheduled:
            parts.append(f"(lag {_span(started - scheduled)})")
    elif scheduled:
        parts.append(f"(tick {scheduled.astimezone():%H:%M:%S})")
    attempt = entry.get("attempt")
    if isinstance(attempt, int) and attempt > 1:
        parts.append(f"attempt {attempt}")
    if entry.get("manual"):
        parts.append("manual")
    line = " ".join(parts)
    error = entry.get("error")
    if error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        line += f": {first[:_MAX_ERROR]}"
    return line


def _instant(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _moment_of(entry: dict[str, Any]) -> datetime:
    """When an entry happened: its end, or for a tick that did not run, its scheduled time."""
    moment = _instant(entry.get("finished_at")) or _instant(entry.get("scheduled_for"))
    return moment or datetime.min.replace(tzinfo=timezone.utc)


def _span(delta: timedelta) -> str:
    """`12 ms`, or `132.9 s` once milliseconds get hard to read."""
    seconds = delta.total_seconds()
    return f"{round(seconds * 1000)} ms" if abs(seconds) < 10 else f"{seconds:.1f} s"
