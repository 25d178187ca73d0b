"""Unit tests of cronq.schedule and `cronq next`: parser details, error messages, caching, DST,
`@every`, and a differential test against croniter where its semantics are ours.

The big acceptance table lives in test_schedule_table.py.
"""

from __future__ import annotations

import json
import random
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner
from croniter import croniter

from cronq.cli import schedule_cmd
from cronq.cli.app import main
from cronq.schedule import Schedule, ScheduleError, parse_schedule, parse_timezone

UTC = timezone.utc
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")


def fires(expression: str, after: datetime, count: int, zone: str = "UTC") -> list[str]:
    """The next `count` fire times as ISO strings in `zone`, checking each is strictly later."""
    schedule = parse_schedule(expression, zone)
    out: list[str] = []
    moment: datetime | None = after
    while moment is not None and len(out) < count:
        found = schedule.next_after(moment)
        if found is None:
            break
        assert found > moment and found.tzinfo is UTC
        out.append(found.astimezone(ZoneInfo(zone)).isoformat())
        moment = found
    return out


def first(expression: str, after: datetime, zone: str = "UTC") -> str | None:
    found = fires(expression, after, 1, zone)
    return found[0] if found else None


JAN_2027 = datetime(2027, 1, 1, tzinfo=UTC)  # a Friday


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("5 4 * * *", "2027-01-01T04:05:00+00:00"),
        ("30 5 4 * * *", "2027-01-01T04:05:30+00:00"),  # seconds come first
        ("30 5 4 * * * 2029", "2029-01-01T04:05:30+00:00"),
        ("0 0 * JAN-mar sun", "2027-01-03T00:00:00+00:00"),  # names, any case
        ("0 0 * * FRI-SUN", "2027-01-02T00:00:00+00:00"),  # SUN ends a range as 7
        ("7 7 * * 7", "2027-01-03T07:07:00+00:00"),  # 7 is Sunday
        ("5-5 0 * * *", "2027-01-01T00:05:00+00:00"),  # an equal range is one value
        ("10-20/30 0 * * *", "2027-01-01T00:10:00+00:00"),  # a step past its range: first only
        ("50/5 0 * * *", "2027-01-01T00:50:00+00:00"),  # a/n runs to the maximum
        ("0 0 * * 5/2", "2027-01-03T00:00:00+00:00"),  # ... which is 7 (Sunday) in day-of-week
        ("05 00 * * *", "2027-01-01T00:05:00+00:00"),  # leading zeros
        ("0\t0  *  * *", "2027-01-02T00:00:00+00:00"),  # any whitespace between fields
        ("@Daily", "2027-01-02T00:00:00+00:00"),
        ("@hourly", "2027-01-01T01:00:00+00:00"),
        ("@weekly", "2027-01-03T00:00:00+00:00"),
        ("@monthly", "2027-02-01T00:00:00+00:00"),
        ("@annually", "2028-01-01T00:00:00+00:00"),
    ],
)
def test_next_fire_time(expression: str, expected: str) -> None:
    assert first(expression, JAN_2027) == expected


