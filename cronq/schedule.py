"""Schedules: cron expressions, macros, `@every <duration>` and `triggered`, in an IANA zone.

The rules are DESIGN §4. How a cron expression is evaluated, in the spirit of cronsim:

* Parsing turns every field into its set of values once, as "next value at or after i" lookup
  tables, so the search needs one index per field instead of a scan. Parsed schedules are cached:
  the state machine parses on every step.
* The search walks local wall-clock time field by field (year, month, day, hour, minute, second),
  carrying into the next larger field when a field runs out. Matching days depend on the month's
  length and first weekday, so they are computed once per (year, month) and cached.
* Only the wall time found goes through zoneinfo, to turn it into instants and apply the DST rule:
  wildcard jobs fire at every real instant with a matching wall time; fixed-time jobs fire at the
  first such instant, and at the end of the jump for a wall time that a jump skips.
"""

from __future__ import annotations

import calendar
import functools
import math
import re
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronq.durations import DurationError, parse_duration

__all__ = ["Schedule", "ScheduleError", "parse_schedule", "parse_timezone"]


class ScheduleError(ValueError):
    """An invalid schedule or zone. `field` names the part at fault ("minute", "day-of-week",
    "timezone", ... or None for the expression as a whole); str() is a complete message."""

    def __init__(self, message: str, *, field: str | None = None, expression: str = "") -> None:
        self.field = field
        self.expression = expression
        self.problem = message
        prefix = f"{field}: " if field else ""
        super().__init__(f"invalid schedule {expression!r}: {prefix}{message}")


class Schedule(ABC):
    """A parsed schedule bound to a zone."""

    expression: str
    timezone: ZoneInfo

    @property
    def manual(self) -> bool:
        """True for `triggered`: it never fires by itself, but the job is not finished."""
        return False

    @abstractmethod
    def next_after(self, after: datetime, *, anchor: datetime | None = None) -> datetime | None:
        """The first fire time strictly after `after` (an aware datetime), as an aware UTC datetime,
        or None when there is none. `anchor` is where `@every` counts from (default `after`);
        cron expressions ignore it."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.expression!r} in {self.timezone.key}>"


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA zone called `name` (exact spelling, e.g. "Europe/London"), or a ScheduleError."""
    if not isinstance(name, str) or not name.strip():
        raise ScheduleError("expected an IANA zone name such as 'Europe/London'", field="timezone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"unknown time zone {name!r} (expected an IANA name such as 'America/New_York')",
            field="timezone",
        ) from None


def parse_schedule(expression: str, timezone: str | tzinfo = "UTC") -> Schedule:
    """Parse a cron expression, macro, `@every <duration>` or `triggered`, bound to a zone.

    Raises ScheduleError naming the field at fault. Results are cached and immutable.
    """
    if not isinstance(expression, str):
        raise ScheduleError(f"expected a string, got {type(expression).__name__}")
    text = expression.strip()
    zone = _zone(timezone)
    try:
        return _parse_cached(text, zone)
    except ScheduleError as error:
        raise ScheduleError(error.problem, field=error.field, expression=text) from None


# --- values and fields -----------------------------------------------------------------------

UTC = timezone.utc
_Wall = tuple[int, int, int, int, int, int]  # year, month, day, hour, minute, second
_ONE_SECOND = timedelta(seconds=1)
_LAST_YEAR = 9998  # datetime stops at 9999; a search never needs to go that far
_DIGITS = re.compile(r"[0-9]+")  # not str.isdigit() or int() alone: they take "+5", "1_0", "٣"
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTH_NAMES = {name: number for number, name in enumerate(_MONTHS, 1)}  # not calendar's: locale
_DAY_NAMES = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
_MACROS = {
    "@YEARLY": "0 0 1 1 *",
    "@ANNUALLY": "0 0 1 1 *",
    "@MONTHLY": "0 0 1 * *",
    "@WEEKLY": "0 0 * * 0",
    "@DAILY": "0 0 * * *",
    "@MIDNIGHT": "0 0 * * *",
    "@HOURLY": "0 * * * *",
}


@dataclass(frozen=True)
class _Field:
    """One position of a cron expression: its name, bounds and spelled names."""

    name: str
    low: int
    high: int
    names: Mapping[str, int]


