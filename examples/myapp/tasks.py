"""The function examples/rq_target.yaml runs: an ordinary RQ job function.

cronq enqueues `greet(greeting="hello")` on the queue `default`; whatever RQ worker takes it calls
it like any other RQ job. What cronq knows about the run is in the RQ job's `meta["cronq"]`:
job_id, invocation_id, scheduled_for (the schedule's time, ISO 8601), attempt, payload, metadata
and namespace. Returning ends the invocation as SUCCEEDED; raising, as FAILED.
"""

from __future__ import annotations

import logging

from rq import get_current_job

log = logging.getLogger(__name__)


def greet(greeting: str = "hello") -> str:
    job = get_current_job()
    info = job.meta.get("cronq", {}) if job is not None else {}
    # WARNING so that it shows with the RQ worker's default log level.
    log.warning(
        "%s from %s: invocation %s, scheduled for %s, attempt %s, payload %s",
        greeting,
        info.get("job_id"),
        info.get("invocation_id"),
        info.get("scheduled_for"),
        info.get("attempt"),
        info.get("payload"),
    )
    return f"{greeting} at {info.get('scheduled_for')}"