@pytest.mark.parametrize(
    ("expression", "field", "words"),
    [
        ("", None, "empty"),
        ("   ", None, "empty"),
        ("1 2 3 4", None, "got 4"),
        ("1 2 3 4 5 6 7 8", None, "got 8"),
        ("@fortnightly", None, "unknown macro"),
        ("@daily extra", None, "unknown macro"),
        ("@every", None, "needs a duration"),
        ("@every soon", None, "invalid duration"),
        ("@every 500ms", None, "1s"),
        ("60 * * * *", "minute", "out of range 0-59"),
        ("* 24 * * *", "hour", "out of range 0-23"),
        ("0 0 0 * *", "day-of-month", "out of range 1-31"),
        ("0 0 * 13 *", "month", "out of range 1-12"),
        ("0 0 * * 8", "day-of-week", "out of range 0-7"),
        ("60 0 0 * * *", "second", "out of range"),
        ("0 0 0 * * * 1969", "year", "out of range 1970-2099"),
        ("*/0 * * * *", "minute", "at least 1"),
        ("1,,2 * * * *", "minute", "empty item"),
        ("1, * * * *", "minute", "empty item"),
        ("5- * * * *", "minute", "missing value"),
        ("-5 * * * *", "minute", "missing value"),
        ("*/ * * * *", "minute", "missing step"),
        ("5-1 * * * *", "minute", "reversed"),
        ("0 0 * * FRI-MON", "day-of-week", "reversed"),
        ("+5 * * * *", "minute", "'+5'"),
        ("1_0 * * * *", "minute", "'1_0'"),
        ("\u0663 * * * *", "minute", "non-ASCII"),
        ("0 0 * FOO *", "month", "unknown value 'FOO'"),
        ("0 0 * * MONDAY", "day-of-week", "unknown value"),
        ("JAN * * * *", "minute", "names are not allowed"),
        ("? * * * *", "minute", "'?'"),
        ("0 0 ?,1 * *", "day-of-month", "'?'"),
        ("L * * * *", "minute", "L and W"),
        ("0 0 * * 1W", "day-of-week", "L and W"),
        ("0 0 1#2 * *", "day-of-month", "'#'"),
        ("0 0 * * 1#0", "day-of-week", "1-5"),
        ("0 0 * * 1#6", "day-of-week", "1-5"),
        ("0 0 * * L", "day-of-week", "nL"),
        ("0 0 L/2 * *", "day-of-month", "without ranges or steps"),
        ("0 0 1-5W * *", "day-of-month", "invalid value"),
        ("0 0 32W * *", "day-of-month", "out of range"),
        ("*/1x * * * *", "minute", "invalid step"),
        ("1/2/3 * * * *", "minute", "invalid step"),
        ("99999999999999999999 * * * *", "minute", "out of range"),
    ],
)
def test_rejected(expression: str, field: str | None, words: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(expression)
    assert caught.value.field == field
    assert words in caught.value.problem
    assert caught.value.expression == expression.strip()
    assert str(caught.value).startswith(f"invalid schedule {expression.strip()!r}: ")


def test_timezones() -> None:
    assert parse_timezone("Europe/London") == ZoneInfo("Europe/London")
    for bad in ["", "Mars/Olympus", "../etc/passwd", "/etc/localtime", "utc "]:
        with pytest.raises(ScheduleError) as caught:
            parse_timezone(bad)
        assert caught.value.field == "timezone"
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("* * * * *", "Nowhere/Land")
    assert caught.value.field == "timezone"
    assert parse_schedule("* * * * *", NEW_YORK).timezone is NEW_YORK
    assert parse_schedule("* * * * *", UTC).timezone.key == "UTC"


def test_parses_are_cached_and_bound_to_their_zone() -> None:
    a = parse_schedule(" 1 2 * * * ", "Europe/London")
    assert parse_schedule("1 2 * * *", ZoneInfo("Europe/London")) is a
    assert parse_schedule("1 2 * * *", "UTC") is not a
    assert a.expression == "1 2 * * *"
    assert isinstance(a, Schedule) and not a.manual


def test_naive_after_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_schedule("* * * * *").next_after(datetime(2027, 1, 1))


# --- day fields --------------------------------------------------------------------------------


def test_quartz_day_of_month() -> None:
    assert fires("0 0 L * *", JAN_2027, 3) == [
        "2027-01-31T00:00:00+00:00",
        "2027-02-28T00:00:00+00:00",
        "2027-03-31T00:00:00+00:00",
    ]
    # 2027-01-31 is a Sunday, 2027-04-30 a Friday.
    assert fires("0 0 LW 1-4 *", JAN_2027, 4)[0::3] == [
        "2027-01-29T00:00:00+00:00",
        "2027-04-30T00:00:00+00:00",
    ]
    # 2027-05-01 is a Saturday: 1W never leaves the month, so Monday the 3rd.
    assert first("0 0 1W 5 *", JAN_2027) == "2027-05-03T00:00:00+00:00"
    # 2027-10-31 is a Sunday: 31W goes back to Friday the 29th.
    assert first("0 0 31W 10 *", JAN_2027) == "2027-10-29T00:00:00+00:00"
    # 2027-01-16 is a Saturday (Friday 15th), 2027-01-17 a Sunday (Monday 18th).
    assert fires("0 0 16W,17W 1 *", JAN_2027, 2) == [
        "2027-01-15T00:00:00+00:00",
        "2027-01-18T00:00:00+00:00",
    ]
    # 31W in a 30-day month: no match that month.
    assert first("0 0 31W 4,6 *", JAN_2027) is None


def test_quartz_day_of_week() -> None:
    assert fires("0 0 * * MON#1", JAN_2027, 2) == [
        "2027-01-04T00:00:00+00:00",
        "2027-02-01T00:00:00+00:00",
    ]
    assert first("0 0 * * 7#1", JAN_2027) == "2027-01-03T00:00:00+00:00"
    # A 5th Friday exists in January 2027 (29th) but not in February.
    assert fires("0 0 * * 5#5", JAN_2027, 2) == [
        "2027-01-29T00:00:00+00:00",
        "2027-04-30T00:00:00+00:00",
    ]
    assert fires("0 0 * * 5L,0L", JAN_2027, 2) == [
        "2027-01-29T00:00:00+00:00",
        "2027-01-31T00:00:00+00:00",
    ]
    assert first("0 0 12 ? * FRIL", JAN_2027) == "2027-01-29T12:00:00+00:00"


def test_day_of_month_and_day_of_week() -> None:
    # Both restricted: either matches (the 13th, or a Friday).
    assert fires("0 0 13 * 5", JAN_2027, 3) == [
        "2027-01-08T00:00:00+00:00",
        "2027-01-13T00:00:00+00:00",
        "2027-01-15T00:00:00+00:00",
    ]
    # `*/2` counts as unrestricted: both must match (odd days that are Fridays). croniter ORs.
    assert fires("0 0 */2 * 5", JAN_2027, 2) == [
        "2027-01-15T00:00:00+00:00",
        "2027-01-29T00:00:00+00:00",
    ]
    # `?` is `*`.
    assert first("0 0 ? * MON", JAN_2027) == first("0 0 * * MON", JAN_2027)


@pytest.mark.parametrize(
    "expression",
    ["0 0 31 2 *", "0 0 30 2 *", "0 0 30W 2 *", "0 0 0 1 1 * 1999", "0 0 0 29 2 * 2025-2027"],
)
def test_never_fires_quickly(expression: str) -> None:
    started = time.perf_counter()
    assert parse_schedule(expression).next_after(JAN_2027) is None
    assert time.perf_counter() - started < 0.05


def test_year_field_ends_in_2099() -> None:
    assert first("0 0 0 1 1 * *", datetime(2099, 6, 1, tzinfo=UTC)) is None
    assert first("0 0 0 29 2 * *", datetime(2096, 3, 1, tzinfo=UTC)) is None  # 2100 is no leap year
    assert first("0 0 29 2 *", datetime(2096, 3, 1, tzinfo=UTC)) == "2104-02-29T00:00:00+00:00"


def test_strictly_after() -> None:
    at = datetime(2027, 1, 1, 0, 5, tzinfo=UTC)
    assert first("5 0 * * *", at) == "2027-01-02T00:05:00+00:00"
    assert first("5 0 * * *", at - timedelta(microseconds=1)) == "2027-01-01T00:05:00+00:00"
    assert first("* * * * * *", at + timedelta(microseconds=1)) == "2027-01-01T00:05:01+00:00"
    # Any aware `after` works; the answer is UTC.
    assert first("5 0 * * *", at.astimezone(NEW_YORK)) == "2027-01-02T00:05:00+00:00"


# --- time zones and DST ------------------------------------------------------------------------


def test_wall_time_in_zone() -> None:
    assert fires("0 9 * * MON-FRI", JAN_2027, 1, "America/New_York") == [
        "2027-01-01T09:00:00-05:00"
    ]


def test_spring_forward_fixed_time_jobs_fire_once_after_the_jump() -> None:
    before = datetime(2027, 3, 13, 12, tzinfo=NEW_YORK)
    zone = "America/New_York"
    assert fires("30 2 * * *", before, 2, zone) == [
        "2027-03-14T03:00:00-04:00",
        "2027-03-15T02:30:00-04:00",
    ]
    assert fires("0,30 2 * * *", before, 2, zone) == [
        "2027-03-14T03:00:00-04:00",
        "2027-03-15T02:00:00-04:00",
    ]
    # 02:30 (skipped) and 03:00 share one instant: it fires once.
    assert fires("0,30 2,3 * * *", before, 3, zone) == [
        "2027-03-14T03:00:00-04:00",
        "2027-03-14T03:30:00-04:00",
        "2027-03-15T02:00:00-04:00",
    ]
    assert first("0 3 * * *", before, zone) == "2027-03-14T03:00:00-04:00"
    # Seconds do not make a job wildcard.
    assert first("*/20 30 2 * * *", before, zone) == "2027-03-14T03:00:00-04:00"


def test_spring_forward_wildcard_jobs_skip_the_gap() -> None:
    after = datetime(2027, 3, 14, 1, 30, tzinfo=NEW_YORK)
    assert fires("*/30 * * * *", after, 2, "America/New_York") == [
        "2027-03-14T03:00:00-04:00",
        "2027-03-14T03:30:00-04:00",
    ]
    assert first("30 * * * *", after, "America/New_York") == "2027-03-14T03:30:00-04:00"
    assert first("0 2 * * *", after, "America/New_York") == "2027-03-14T03:00:00-04:00"


def test_fall_back_fixed_time_jobs_fire_on_the_first_pass_only() -> None:
    before = datetime(2027, 11, 6, 12, tzinfo=NEW_YORK)
    assert fires("30 1 * * *", before, 2, "America/New_York") == [
        "2027-11-07T01:30:00-04:00",
        "2027-11-08T01:30:00-05:00",
    ]
    # Asked from inside the second pass, it waits for the next day.
    second_pass = datetime(2027, 11, 7, 1, 10, fold=1, tzinfo=NEW_YORK)
    assert first("30 1 * * *", second_pass, "America/New_York") == "2027-11-08T01:30:00-05:00"


def test_fall_back_wildcard_jobs_fire_on_both_passes() -> None:
    after = datetime(2027, 11, 7, 0, 45, tzinfo=NEW_YORK)
    assert fires("*/30 * * * *", after, 5, "America/New_York") == [
        "2027-11-07T01:00:00-04:00",
        "2027-11-07T01:30:00-04:00",
        "2027-11-07T01:00:00-05:00",
        "2027-11-07T01:30:00-05:00",
        "2027-11-07T02:00:00-05:00",
    ]
    # Late in the first pass, the next fire is back at the start of the second.
    late = datetime(2027, 11, 7, 1, 50, tzinfo=NEW_YORK)
    assert first("0 * * * *", late, "America/New_York") == "2027-11-07T01:00:00-05:00"
    assert first("@hourly", late, "America/New_York") == "2027-11-07T01:00:00-05:00"


def test_lord_howe_half_hour_shifts() -> None:
    zone = "Australia/Lord_Howe"
    spring = datetime(2027, 10, 3, 1, 50, tzinfo=LORD_HOWE)
    assert fires("*/20 * * * *", spring, 2, zone) == [
        "2027-10-03T02:40:00+11:00",
        "2027-10-03T03:00:00+11:00",
    ]
    assert first("15 2 * * *", spring, zone) == "2027-10-03T02:30:00+11:00"
    autumn = datetime(2027, 4, 4, 1, 30, tzinfo=LORD_HOWE)
    assert fires("*/20 * * * *", autumn, 3, zone) == [
        "2027-04-04T01:40:00+11:00",
        "2027-04-04T01:40:00+10:30",
        "2027-04-04T02:00:00+10:30",
    ]
    assert fires("40 1 * * *", autumn, 2, zone) == [
        "2027-04-04T01:40:00+11:00",
        "2027-04-05T01:40:00+10:30",
    ]


def _brute_force(
    minutes: set[int], hours: set[int], zone: ZoneInfo, after: datetime, wildcard: bool
) -> datetime:
    """The DST rule read literally, minute by minute along real time. Wildcard: the first instant
    whose wall time matches. Fixed-time: the first instant at which a matching wall time is
    reached for the first time, be it shown (new wall time) or jumped over (skipped ones)."""

    def wall(moment: datetime) -> datetime:
        return moment.astimezone(zone).replace(tzinfo=None)

    def matching(moment: datetime) -> bool:
        return moment.minute in minutes and moment.hour in hours

    minute = timedelta(minutes=1)
    moment = after.replace(second=0, microsecond=0)
    latest = max(wall(moment - k * minute) for k in range(240))  # wall times already reached
    while True:
        moment += minute
        shown = wall(moment)
        if wildcard:
            if matching(shown) and moment > after:
                return moment
            continue
        reached = []
        while latest < shown:
            latest += minute
            reached.append(latest)
        if any(matching(w) for w in reached) and moment > after:
            return moment


@pytest.mark.parametrize("zone_name", ["America/New_York", "Australia/Lord_Howe", "Asia/Gaza"])
@pytest.mark.parametrize(
    ("expression", "minutes", "hours"),
    [
        ("*/20 * * * *", {0, 20, 40}, set(range(24))),
        ("10,40 0-4 * * *", {10, 40}, set(range(5))),
        ("0,30 2 * * *", {0, 30}, {2}),
        ("59 1 * * *", {59}, {1}),
        ("* 2 * * *", set(range(60)), {2}),
    ],
)
def test_dst_rule_against_brute_force(
    expression: str, minutes: set[int], hours: set[int], zone_name: str
) -> None:
    zone = ZoneInfo(zone_name)
    schedule = parse_schedule(expression, zone)
    wildcard = expression.split()[0].startswith("*") or expression.split()[1].startswith("*")
    rng = random.Random(expression + zone_name)
    moment, offset = datetime(2027, 1, 1, tzinfo=UTC), None
    while moment.year < 2028:  # around each of the zone's 2027 jumps
        if offset is not None and moment.astimezone(zone).utcoffset() != offset:
            for _ in range(8):
                after = moment + timedelta(seconds=rng.randint(-4 * 3600, 3 * 3600))
                expected = _brute_force(minutes, hours, zone, after, wildcard)
                assert schedule.next_after(after) == expected, after.astimezone(zone)
        offset = moment.astimezone(zone).utcoffset()
        moment += timedelta(hours=1)


# --- @every and triggered ----------------------------------------------------------------------


def test_every_counts_from_the_anchor() -> None:
    schedule = parse_schedule("@every 1h30m")
    anchor = datetime(2027, 1, 1, tzinfo=UTC)
    after = anchor + timedelta(hours=4)
    assert schedule.next_after(after, anchor=anchor) == anchor + timedelta(hours=4, minutes=30)
    assert schedule.next_after(anchor, anchor=anchor) == anchor + timedelta(minutes=90)
    # The anchor itself is a fire time when it lies after `after` (`start: 0s` fires at once).
    assert schedule.next_after(anchor - timedelta(days=1), anchor=anchor) == anchor
    assert schedule.next_after(anchor - timedelta(microseconds=1), anchor=anchor) == anchor
    assert schedule.next_after(after) == after + timedelta(minutes=90)  # anchor defaults to after
    far = anchor + timedelta(days=365 * 50, seconds=7)
    found = parse_schedule("@EVERY PT90S").next_after(far, anchor=anchor)
    assert found is not None and timedelta(0) < found - far <= timedelta(seconds=90)
    assert (found - anchor) % timedelta(seconds=90) == timedelta(0)


def test_every_with_fractions_and_zones() -> None:
    anchor = datetime(2027, 1, 1, tzinfo=NEW_YORK)
    found = parse_schedule("@every 1500ms", "America/New_York").next_after(anchor, anchor=anchor)
    assert found == (anchor + timedelta(milliseconds=1500)).astimezone(UTC)
    assert found is not None and found.tzinfo is UTC


def test_triggered() -> None:
    schedule = parse_schedule("triggered", "Europe/London")
    assert schedule.manual
    assert schedule.next_after(JAN_2027) is None


# --- croniter, where it serves -----------------------------------------------------------------


def _item(rng: random.Random, low: int, high: int) -> str:
    a = rng.randint(low, high - 1)
    b = rng.randint(a + 1, high)
    return rng.choice(
        [
            str(rng.randint(low, high)),
            f"{a}-{b}",
            f"*/{rng.randint(1, high - low + 3)}",
            f"{a}-{b}/{rng.randint(1, 5)}",
            ",".join(str(v) for v in sorted({rng.randint(low, high) for _ in range(3)})),
        ]
    )


def _field(rng: random.Random, low: int, high: int, star: float) -> str:
    return "*" if rng.random() < star else _item(rng, low, high)


def _sample_expressions(rng: random.Random, count: int) -> list[str]:
    """Plain UTC expressions with no equal or reversed ranges, and no `*/n` next to a
    restricted day field (croniter ORs those; we AND)."""
    out: list[str] = []
    while len(out) < count:
        dom, dow = _field(rng, 1, 31, 0.6), _field(rng, 0, 6, 0.6)
        if (dom.startswith("*/") and dow != "*") or (dow.startswith("*/") and dom != "*"):
            continue
        fields = [_field(rng, 0, 59, 0.4), _field(rng, 0, 23, 0.4), dom, _field(rng, 1, 12, 0.7)]
        fields.append(dow)
        if rng.random() < 0.3:
            fields.insert(0, _field(rng, 0, 59, 0.4))
        out.append(" ".join(fields))
    return out


def test_agrees_with_croniter_where_it_serves() -> None:
    rng = random.Random(20270101)
    for expression in _sample_expressions(rng, 300):
        start = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randint(0, 10**9))
        six = len(expression.split()) == 6
        theirs = croniter(expression, start, second_at_beginning=six)
        ours = parse_schedule(expression)
        moment: datetime | None = start
        for _ in range(4):
            assert moment is not None
            moment = ours.next_after(moment)
            assert moment == theirs.get_next(datetime), (expression, start)


