"""One APScheduler 3 process: N jobs, Redis job store.

Started by harness.py; $PEERS_REDIS_URL, $PEERS_JOBS, $PEERS_FIRST (the first fire, a whole
second), $PEERS_EVERY (`second`: `IntervalTrigger(seconds=1, start_date=first)`, its finest;
`minute`: `CronTrigger(second=0)`, every whole minute, UTC), $PEERS_MISFIRE_GRACE (seconds,
default 60: cronq's default grace; APScheduler's own default is 1 s), $PEERS_RESTART (set: the jobs
are already in the RedisJobStore from the process before, so they are not added again: adding
them with replace_existing would store a next_run_time computed from now,
`BaseScheduler._real_add_job`, and drop the missed fire times). coalesce=False, max_instances=1.
Jobs are added with replace_existing (a second process replaces them with the same definition).
The function runs in the scheduler's thread pool (20 threads): APScheduler is not RQ-based.
"""

import os
from datetime import datetime, timezone
from urllib.parse import urlparse

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.redis import RedisJobStore
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from userfunc import record

url = urlparse(os.environ["PEERS_REDIS_URL"])
jobs = int(os.environ["PEERS_JOBS"])
first = datetime.fromtimestamp(int(os.environ["PEERS_FIRST"]), timezone.utc)
every = os.environ.get("PEERS_EVERY", "second")
grace = float(os.environ.get("PEERS_MISFIRE_GRACE", "60"))
scheduler = BlockingScheduler(
    jobstores={"default": RedisJobStore(host=url.hostname, port=url.port, db=0)},
    executors={"default": ThreadPoolExecutor(20)},
    job_defaults={"misfire_grace_time": grace, "coalesce": False, "max_instances": 1},
    timezone=timezone.utc,
)
if not os.environ.get("PEERS_RESTART"):
    for i in range(jobs):
        name = f"j{i:03d}"
        if every == "minute":
            trigger = CronTrigger(second=0, timezone=timezone.utc)
        else:
            trigger = IntervalTrigger(seconds=1, start_date=first)
        scheduler.add_job(record, trigger, kwargs={"job": name}, id=name, replace_existing=True)
scheduler.start()
