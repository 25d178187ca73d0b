"""`cronq abort` on an `rq` target: the user's function runs in a forking RQ worker
(`cronq worker -q QUEUE`), and RQ's stop command ends its work horse."""

from __future__ import annotations

from rq.job import Job, JobStatus

from cronq.targets.rq import rq_job_id
from tests.engine_harness import Cronq, wait_until

LONG_NAP = """
jobs:
  - name: long
    schedule: triggered
    rq: {func: tests.rq_funcs.nap, queue: naps, args: [60]}
"""


def test_abort_stops_the_users_function(harness: Cronq) -> None:
    harness.apply(LONG_NAP)
    harness.wait_ready([harness.start_worker("-q", "naps")])
    assert harness.cli("trigger", "proj/long").exit_code == 0

    def rq_job() -> Job | None:
        active = harness.show("proj/long")["active"]
        if not active or active[0]["status"] != "RUNNING":
            return None
        job = Job.fetch(rq_job_id(active[0]["id"]), connection=harness.connection)
        return job if job.get_status() == JobStatus.STARTED else None

    wait_until(lambda: rq_job() is not None, timeout=15, what="the function to be running")
    running = rq_job()
    assert running is not None
    assert harness.cli("abort", "proj/long").exit_code == 0
    wait_until(
        lambda: running.get_status(refresh=True) == JobStatus.STOPPED,
        timeout=15,
        what="RQ to stop the work horse",
    )
    (entry,) = harness.runs("proj/long")
    assert entry["status"] == "ABORTED"
    assert harness.show("proj/long")["state"] == "SCHEDULED"