_SECOND = _Field("second", 0, 59, {})
_MINUTE = _Field("minute", 0, 59, {})
_HOUR = _Field("hour", 0, 23, {})
_DOM = _Field("day-of-month", 1, 31, {})
_MONTH = _Field("month", 1, 12, _MONTH_NAMES)
_DOW = _Field("day-of-week", 0, 7, _DAY_NAMES)  # 7 is Sunday again: `1/2` is 1,3,5,7
_YEAR = _Field("year", 1970, 2099, {})


def _number(token: str) -> int:
    """An ASCII decimal; absurdly long ones become a huge value so range checks reject them
    without int() choking on thousands of digits."""
    return int(token) if len(token.lstrip("0")) <= 9 else 10**9


def _value(token: str, field: _Field, item: str) -> int:
    """One value of a field: an ASCII number in range, or a name."""
    if not token:
        raise ScheduleError(f"missing value in {item!r}", field=field.name)
    if _DIGITS.fullmatch(token):
        value = _number(token)
    elif token in field.names:
        value = field.names[token]
    else:
        raise ScheduleError(_bad_value(token, field), field=field.name)
    if not field.low <= value <= field.high:
        where = "" if token == item else f" in {item!r}"
        raise ScheduleError(
            f"{token} is out of range {field.low}-{field.high}{where}", field=field.name
        )
    return value


def _bad_value(token: str, field: _Field) -> str:
    """Why `token` is no value of `field`, with a hint for the usual mix-ups."""
    if re.fullmatch(r"[0-9]*L?W?", token):
        return f"{token!r}: L and W are only allowed in day-of-month, and nL in day-of-week"
    if token in _DAY_NAMES or token in _MONTH_NAMES:
        return f"{token!r}: names are not allowed here"
    if field.names:
        example = next(iter(field.names))
        return f"unknown value {token!r} (expected a number or a name such as {example})"
    return f"invalid value {token!r} (expected a number {field.low}-{field.high})"


def _range_item(item: str, field: _Field) -> range:
    """`*`, `a`, `a-b`, each optionally `/n`; `a/n` runs from a to the field's maximum."""
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text:
            raise ScheduleError(f"missing step after '/' in {item!r}", field=field.name)
        if not _DIGITS.fullmatch(step_text):
            raise ScheduleError(f"invalid step {step_text!r} in {item!r}", field=field.name)
        step = _number(step_text)
        if step == 0:
            raise ScheduleError(f"step must be at least 1 in {item!r}", field=field.name)
    if base == "*":
        return range(field.low, field.high + 1, step)
    start, dash, end = base.partition("-")
    low = _value(start, field, item)
    if dash:
        high = _value(end, field, item)
        if field is _DOW and end == "SUN" and low > 0:
            high = 7  # `FRI-SUN`: SUN ends the week
        if high < low:
            raise ScheduleError(f"reversed range {item!r} (start after end)", field=field.name)
    else:
        high = field.high if slash else low
    return range(low, high + 1, step)


def _items(text: str, field: _Field) -> list[str]:
    """The comma-separated items of a field, with the checks every field shares."""
    if not text.isascii():
        raise ScheduleError(f"non-ASCII character in {text!r}", field=field.name)
    if "?" in text and (text != "?" or field not in (_DOM, _DOW)):
        raise ScheduleError(
            f"'?' is only allowed as the whole day-of-month or day-of-week field, got {text!r}",
            field=field.name,
        )
    if "#" in text and field is not _DOW:
        raise ScheduleError(f"'#' is only allowed in day-of-week, got {text!r}", field=field.name)
    items = text.upper().split(",")
    if "" in items:
        raise ScheduleError(f"empty item in list {text!r}", field=field.name)
    return items


def _plain_field(text: str, field: _Field) -> frozenset[int]:
    return frozenset(v for item in _items(text, field) for v in _range_item(item, field))


@dataclass(frozen=True)
class _Days:
    """Day-of-month and day-of-week, Quartz extensions included; see `matching`."""

    dom: frozenset[int]
    dom_last: bool  # L
    dom_last_weekday: bool  # LW
    dom_nearest: frozenset[int]  # nW
    dom_restricted: bool
    dow: frozenset[int]  # 0 = Sunday .. 6
    dow_nth: frozenset[tuple[int, int]]  # n#k as (weekday, k)
    dow_last: frozenset[int]  # nL
    dow_restricted: bool

    def matching(self, first_weekday: int, length: int) -> list[int]:
        """The matching days of a month that starts on `first_weekday` (0 = Sunday) and has
        `length` days. Both fields restricted: either may match (Vixie); otherwise both must."""

        def weekday(day: int) -> int:
            return (first_weekday + day - 1) % 7

        by_dom = {d for d in self.dom if d <= length}
        if self.dom_last:
            by_dom.add(length)
        if self.dom_last_weekday:
            by_dom.add(_nearest_weekday(length, weekday(length), length))
        for day in self.dom_nearest:
            if day <= length:
                by_dom.add(_nearest_weekday(day, weekday(day), length))
        by_dow = {d for d in range(1, length + 1) if weekday(d) in self.dow}
        for wd, k in self.dow_nth:
            day = 1 + (wd - first_weekday) % 7 + 7 * (k - 1)
            if day <= length:
                by_dow.add(day)
        for wd in self.dow_last:
            by_dow.add(length - (weekday(length) - wd) % 7)
        if self.dom_restricted and self.dow_restricted:
            return sorted(by_dom | by_dow)
        return sorted(by_dom & by_dow)