# --- cronq next --------------------------------------------------------------------------------


def run_cli(*args: str) -> tuple[int, str, str]:
    assert schedule_cmd.next_command.name in main.commands  # registered by importing the module
    result = CliRunner().invoke(main, ["next", *args])
    return result.exit_code, result.stdout, result.stderr


def test_cli_prints_times_in_the_zone() -> None:
    code, out, _ = run_cli(
        "30 2 * * *", "--tz", "America/New_York", "--after", "2027-03-13T12:00", "-n", "2"
    )
    assert code == 0
    assert out.splitlines() == ["2027-03-14T03:00:00-04:00", "2027-03-15T02:30:00-04:00"]


def test_cli_defaults_and_json() -> None:
    code, out, _ = run_cli("0 0 * * *", "--after", "2027-01-01T00:00:00Z", "--json")
    assert code == 0
    assert json.loads(out) == [f"2027-01-0{d}T00:00:00+00:00" for d in range(2, 7)]
    code, out, _ = run_cli("* * * * *")  # --after defaults to now
    assert code == 0 and len(out.splitlines()) == 5
    first_time = datetime.fromisoformat(out.splitlines()[0])
    assert timedelta(0) < first_time - datetime.now(UTC) <= timedelta(minutes=1)


def test_cli_aware_after_and_every() -> None:
    code, out, _ = run_cli(
        "@every 90m", "--after", "2027-01-01T00:00:00+01:00", "-n", "2", "--tz", "Europe/Paris"
    )
    assert code == 0
    assert out.splitlines() == ["2027-01-01T01:30:00+01:00", "2027-01-01T03:00:00+01:00"]


@pytest.mark.parametrize("expression", ["0 0 31 2 *", "triggered"])
def test_cli_prints_nothing_for_no_fire_times(expression: str) -> None:
    assert run_cli(expression) == (0, "", "")
    code, out, _ = run_cli(expression, "--json")
    assert code == 0 and json.loads(out) == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["61 * * * *"], "minute: 61 is out of range"),
        (["* * * * *", "--tz", "Mars/Base"], "--tz: unknown time zone"),
        (["* * * * *", "--after", "yesterday"], "--after: invalid time"),
    ],
)
def test_cli_input_errors(args: list[str], words: str) -> None:
    code, out, err = run_cli(*args)
    assert code == 1 and out == ""
    assert words in err and "Traceback" not in err


def test_cli_usage_errors_and_help() -> None:
    assert run_cli("* * * * *", "-n", "0")[0] == 2
    code, out, _ = run_cli("--help")
    assert code == 0 and "Examples:" in out and "--after" in out
