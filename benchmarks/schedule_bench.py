"""Cost of "the next fire time after t": cronq.schedule against croniter 7, same run, same inputs.

    python benchmarks/schedule_bench.py [--starts N] [--repeat N] [--seed N]

For every expression and zone, the benchmark takes a spread of start instants (uniform over
2026-2030, plus some within hours of the zone's DST jumps) and times, per start:

* cronq:           parse_schedule(expr, zone).next_after(t)   (parse is the cached lookup the
                   state machine pays on every step)
* croniter (new):  croniter(expr, t_local, ...).get_next(datetime)   (the usual way to call it)
* croniter (reuse): one iterator per expression, it.set_current(t_local); it.get_next(datetime)
                   (the cheapest way to call it: the goal is measured against this one)

croniter gets an aware start in the zone, and `second_at_beginning=True` for 6 and 7 fields.
It cannot parse `LW` or `nL` (day-of-week), so those rows have no croniter figures. Each figure
is the median per call; calls on one start are repeated and averaged to get above the timer's
resolution.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from croniter import croniter

from cronq.schedule import parse_schedule

# (expression, croniter can parse it)
EXPRESSIONS: list[tuple[str, bool]] = [
    ("*/15 * * * *", True),
    ("0 9 * * MON-FRI", True),
    ("30 2 * * *", True),
    ("15,45 8-18 * * 1-5", True),
    ("0 */2 * * *", True),
    ("0 0 1 * *", True),
    ("0 0 13 * 5", True),
    ("0 0 * * MON#1", True),
    ("0 12 15W * *", True),
    ("0 0 LW * *", False),
    ("0 18 * * 5L", False),
    ("*/10 * * * * *", True),
    ("30 0 9 * * MON-FRI", True),
    ("0 30 2 * * *", True),
    ("0 0 0 1 1 *", True),
    ("0 0 12 * * * 2026-2035", True),
    ("0 30 1 ? * SUN 2026-2099", True),
    ("0 0 0 L * ? *", True),
]
Call = Callable[[datetime], object]
ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe"]


def start_instants(zone: ZoneInfo, count: int, rng: random.Random) -> list[datetime]:
    """Uniform instants over 2026-2030, a quarter of them within 3 hours of a DST jump."""
    begin = datetime(2026, 1, 1, tzinfo=timezone.utc)
    span = int(timedelta(days=5 * 365).total_seconds())
    jumps = dst_jumps(zone, begin, span)
    instants = []
    for i in range(count):
        if jumps and i % 4 == 0:
            moment = rng.choice(jumps) + timedelta(seconds=rng.randint(-10800, 10800))
        else:
            moment = begin + timedelta(seconds=rng.randint(0, span))
        instants.append(moment)
    return instants


def dst_jumps(zone: ZoneInfo, begin: datetime, span: int) -> list[datetime]:
    """Instants (to the hour, UTC) where `zone` changes its offset: an hourly scan, run once."""
    jumps = []
    previous = begin.astimezone(zone).utcoffset()
    for hour in range(span // 3600):
        moment = begin + timedelta(hours=hour)
        offset = moment.astimezone(zone).utcoffset()
        if offset != previous:
            jumps.append(moment)
            previous = offset
    return jumps


def per_call_ns(call: Call, starts: list[datetime], repeat: int) -> list[float]:
    costs = []
    for start in starts:
        begin = time.perf_counter_ns()
        for _ in range(repeat):
            call(start)
        costs.append((time.perf_counter_ns() - begin) / repeat)
    return costs


def cronq_call(expression: str, zone: ZoneInfo) -> Call:
    parse_schedule(expression, zone)  # warm the parse cache, as in a running service
    return lambda t: parse_schedule(expression, zone).next_after(t)


def croniter_new_call(expression: str, options: dict[str, bool]) -> Call:
    return lambda t: croniter(expression, t, **options).get_next(datetime)


def croniter_reuse_call(expression: str, options: dict[str, bool], first: datetime) -> Call:
    iterator = croniter(expression, first, **options)

    def call(t: datetime) -> object:
        iterator.set_current(t, force=True)
        return iterator.get_next(datetime)

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=200, help="start instants per case")
    parser.add_argument("--repeat", type=int, default=20, help="calls per start instant")
    parser.add_argument("--seed", type=int, default=2027)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    # The same start instants for every expression in a zone, so rows compare like with like.
    starts_by_zone = {name: start_instants(ZoneInfo(name), args.starts, rng) for name in ZONES}
    everything: dict[str, list[float]] = {"cronq": [], "new": [], "reuse": [], "cronq-cmp": []}
    print(f"Python {platform.python_version()}, {args.starts} starts x {args.repeat} calls each")
    print(f"{'expression':<26} {'cronq us':>9} {'croniter new':>13} {'croniter reuse':>15} ratio")
    for expression, croniter_parses in EXPRESSIONS:
        row: dict[str, list[float]] = {"cronq": [], "new": [], "reuse": []}
        options = {"second_at_beginning": True} if len(expression.split()) > 5 else {}
        for zone_name in ZONES:
            zone = ZoneInfo(zone_name)
            starts = starts_by_zone[zone_name]
            row["cronq"] += per_call_ns(cronq_call(expression, zone), starts, args.repeat)
            if croniter_parses:
                local = [s.astimezone(zone) for s in starts]
                new, reuse = (
                    croniter_new_call(expression, options),
                    croniter_reuse_call(expression, options, local[0]),
                )
                row["new"] += per_call_ns(new, local, args.repeat)
                row["reuse"] += per_call_ns(reuse, local, args.repeat)
        everything["cronq"] += row["cronq"]
        cronq_us = statistics.median(row["cronq"]) / 1000
        if row["new"]:
            everything["cronq-cmp"] += row["cronq"]
            everything["new"] += row["new"]
            everything["reuse"] += row["reuse"]
            new_us = statistics.median(row["new"]) / 1000
            reuse_us = statistics.median(row["reuse"]) / 1000
            ratio = f"{cronq_us / reuse_us:.2f}"
            print(f"{expression:<26} {cronq_us:>9.2f} {new_us:>13.2f} {reuse_us:>15.2f} {ratio:>5}")
        else:
            print(f"{expression:<26} {cronq_us:>9.2f} {'n/a':>13} {'n/a':>15}")
    cronq_all = statistics.median(everything["cronq"]) / 1000
    cronq_cmp = statistics.median(everything["cronq-cmp"]) / 1000
    new_all = statistics.median(everything["new"]) / 1000
    reuse_all = statistics.median(everything["reuse"]) / 1000
    print(f"\nmedian per call, all cases: cronq {cronq_all:.2f} us")
    print(
        f"median per call, cases croniter parses: cronq {cronq_cmp:.2f} us, croniter new "
        f"{new_all:.2f} us, croniter reuse {reuse_all:.2f} us; "
        f"cronq/croniter-reuse = {cronq_cmp / reuse_all:.2f}, cronq/croniter-new = "
        f"{cronq_cmp / new_all:.2f}"
    )


if __name__ == "__main__":
    main()