def _nearest_weekday(day: int, weekday: int, length: int) -> int:
    """Quartz `nW`: the weekday nearest `day`, never leaving the month (1W on a Saturday is
    Monday the 3rd; the last day on a Sunday goes back to Friday)."""
    if weekday == 6:  # Saturday
        return day - 1 if day > 1 else day + 2
    if weekday == 0:  # Sunday
        return day + 1 if day < length else day - 2
    return day


def _days(dom_text: str, dow_text: str) -> _Days:
    dom: set[int] = set()
    nearest: set[int] = set()
    last = last_weekday = False
    for item in _items(dom_text, _DOM):
        if item == "?":
            dom.update(range(1, 32))
        elif item == "L":
            last = True
        elif item == "LW":
            last_weekday = True
        elif item.endswith("W") and "L" not in item:
            nearest.add(_value(item[:-1], _DOM, item))
        elif "L" in item or "W" in item:
            raise ScheduleError(
                f"{item!r}: day-of-month takes L, LW or nW (e.g. 15W), without ranges or steps",
                field=_DOM.name,
            )
        else:
            dom.update(_range_item(item, _DOM))
    dow: set[int] = set()
    nth: set[tuple[int, int]] = set()
    dow_last: set[int] = set()
    for item in _items(dow_text, _DOW):
        if item == "?":
            dow.update(range(7))
        elif "#" in item:
            weekday, _, k = item.partition("#")
            if not _DIGITS.fullmatch(k) or not 1 <= _number(k) <= 5:
                raise ScheduleError(f"{item!r}: # needs a week 1-5, e.g. MON#1", field=_DOW.name)
            nth.add((_value(weekday, _DOW, item) % 7, int(k)))
        elif item.endswith("L"):
            if item == "L":
                raise ScheduleError(
                    "'L' alone: write nL for the last weekday n of the month (5L = last Friday)",
                    field=_DOW.name,
                )
            dow_last.add(_value(item[:-1], _DOW, item) % 7)
        else:
            dow.update(v % 7 for v in _range_item(item, _DOW))
    return _Days(
        dom=frozenset(dom),
        dom_last=last,
        dom_last_weekday=last_weekday,
        dom_nearest=frozenset(nearest),
        dom_restricted=not dom_text.startswith(("*", "?")),
        dow=frozenset(dow),
        dow_nth=frozenset(nth),
        dow_last=frozenset(dow_last),
        dow_restricted=not dow_text.startswith(("*", "?")),
    )


def _next_table(values: Iterable[int], size: int) -> tuple[int, ...]:
    """table[i] is the smallest value >= i, or -1: one index replaces a bisect in the hot loop.
    Index `size` is always -1, so "one past the last value" carries into the next field."""
    wanted = set(values)
    table = [-1] * (size + 1)
    following = -1
    for i in range(size - 1, -1, -1):
        if i in wanted:
            following = i
        table[i] = following
    return tuple(table)


# --- schedules ---------------------------------------------------------------------------------


