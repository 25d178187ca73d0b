"""The floor for RQ-based systems: an ideal scheduler that costs nothing and is never late.

At each whole second it enqueues the N jobs on the `peers` queue in one pipeline, passing the
second as `scheduled_for`. Whatever lag the harness then measures is what the RQ workers add
between a job entering the queue and the user function starting: no scheduler on RQ can do
better with the same workers. Run by the harness as `--system rq-floor`; stops on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType

import redis
from rq import Queue
from userfunc import record

running = True


def stop(signum: int, frame: FrameType | None) -> None:
    global running
    running = False


def main() -> None:
    signal.signal(signal.SIGTERM, stop)
    connection = redis.Redis.from_url(os.environ["PEERS_REDIS_URL"])
    queue = Queue("peers", connection=connection)
    jobs = [f"j{i:03d}" for i in range(int(os.environ["PEERS_JOBS"]))]
    second = int(time.time()) + 1
    while running:
        time.sleep(max(0.0, second - time.time()))
        with connection.pipeline() as pipe:
            for job in jobs:
                kwargs = {"job": job, "scheduled_for": float(second)}
                queue.enqueue_call(record, kwargs=kwargs, pipeline=pipe)
            pipe.execute()
        second += 1
    sys.exit(0)


if __name__ == "__main__":
    main()
