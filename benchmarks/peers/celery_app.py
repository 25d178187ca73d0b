"""Celery app for celery-redbeat: N beat entries (RedBeat stores the schedule and a lock in Redis),
task on queue `peers`.

$PEERS_EVERY `second` (default): `schedule(timedelta(seconds=1))`, Celery's finest: an interval;
`minute`: `crontab()`, every whole minute (app timezone UTC). $PEERS_REDIS_URL (broker and
RedBeat), $PEERS_JOBS. Started by harness.py.
"""

import os
from datetime import timedelta

import userfunc
from celery import Celery
from celery.schedules import crontab, schedule

url = os.environ["PEERS_REDIS_URL"]
app = Celery("peers", broker=url)
app.conf.redbeat_redis_url = url
app.conf.task_default_queue = "peers"
app.conf.task_ignore_result = True
app.conf.worker_prefetch_multiplier = 4


def every() -> schedule:
    return (
        crontab() if os.environ.get("PEERS_EVERY") == "minute" else schedule(timedelta(seconds=1))
    )


app.conf.beat_schedule = {
    f"j{i:03d}": {"task": "peers.record", "schedule": every(), "kwargs": {"job": f"j{i:03d}"}}
    for i in range(int(os.environ["PEERS_JOBS"]))
}


@app.task(name="peers.record")
def record(job: str) -> None:
    userfunc.record(job)
