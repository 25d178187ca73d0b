"""Client and server CPU of a transaction's writes: queued as commands in a MULTI, or sent as
one call of the script in cronq/writes.py inside the MULTI (what cronq does).

    python benchmarks/writes_bench.py [--jobs 200] [--batches 100]

Each batch is one transaction of `--jobs` jobs, 10 commands each, shaped like a trigger's writes
(state, watchdog index, a task's RQ record and its schedule, a users' RQ job with its queue and
expiry, a history entry trimmed and expired), on a fresh valkey-server on loopback.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import redis
from procstat import cpu_seconds

from cronq.redis_server import RedisServer
from cronq.writes import Writes

RECORD = {f"field{i}": "v" * 20 for i in range(18)}  # an RQ job record's size, about
STATE, ENTRY = "x" * 300, "y" * 250


def one_job(target: redis.client.Pipeline | Writes, job: int, batch: int) -> None:
    key = f"job:{job}"
    target.hset(key, mapping={"state": STATE, "version": batch})
    target.zadd("watchdog", {key: 1.5})
    target.hset(f"rq:job:t{job}", mapping=RECORD)
    target.zadd("scheduled", {f"t{job}": 7})
    target.hset(f"rq:job:u{job}", mapping=RECORD)
    target.rpush("queue", f"u{job}")
    target.expire(f"rq:job:u{job}", 100)
    target.lpush(f"history:{job}", ENTRY)
    target.ltrim(f"history:{job}", 0, 99)
    target.expire(f"history:{job}", 2_592_000)


def run(client: redis.Redis, server_pid: int, mode: str, jobs: int, batches: int) -> None:
    client_began, server_began = time.process_time(), cpu_seconds(server_pid)
    for batch in range(batches):
        with client.pipeline() as pipe:
            pipe.multi()
            writes = Writes()
            for job in range(jobs):
                one_job(pipe if mode == "commands" else writes, job, batch)
            writes.send(pipe)
            pipe.execute()
        client.delete("queue")
    n = jobs * batches
    client_us = (time.process_time() - client_began) / n * 1e6
    server_us = (cpu_seconds(server_pid) - server_began) / n * 1e6
    print(f"{mode:>8}: client {client_us:6.1f} µs, server {server_us:6.1f} µs per job (10 writes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs per transaction")
    parser.add_argument("--batches", type=int, default=100, help="transactions per round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
        assert server.pid is not None
        client = redis.Redis.from_url(server.url)
        for _ in range(args.rounds):
            for mode in ("commands", "script"):
                run(client, server.pid, mode, args.jobs, args.batches)


if __name__ == "__main__":
    main()
