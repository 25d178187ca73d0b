"""One APScheduler 3 process: N jobs `IntervalTrigger(seconds=1)` (its finest), Redis job store.

Started by harness.py; $PEERS_REDIS_URL, $PEERS_JOBS, $PEERS_FIRST (the first fire, a whole
second). Jobs are added with replace_existing (a second process replaces them with the same
definition). misfire_grace_time=60 (cronq's default grace; APScheduler's own default is 1 s),
coalesce=False, max_instances=1. The function runs in the scheduler's thread pool (20 threads):
APScheduler is not RQ-based.
"""

import os
from datetime import datetime, timezone
from urllib.parse import urlparse

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.redis import RedisJobStore
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.interval import IntervalTrigger
from userfunc import record

url = urlparse(os.environ["PEERS_REDIS_URL"])
jobs = int(os.environ["PEERS_JOBS"])
first = datetime.fromtimestamp(int(os.environ["PEERS_FIRST"]), timezone.utc)
scheduler = BlockingScheduler(
    jobstores={"default": RedisJobStore(host=url.hostname, port=url.port, db=0)},
    executors={"default": ThreadPoolExecutor(20)},
    job_defaults={"misfire_grace_time": 60, "coalesce": False, "max_instances": 1},
    timezone=timezone.utc,
)
for i in range(jobs):
    name = f"j{i:03d}"
    scheduler.add_job(
        record,
        IntervalTrigger(seconds=1, start_date=first),
        kwargs={"job": name},
        id=name,
        replace_existing=True,
    )
scheduler.start()