class _CronSchedule(Schedule):
    """A cron expression (5, 6 or 7 fields) in a zone."""

    def __init__(self, expression: str, zone: ZoneInfo, fields: list[str]) -> None:
        self.expression = expression
        self.timezone = zone
        if len(fields) == 5:
            fields = ["0", *fields]
        seconds = _plain_field(fields[0], _SECOND)
        minutes = _plain_field(fields[1], _MINUTE)
        hours = _plain_field(fields[2], _HOUR)
        self._days = _days(fields[3], fields[5])
        months = _plain_field(fields[4], _MONTH)
        self._years = tuple(sorted(_plain_field(fields[6], _YEAR))) if len(fields) == 7 else None
        self._seconds = _next_table(seconds, 60)
        self._minutes = _next_table(minutes, 60)
        self._hours = _next_table(hours, 24)
        self._months = _next_table(months, 13)
        self._last_year = self._years[-1] if self._years else _LAST_YEAR
        # Vixie's DST rule: a job is "wildcard" when its minute or hour field starts with `*`.
        self._wildcard = fields[1].startswith("*") or fields[2].startswith("*")
        self._month_cache: dict[tuple[int, int], tuple[int, ...]] = {}
        self._can_fire = any(
            self._days.matching(first_weekday, length)
            for month in months
            for length in ((28, 29) if month == 2 else (calendar.monthrange(2001, month)[1],))
            for first_weekday in range(7)
        )

    def _day_table(self, year: int, month: int) -> tuple[int, ...]:
        table = self._month_cache.get((year, month))
        if table is None:
            weekday, length = calendar.monthrange(year, month)
            table = _next_table(self._days.matching((weekday + 1) % 7, length), 32)
            if len(self._month_cache) > 4096:  # bound the memory of a long-lived process
                self._month_cache.clear()
            self._month_cache[(year, month)] = table
        return table

    def _next_wall(
        self, year: int, month: int, day: int, hour: int, minute: int, second: int
    ) -> _Wall | None:
        """The first matching wall time at or after the given one (which may be one past a
        field's end, e.g. second 60: it carries), or None past the last possible year."""
        while year <= self._last_year:
            if self._years is not None:
                i = bisect_left(self._years, year)
                if i == len(self._years):
                    return None
                if self._years[i] != year:
                    year, month, day, hour, minute, second = self._years[i], 1, 1, 0, 0, 0
            found = self._months[month]
            if found < 0:
                year, month, day, hour, minute, second = year + 1, 1, 1, 0, 0, 0
                continue
            if found != month:
                month, day, hour, minute, second = found, 1, 0, 0, 0
            found = self._day_table(year, month)[day]
            if found < 0:
                month, day, hour, minute, second = month + 1, 1, 0, 0, 0
                continue
            if found != day:
                day, hour, minute, second = found, 0, 0, 0
            found = self._hours[hour]
            if found < 0:
                day, hour, minute, second = day + 1, 0, 0, 0
                continue
            if found != hour:
                hour, minute, second = found, 0, 0
            found = self._minutes[minute]
            if found < 0:
                hour, minute, second = hour + 1, 0, 0
                continue
            if found != minute:
                minute, second = found, 0
            found = self._seconds[second]
            if found < 0:
                minute, second = minute + 1, 0
                continue
            return year, month, day, hour, minute, found
        return None

    def next_after(self, after: datetime, *, anchor: datetime | None = None) -> datetime | None:
        if not self._can_fire:
            return None
        after = _as_utc(after)
        local = after.astimezone(self.timezone)
        found = self._forward(after, local)
        if self._wildcard and not local.fold:
            early = _offset(local)
            late = _offset(datetime(*_fields(local), 0, self.timezone, fold=1))
            if late < early:
                # `after` is in the first pass of a repeated interval: the second pass replays
                # wall times at or before `after`'s, which the forward search never looks at.
                replay = self._second_pass(after, early, late)
                if replay is not None and (found is None or replay < found):
                    return replay
        return found

    def _forward(self, after: datetime, local: datetime) -> datetime | None:
        """The first fire time after `after` among wall times after `local`'s (fractions of a
        second dropped). Datetimes are built, not replace()d: it is twice as fast."""
        zone = self.timezone
        year, month, day, hour, minute, second = _fields(local)
        wall = self._next_wall(year, month, day, hour, minute, second + 1)
        while wall is not None:
            early = _offset(datetime(*wall, 0, zone))
            late = _offset(datetime(*wall, 0, zone, fold=1))
            if early == late:  # the usual case: one instant
                offsets: tuple[timedelta, ...] = (early,)
            elif late < early:  # a repeated wall time: first pass, then (wildcard) second
                offsets = (early, late) if self._wildcard else (early,)
            else:  # a skipped wall time (PEP 495: fold=0 takes the offset before the jump)
                as_utc = datetime(*wall, 0, UTC)
                jump = _transition(zone, as_utc - late, as_utc - early)
                if not self._wildcard:
                    return jump  # every skipped slot collapses into the first instant after
                wall = self._next_wall(*_fields(jump.astimezone(zone)))
                continue
            for offset in offsets:
                instant = datetime(*wall, 0, UTC) - offset
                if instant > after:
                    return instant
            year, month, day, hour, minute, second = wall
            wall = self._next_wall(year, month, day, hour, minute, second + 1)
        return None

    def _second_pass(self, after: datetime, early: timedelta, late: timedelta) -> datetime | None:
        """The first second-pass instant of the repeated interval that `after` is in."""
        jump = _transition(self.timezone, after, after + (early - late))
        wall = self._next_wall(*_fields(jump + late))
        if wall is None or wall >= _fields(jump + early):
            return None
        return datetime(*wall, 0, UTC) - late


class _EverySchedule(Schedule):
    """`@every <duration>`: the first of anchor + k·duration (k >= 0) strictly after `after`, in
    absolute time (zones and DST do not apply: an interval is a length of time, not a wall-clock
    pattern). With the default anchor, `after` itself, that is after + duration."""

    def __init__(self, expression: str, zone: ZoneInfo, interval: timedelta) -> None:
        self.expression = expression
        self.timezone = zone
        self.interval = interval

    def next_after(self, after: datetime, *, anchor: datetime | None = None) -> datetime | None:
        after = _as_utc(after)
        start = after if anchor is None else _as_utc(anchor)
        # Integer microseconds: exact, and k comes out in one division instead of a loop.
        elapsed = (after - start) // timedelta(microseconds=1)
        step = self.interval // timedelta(microseconds=1)
        # The anchor itself is a fire time (k = 0): `start: 0s` with `@every 1h` fires at once.
        k = max(elapsed // step + 1, 0)
        try:
            return start + k * self.interval
        except OverflowError:  # past year 9999
            return None


class _TriggeredSchedule(Schedule):
    """`triggered`: fires only when an operator triggers the job."""

    def __init__(self, expression: str, zone: ZoneInfo) -> None:
        self.expression = expression
        self.timezone = zone

    @property
    def manual(self) -> bool:
        return True

    def next_after(self, after: datetime, *, anchor: datetime | None = None) -> datetime | None:
        return None


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str, zone: ZoneInfo) -> Schedule:
    if not text:
        raise ScheduleError("empty expression")
    if text.lower() == "triggered":
        return _TriggeredSchedule(text, zone)
    if text.startswith("@"):
        word, _, rest = text.replace("\t", " ").partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "@EVERY":
            return _EverySchedule(text, zone, _every(rest))
        if word not in _MACROS or rest:
            raise ScheduleError(
                f"unknown macro {text!r} (expected @yearly, @annually, @monthly, @weekly, "
                "@daily, @midnight, @hourly or @every <duration>)"
            )
        return _CronSchedule(text, zone, _MACROS[word].split())
    fields = text.split()
    if len(fields) not in (5, 6, 7):
        raise ScheduleError(
            f"expected 5, 6 or 7 fields (sec min hour dom mon dow year), got {len(fields)}"
        )
    return _CronSchedule(text, zone, fields)


def _every(text: str) -> timedelta:
    if not text:
        raise ScheduleError("@every needs a duration, e.g. '@every 90s' or '@every 1h30m'")
    try:
        interval = parse_duration(text, allow_zero=False)
    except DurationError as error:
        raise ScheduleError(f"@every: {error}") from None
    if interval < _ONE_SECOND:
        raise ScheduleError(f"@every: {text!r} is shorter than the minimum of 1s")
    return interval


# --- time helpers ------------------------------------------------------------------------------


def _zone(value: str | tzinfo) -> ZoneInfo:
    if isinstance(value, ZoneInfo):
        return value
    if value is UTC:
        return ZoneInfo("UTC")
    if isinstance(value, str):
        return parse_timezone(value)
    raise ScheduleError(f"expected an IANA zone, got {value!r}", field="timezone")


def _as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"expected an aware datetime, got naive {moment.isoformat()}")
    return moment.astimezone(UTC)


def _offset(local: datetime) -> timedelta:
    offset = local.utcoffset()
    assert offset is not None  # a ZoneInfo always knows its offset
    return offset


def _fields(moment: datetime) -> _Wall:
    """The wall-clock reading of a datetime, to the second."""
    return moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second


def _transition(zone: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The instant in (before, after] where `zone` switches to `after`'s offset: a binary search
    over whole seconds (tzdata transitions fall on whole seconds). Only runs near a DST jump."""
    target = _offset(after.astimezone(zone))
    low, high = math.floor(before.timestamp()), math.ceil(after.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(datetime.fromtimestamp(middle, zone)) == target:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)
