"""When a scheduled query fires: CRON and EVERY schedules, evaluated in a time zone.

A :class:`Schedule` answers one question fast and exactly: what is the first fire
time strictly after a given instant (:meth:`Schedule.next_after`). Times in the API
are epoch milliseconds (``int``); fire times are always whole seconds. Build schedules
with :func:`cron` and :func:`every`; both raise :class:`zklock.errors.InvalidArguments`
with a message naming the bad part (field number and name, unit, time or zone).

Cron dialect
============

Three layouts are accepted; fields are separated by whitespace::

    5 fields  (Vixie)               minute hour day-of-month month day-of-week
    6 fields  (Vixie, seconds first) second minute hour day-of-month month day-of-week
    6/7 fields (Quartz)              second minute hour day-of-month month day-of-week [year]

An expression is Quartz when it contains ``?`` or has 7 fields. A 6-field expression
without ``?`` is Vixie with a leading seconds field (Quartz always requires ``?``).
A 5-field expression fires at second 0. The macros ``@yearly``, ``@annually``,
``@monthly``, ``@weekly``, ``@daily``, ``@midnight`` and ``@hourly`` stand for their
usual 5-field expansions.

Field ranges: second 0-59, minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or
JAN..DEC, day-of-week see below. Every field is a comma-separated list of items:

* ``*`` - every value; ``?`` (Quartz, day fields only) - no restriction, same as ``*``;
* ``v`` - one value; ``a-b`` - an inclusive range (``a <= b``; wrap-around ranges such
  as ``FRI-MON`` are refused, write ``FRI-SAT,SUN``);
* ``*/s``, ``a-b/s``, ``a/s`` - every s-th value of the whole range, of ``a-b``, or of
  ``a`` up to the field maximum;
* day-of-month ``L`` - the last day of the month;
* day-of-week ``d#k`` - the k-th (1-5) weekday d of the month (no fire in a month
  without one), ``dL`` - the last weekday d of the month.

Names (JAN..DEC, SUN..SAT) are case-insensitive and keep their meaning in both
dialects. Day-of-week *numbers* differ:

* Vixie: 0-7, 0 and 7 = Sunday, 1 = Monday ... 6 = Saturday;
* Quartz: 1-7, 1 = Sunday, 2 = Monday ... 7 = Saturday. Quartz numbers are translated
  (minus one, after expanding ranges and steps in Quartz numbering) everywhere they
  appear: values, ranges, lists, steps, ``d#k`` and ``dL``. A lone ``L`` in a Quartz
  day-of-week means Saturday.

Refused rather than misread: ``W`` (nearest weekday), ``LW``, ``L-n`` offsets, ``H``
hashes, a Quartz year field other than ``*`` ("the Quartz year field is not
supported"), a Quartz expression restricting both day fields (Quartz itself requires
``?`` in one), and expressions that never fire (``0 0 30 2 *``).

Day matching (Vixie's OR rule, as croniter with ``day_or=True``): a day field is
*unrestricted* when it is ``?`` or one of its list items is a bare ``*``; anything else
restricts it, even if it lists every value (``*/1``, ``1-31``, ``0-6``). When both
day-of-month and day-of-week are restricted, a day matches if either matches (so
``0 0 13 * 0-6`` fires daily); otherwise the restricted one, if any, decides. This is
croniter's reading; cronie differs only for steps on ``*`` (it treats ``*/2`` as
unrestricted).

EVERY schedules
===============

Hive's ``EVERY [n] SECOND[S]|MINUTE[S]|HOUR[S]|DAY[S] [AT|OFFSET BY '<time>']``; n
defaults to 1, units are case-insensitive, singular or plural.

* SECOND/MINUTE/HOUR: a fixed period of n units, aligned to the Unix epoch and shifted
  by the offset: fires at every ``t`` with ``t % period == offset`` (seconds). So
  ``EVERY 15 MINUTES`` fires at :00, :15, :30, :45 UTC and ``EVERY 7 MINUTES`` every
  420 s counted from the epoch. ``AT`` means the same as ``OFFSET BY``. These are
  absolute-time schedules: the time zone is kept (for ``describe``) but has no effect.
* DAY: only n = 1 (use CRON for anything else). Fires once a day at the ``AT`` wall
  time (default 00:00:00) in the schedule's time zone; ``OFFSET BY`` means the same as
  ``AT``. It follows the fixed-hour DST rules below.
* ``'<time>'`` is ``HH:MM``, ``HH:MM:SS`` or a duration: ``90`` (seconds), ``30s``,
  ``5m``, ``1h``, ``1h30m``. Milliseconds (``500ms``) are refused: fire times are whole
  seconds. The offset must be smaller than the period (AT for DAY before 24:00:00).

Time zones and DST
==================

Each schedule has an IANA time zone (default ``UTC``); cron fields and ``EVERY DAY AT``
are evaluated on that zone's wall clock. Around offset changes (cronie-like):

* Fall-back (wall-clock times repeat): a schedule whose hour field is fixed (a value,
  list, range or step other than every hour) fires once, in the first pass (fold=0).
  A schedule whose hour field covers all 24 hours (``*``, ``*/1``, ``0-23``) fires in
  both passes: it follows real time, so ``*/15 * * * *`` keeps firing every 15 minutes.
* Spring-forward (wall-clock times are skipped): a fixed-hour time inside the gap fires
  once, shifted by the gap (02:30 in a 02:00->03:00 gap fires at 03:30, the instant
  zoneinfo gives for fold=0); if that coincides with another fire time it fires once.
  All-hours schedules have no fire times inside the gap.
* Fire times are strictly increasing: ``next_after(t) > t`` and the sequence obtained by
  chaining ``next_after`` has no duplicates.

Why an evaluator of our own: every Vixie expression is also validated with croniter
(refused if croniter refuses it; ``L`` forms, which croniter reads differently,
excepted), but fire times are computed here.
croniter 7 misreads some valid expressions (``0-0`` as ``*``, ``5-5/2`` as ``*/2``), its
OR rule for the day fields depends on the text of the other field, it knows neither
Quartz's day numbering nor the DST rules above, and its ``get_next`` costs about 33 us
where the leader needs a few (2.6 us here), hundreds of times a second.

Exactness assumes what tzdata holds for every zone in practice: offset transitions are
more than two days apart and change the offset by at most 26 hours. Transitions are
found by sampling each year daily and bisecting to the second, cached per zone.
Supported instants: years 2..9998.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import cache, lru_cache
from typing import Any, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import croniter

from zklock.errors import InvalidArguments

__all__ = ["Schedule", "check_timezone", "cron", "every"]

_DAY = 86400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MIN_S = (date(2, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY
_MAX_S = (date(9998, 12, 31).toordinal() - _EPOCH_ORDINAL) * _DAY
# Largest offset change handled exactly (Pacific/Apia skipped a whole day in 2011).
_MAX_JUMP = 26 * 3600
# Constant-offset segments one next_after call may walk (about two per year).
_MAX_SEGMENTS = 20000


class _NoFireTime(Exception):
    """No fire time before the end of the supported range."""


# ---------------------------------------------------------------------------
# Time zones
# ---------------------------------------------------------------------------

_FIXED_ZONES = {"UTC", "UCT", "GMT", "GMT0", "GMT+0", "GMT-0", "Greenwich", "Universal", "Zulu"}


@lru_cache(maxsize=1)
def _zone_names() -> dict[str, str]:
    """Lower-case name -> name as the tz database spells it (for case-insensitive lookup)."""
    return {name.lower(): name for name in available_timezones()}


def check_timezone(name: str) -> str:
    """Return the tz database spelling of IANA zone ``name``; raise InvalidArguments if unknown.

    Lookup is case-insensitive ('europe/paris' -> 'Europe/Paris') so that equal zones
    compare equal in stored schedules.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidArguments(f"timezone must be an IANA name like 'Europe/Paris', got {name!r}")
    text = name.strip()
    if text.lower() == "localtime":  # the host's zone: scheduler processes could disagree
        raise InvalidArguments(f"unknown timezone {name!r}: name an IANA zone like 'Europe/Paris'")
    canonical = _zone_names().get(text.lower())
    if canonical is not None:
        return canonical
    try:  # a zone the installed database has but available_timezones() did not list
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidArguments(f"unknown timezone {name!r}") from None
    return text


class _Zone:
    """A zone's offsets and transitions, in whole seconds, with a per-year cache.

    zoneinfo does not expose transitions, so each year is sampled once a day and each
    change is bisected to the second. A transition ``(t, before, after)`` means the
    offset is ``after`` from instant ``t`` on and ``before`` just before it.
    """

    def __init__(self, name: str) -> None:
        self.tz = ZoneInfo(name)
        fixed = name in _FIXED_ZONES or name.startswith("Etc/")
        self.fixed: Optional[int] = self.offset(0) if fixed else None
        self._years: dict[int, tuple[tuple[int, int, int], ...]] = {}

    def offset(self, s: int) -> int:
        """UTC offset in seconds at instant ``s`` (epoch seconds)."""
        off = datetime.fromtimestamp(s, self.tz).utcoffset()
        return 0 if off is None else int(off.total_seconds())

    def _year(self, y: int) -> tuple[tuple[int, int, int], ...]:
        """Transitions with ``t`` in (Jan 1 of ``y``, Jan 1 of ``y + 1``], UTC."""
        found = self._years.get(y)
        if found is not None:
            return found
        out: list[tuple[int, int, int]] = []
        if self.fixed is None:
            t, end = _year_start(y), _year_start(y + 1)
            before = self.offset(t)
            while t < end:
                nt = min(t + _DAY, end)
                after = self.offset(nt)
                if after != before:
                    lo, hi = t, nt
                    while hi - lo > 1:
                        mid = (lo + hi) // 2
                        if self.offset(mid) == before:
                            lo = mid
                        else:
                            hi = mid
                    out.append((hi, before, after))
                    before = after
                t = nt
        found = self._years[y] = tuple(out)
        return found

    def first_transition(self, a: int, b: int) -> Optional[tuple[int, int, int]]:
        """The earliest transition with ``a < t <= b``, or None."""
        if self.fixed is not None:
            return None
        for y in range(_year_of(a), _year_of(b) + 1):
            for tr in self._year(y):
                if a < tr[0] <= b:
                    return tr
        return None

    def last_transition(self, a: int, b: int) -> Optional[tuple[int, int, int]]:
        """The latest transition with ``a < t <= b``, or None."""
        if self.fixed is not None:
            return None
        for y in range(_year_of(b), _year_of(a) - 1, -1):
            for tr in reversed(self._year(y)):
                if a < tr[0] <= b:
                    return tr
        return None


@cache
def _zone(name: str) -> _Zone:
    """One shared _Zone per validated zone name (its transition cache is reused)."""
    return _Zone(name)


def _year_start(y: int) -> int:
    return (date(y, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY


def _year_of(s: int) -> int:
    return date.fromordinal(s // _DAY + _EPOCH_ORDINAL).year


# ---------------------------------------------------------------------------
# Compiled cron: sets of values and a fast "next matching wall time"
# ---------------------------------------------------------------------------


class _CronPlan:
    """A compiled cron expression working on naive wall-clock seconds.

    Wall seconds count seconds since 1970-01-01 00:00 on the zone's wall clock, as if
    there were no offset changes. Matching days of each month are cached.
    """

    periodic = False

    def __init__(self, seconds: set[int], minutes: set[int], hours: set[int],
                 months: set[int], dom: set[int], dom_last: bool, dom_any: bool,
                 dow: set[int], dow_nth: set[tuple[int, int]], dow_last: set[int],
                 dow_any: bool) -> None:
        self.seconds = tuple(sorted(seconds))
        self.minutes = tuple(sorted(minutes))
        self.hours = tuple(sorted(hours))
        self.minute_set = frozenset(minutes)
        self.hour_set = frozenset(hours)
        self.months = frozenset(months)
        self.dom, self.dom_last, self.dom_any = frozenset(dom), dom_last, dom_any
        self.dow, self.dow_nth = frozenset(dow), frozenset(dow_nth)
        self.dow_last, self.dow_any = frozenset(dow_last), dow_any
        self.any_hour = len(self.hour_set) == 24
        self.first_tod = self.hours[0] * 3600 + self.minutes[0] * 60 + self.seconds[0]
        self._month_cache: dict[int, tuple[int, ...]] = {}

    def month_days(self, y: int, m: int) -> tuple[int, ...]:
        """Sorted days of month ``m`` of year ``y`` on which the expression fires."""
        key = y * 12 + m
        days = self._month_cache.get(key)
        if days is None:
            days = self._compute_month(y, m)
            if len(self._month_cache) >= 4096:
                self._month_cache.clear()
            self._month_cache[key] = days
        return days

    def _compute_month(self, y: int, m: int) -> tuple[int, ...]:
        if m not in self.months:
            return ()
        ndays = calendar.monthrange(y, m)[1]
        if self.dom_any and self.dow_any:
            return tuple(range(1, ndays + 1))
        by_dom: set[int] = set()
        if not self.dom_any:
            by_dom = {d for d in self.dom if d <= ndays}
            if self.dom_last:
                by_dom.add(ndays)
        by_dow: set[int] = set()
        if not self.dow_any:
            first = (date(y, m, 1).weekday() + 1) % 7  # weekday of the 1st, Sunday = 0
            by_dow = {d for d in range(1, ndays + 1) if (first + d - 1) % 7 in self.dow}
            for wd, k in self.dow_nth:
                d = 1 + (wd - first) % 7 + 7 * (k - 1)
                if d <= ndays:
                    by_dow.add(d)
            for wd in self.dow_last:
                d = 1 + (wd - first) % 7
                by_dow.add(d + 7 * ((ndays - d) // 7))
        if self.dom_any:
            return tuple(sorted(by_dow))
        if self.dow_any:
            return tuple(sorted(by_dom))
        return tuple(sorted(by_dom | by_dow))  # Vixie: both restricted -> either matches

    def _next_tod(self, sod: int) -> Optional[int]:
        """First matching second-of-day >= ``sod``, or None."""
        h, rem = divmod(sod, 3600)
        mi, se = divmod(rem, 60)
        if h in self.hour_set:
            if mi in self.minute_set:
                i = bisect_left(self.seconds, se)
                if i < len(self.seconds):
                    return h * 3600 + mi * 60 + self.seconds[i]
            j = bisect_right(self.minutes, mi)
            if j < len(self.minutes):
                return h * 3600 + self.minutes[j] * 60 + self.seconds[0]
        k = bisect_right(self.hours, h)
        if k < len(self.hours):
            return self.hours[k] * 3600 + self.minutes[0] * 60 + self.seconds[0]
        return None

    def next_wall(self, w: int) -> int:
        """Smallest matching wall time >= ``w`` (wall seconds)."""
        day, sod = divmod(w, _DAY)
        d = date.fromordinal(day + _EPOCH_ORDINAL)
        y, m = d.year, d.month
        days = self.month_days(y, m)
        i = bisect_left(days, d.day)
        if i < len(days) and days[i] == d.day:
            tod = self._next_tod(sod)
            if tod is not None:
                return w - sod + tod
            i += 1
        for _ in range(12 * 401):  # the Gregorian calendar repeats every 400 years
            if i < len(days):
                return (date(y, m, days[i]).toordinal() - _EPOCH_ORDINAL) * _DAY + self.first_tod
            m += 1
            if m > 12:
                m, y = 1, y + 1
                if y > 9999:
                    break
            days, i = self.month_days(y, m), 0
        raise _NoFireTime


class _PeriodPlan:
    """EVERY n SECONDS/MINUTES/HOURS: epoch-aligned period plus offset, zone-independent."""

    periodic = True

    def __init__(self, period: int, offset: int) -> None:
        self.period, self.offset = period, offset


def _next_cron_second(plan: _CronPlan, zone: _Zone, s: int) -> int:
    """First fire instant >= ``s`` (epoch seconds) under the DST rules of the module doc.

    The instant line is cut at offset transitions into constant-offset segments; inside
    one, wall and instant differ by the offset. The candidate is the first matching wall
    time of the segment; a fixed-hour schedule additionally skips the repeated walls
    after a fall-back and fires gap walls after a spring-forward shifted by the gap.
    Away from transitions this is one ``next_wall`` call and two cached lookups.
    """
    if zone.fixed is not None:
        return plan.next_wall(s + zone.fixed) - zone.fixed
    for _ in range(_MAX_SEGMENTS):
        o = zone.offset(s)
        lower = s + o
        shifted: Optional[int] = None
        if not plan.any_hour:
            prev = zone.last_transition(s - _MAX_JUMP, s)
            if prev is not None:
                t, before, after = prev
                if after < before:  # fall-back: walls [t+after, t+before) are a second pass
                    lower = max(lower, t + before)
                elif after > before:  # spring-forward: walls [t+before, t+after) do not exist
                    g = plan.next_wall(max(s, t) + before)
                    if g < t + after:
                        shifted = g - before  # fold=0 meaning: shifted forward by the gap
        c = plan.next_wall(lower) - o
        nxt = zone.first_transition(s, c)
        if nxt is None:
            return c if shifted is None else min(c, shifted)
        if shifted is not None:
            return shifted
        s = nxt[0]  # the candidate lies beyond this segment: continue in the next one
    raise _NoFireTime


# ---------------------------------------------------------------------------
# Cron parsing
# ---------------------------------------------------------------------------

_MONTH_NAMES = {n.upper(): i for i, n in enumerate(calendar.month_abbr) if n}
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW, _YEAR = (
    "second", "minute", "hour", "day-of-month", "month", "day-of-week", "year")
_RANGES = {_SECOND: (0, 59), _MINUTE: (0, 59), _HOUR: (0, 23), _DOM: (1, 31), _MONTH: (1, 12)}
_LAYOUTS = {
    5: (_MINUTE, _HOUR, _DOM, _MONTH, _DOW),
    6: (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW),
    7: (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW, _YEAR),
}
_DOW_SPECIAL = re.compile(r"([0-9]+|[A-Z]+)(?:#([0-9]+)|(L))")


class _Field:
    """One parsed cron field, in Vixie numbering (day-of-week Sunday = 0)."""

    def __init__(self) -> None:
        self.values: set[int] = set()
        self.last = False  # day-of-month 'L'
        self.nth: set[tuple[int, int]] = set()  # day-of-week 'd#k'
        self.last_dow: set[int] = set()  # day-of-week 'dL'
        self.unrestricted = False


def _parse_field(text: str, kind: str, pos: int, quartz: bool, expr: str) -> _Field:
    """Parse field number ``pos`` (1-based, as written) of cron expression ``expr``."""

    def bad(msg: str) -> InvalidArguments:
        return InvalidArguments(f"bad cron expression {expr!r}: field {pos} ({kind}) {msg}")

    if kind == _DOW:
        lo, hi = (1, 7) if quartz else (0, 7)
        names = {n: i + lo for i, n in enumerate(_DAY_NAMES)}
    elif kind == _YEAR:
        lo, hi, names = 1970, 2099, {}
    else:
        lo, hi = _RANGES[kind]
        names = _MONTH_NAMES if kind == _MONTH else {}

    def value(txt: str) -> int:
        if txt.isascii() and txt.isdigit():
            v = int(txt)
            if not lo <= v <= hi:
                hint = " (Quartz numbers days 1=SUN..7=SAT)" if kind == _DOW and quartz else ""
                raise bad(f"'{txt}' is out of range {lo}-{hi}{hint}")
            return v
        if txt.upper() in names:
            return names[txt.upper()]
        if not txt:
            raise bad(f"{text!r} has an empty value")
        what = f"a number or a {kind} name" if names else "a number"
        raise bad(f"'{txt}' is not {what}")

    def vixie_dow(v: int) -> int:
        return v - 1 if quartz else v % 7

    out = _Field()
    if kind == _YEAR:
        if text != "*":
            raise bad(f"{text!r}: the Quartz year field is not supported (only '*')")
        out.unrestricted = True
        return out
    if text == "?":
        if kind not in (_DOM, _DOW):
            raise bad("'?': '?' is only allowed in day-of-month or day-of-week")
        out.unrestricted = True
        return out
    for item in text.split(","):
        up = item.upper()
        if kind == _DOM:
            if up == "L":
                out.last = True
                continue
            if "W" in up:
                raise bad(f"'{item}': 'W' (nearest weekday) is not supported")
            if up.startswith("L"):
                raise bad(f"'{item}': offsets from the last day ('L-n') are not supported")
        if kind == _DOW:
            if up == "L":
                if not quartz:
                    raise bad("'L': a lone 'L' means nothing in Vixie day-of-week; write SAT")
                out.values.add(6)
                continue
            special = _DOW_SPECIAL.fullmatch(up)
            if special:
                wd = vixie_dow(value(special[1]))
                if special[2] is not None:
                    k = int(special[2])
                    if not 1 <= k <= 5:
                        raise bad(f"'{item}': the week number after '#' must be 1-5")
                    out.nth.add((wd, k))
                else:
                    out.last_dow.add(wd)
                continue
        base, slash, step_txt = item.partition("/")
        step = 1
        if slash:
            if not (step_txt.isascii() and step_txt.isdigit()) or int(step_txt) == 0:
                raise bad(f"'{item}': the step must be a positive number, got '{step_txt}'")
            step = int(step_txt)
        if base == "*":
            start, end = lo, hi
        elif "-" in base:
            a, _, b = base.partition("-")
            start, end = value(a), value(b)
            if start > end:
                raise bad(f"'{item}': range {a}-{b} runs backwards ({start} > {end})")
        else:
            start = value(base)
            end = hi if slash else start
        expanded = range(start, end + 1, step)
        if kind == _DOW:
            out.values.update(vixie_dow(v) for v in expanded)
        else:
            out.values.update(expanded)
    out.unrestricted = "*" in text.split(",")  # Vixie OR rule: only a bare '*' is no restriction
    return out


@lru_cache(maxsize=1024)
def _compile_cron(expr: str) -> _CronPlan:
    """Validate and compile a (stripped) cron expression; shared by equal expressions."""
    if not expr:
        raise InvalidArguments("bad cron expression '': it is empty")
    text = _MACROS.get(expr.lower(), expr) if expr.startswith("@") else expr
    if text.startswith("@"):
        raise InvalidArguments(f"bad cron expression {expr!r}: unknown macro; expected one of "
                               + ", ".join(_MACROS))
    parts = text.split()
    quartz = "?" in text or len(parts) == 7
    if quartz and len(parts) not in (6, 7):
        raise InvalidArguments(
            f"bad cron expression {expr!r}: a Quartz expression (it contains '?') needs 6 or 7"
            f" fields (second minute hour day-of-month month day-of-week [year]), got"
            f" {len(parts)}")
    layout = _LAYOUTS.get(len(parts))
    if layout is None:
        raise InvalidArguments(
            f"bad cron expression {expr!r}: expected 5 fields (minute hour day-of-month month"
            f" day-of-week), 6 (second first) or 7 (Quartz, with year), got {len(parts)}")
    fields = {kind: _parse_field(part, kind, pos, quartz, expr)
              for pos, (kind, part) in enumerate(zip(layout, parts), start=1)}
    if not quartz and "L" not in text.upper().replace("JUL", "") \
            and not croniter.is_valid(text, second_at_beginning=len(parts) == 6):
        raise InvalidArguments(f"bad cron expression {expr!r}: croniter refuses it")
    dom, dow = fields[_DOM], fields[_DOW]
    if quartz and not dom.unrestricted and not dow.unrestricted:
        raise InvalidArguments(
            f"bad cron expression {expr!r}: Quartz needs '?' (or '*') in day-of-month or"
            f" day-of-week; restricting both has no Quartz meaning")
    plan = _CronPlan(
        seconds=fields[_SECOND].values if _SECOND in fields else {0},
        minutes=fields[_MINUTE].values, hours=fields[_HOUR].values,
        months=fields[_MONTH].values,
        dom=dom.values, dom_last=dom.last, dom_any=dom.unrestricted,
        dow=dow.values, dow_nth=dow.nth, dow_last=dow.last_dow, dow_any=dow.unrestricted)
    for y in range(2000, 2400):  # one full Gregorian cycle: it fires in it or never
        if any(plan.month_days(y, m) for m in range(1, 13)):
            break
    else:
        raise InvalidArguments(
            f"bad cron expression {expr!r}: it never fires (no date matches its day-of-month,"
            f" month and day-of-week fields)")
    return plan


# ---------------------------------------------------------------------------
# EVERY parsing
# ---------------------------------------------------------------------------

_UNITS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": _DAY}
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def _parse_time(text: Any, clause: str) -> int:
    """Seconds of an AT / OFFSET BY text: 'HH:MM', 'HH:MM:SS', '90', '30s', '5m', '1h30m'."""
    usage = "expected 'HH:MM', 'HH:MM:SS' or a duration like '30s', '5m', '1h' or '90' (seconds)"
    if not isinstance(text, str):
        raise InvalidArguments(f"bad time {text!r} in {clause}: {usage}")
    t = text.strip().lower().replace(" ", "")
    clock = _CLOCK.fullmatch(t)
    if clock:
        h, m, s = int(clock[1]), int(clock[2]), int(clock[3] or 0)
        if m > 59 or s > 59:
            raise InvalidArguments(f"bad time {text!r} in {clause}: minutes and seconds must be"
                                   " 00-59")
        return h * 3600 + m * 60 + s
    if t.endswith("ms"):
        raise InvalidArguments(f"bad time {text!r} in {clause}: fire times are whole seconds,"
                               " milliseconds are not accepted")
    if t.isascii() and t.isdigit():
        return int(t)
    dur = _DURATION.fullmatch(t)
    if t and dur:
        h, m, s = (int(g or 0) for g in dur.groups())
        return h * 3600 + m * 60 + s
    raise InvalidArguments(f"bad time {text!r} in {clause}: {usage}")


def _duration_text(s: int) -> str:
    """Compact duration text that _parse_time reads back: 90 -> '1m30s', 0 -> '0s'."""
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    text = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{sec}s" if sec else "")
    return text or "0s"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _compile_every(period_s: Any, offset_s: Any, at_s: Any) -> tuple[Any, str]:
    """Validate the numeric fields of an EVERY schedule; return (plan, canonical text)."""
    if not _is_int(period_s) or period_s < 1:
        raise InvalidArguments(f"an EVERY schedule needs period_s, a whole number of seconds"
                               f" >= 1, got {period_s!r}")
    if at_s is not None:  # EVERY DAY AT: a daily wall-clock time
        if offset_s is not None:
            raise InvalidArguments("EVERY DAY takes at_s, not offset_s")
        if period_s != _DAY:
            raise InvalidArguments(f"at_s is only for EVERY DAY (period_s {_DAY}), got period_s"
                                   f" {period_s}")
        if not _is_int(at_s) or not 0 <= at_s < _DAY:
            raise InvalidArguments(f"at_s must be seconds after midnight, 0-{_DAY - 1}, got"
                                   f" {at_s!r}")
        h, rem = divmod(at_s, 3600)
        plan = _CronPlan({rem % 60}, {rem // 60}, {h}, set(range(1, 13)), set(), False, True,
                         set(), set(), set(), True)
        return plan, f"EVERY DAY AT '{h:02d}:{rem // 60:02d}:{rem % 60:02d}'"
    offset = 0 if offset_s is None else offset_s
    if not _is_int(offset) or not 0 <= offset < period_s:
        raise InvalidArguments(f"offset_s must be a whole number of seconds in 0..{period_s - 1}"
                               f" (smaller than the period), got {offset_s!r}")
    for unit, size in (("HOUR", 3600), ("MINUTE", 60), ("SECOND", 1)):
        if period_s % size == 0:
            n = period_s // size
            text = f"EVERY {n} {unit}{'' if n == 1 else 'S'}"
            break
    if offset:
        text += f" OFFSET BY '{_duration_text(offset)}'"
    return _PeriodPlan(period_s, offset), text


# ---------------------------------------------------------------------------
# The public API
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: when a scheduled query fires.

    ``kind`` is "cron" or "every". For cron, ``expr`` is the expression as written
    (stripped). For every, ``expr`` is the canonical EVERY text and the numbers say
    it all: ``period_s`` with ``offset_s`` (SECOND/MINUTE/HOUR, epoch aligned) or
    ``period_s == 86400`` with ``at_s`` (DAY, seconds after local midnight).
    Construction validates everything; build with :func:`cron` or :func:`every`.
    """

    kind: str
    expr: str
    timezone: str = "UTC"
    period_s: Optional[int] = None
    offset_s: Optional[int] = None
    at_s: Optional[int] = None
    _plan: Any = field(default=None, init=False, repr=False, compare=False)
    _zone: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tz = check_timezone(self.timezone)
        object.__setattr__(self, "timezone", tz)
        if self.kind == "cron":
            if not isinstance(self.expr, str):
                raise InvalidArguments(f"cron expression must be a string, got {self.expr!r}")
            if (self.period_s, self.offset_s, self.at_s) != (None, None, None):
                raise InvalidArguments("a cron schedule takes no period_s, offset_s or at_s")
            expr = self.expr.strip()
            plan: Any = _compile_cron(expr)
            object.__setattr__(self, "expr", expr)
        elif self.kind == "every":
            plan, text = _compile_every(self.period_s, self.offset_s, self.at_s)
            if self.expr and (not isinstance(self.expr, str) or self.expr.strip() != text):
                raise InvalidArguments(f"every schedule text {self.expr!r} does not match its"
                                       f" period and offset ({text!r})")
            object.__setattr__(self, "expr", text)
            if self.at_s is None:
                object.__setattr__(self, "offset_s", plan.offset)
        else:
            raise InvalidArguments(f"unknown schedule kind {self.kind!r}: expected 'cron' or"
                                   " 'every'")
        object.__setattr__(self, "_plan", plan)
        object.__setattr__(self, "_zone", _zone(tz))

    def next_after(self, after_ms: int) -> int:
        """First fire time strictly after ``after_ms`` (epoch ms), as epoch ms.

        Hot path of the scheduler leader: no allocation beyond a few ints away from
        DST transitions.
        """
        if not _is_int(after_ms):
            raise InvalidArguments(f"time must be epoch milliseconds (int), got {after_ms!r}")
        s = after_ms // 1000 + 1  # fire times are whole seconds
        if not _MIN_S <= s <= _MAX_S:
            raise InvalidArguments(f"time {after_ms} ms is outside the supported years 2-9998")
        plan = self._plan
        if plan.periodic:
            return (s + (plan.offset - s) % plan.period) * 1000
        try:
            return _next_cron_second(plan, self._zone, s) * 1000
        except _NoFireTime:
            raise InvalidArguments(f"{self.describe()} has no fire time after {after_ms} ms"
                                   " before the year 9999") from None

    def fires_between(self, start_ms: int, end_ms: int, limit: int = 100000) -> list[int]:
        """Every fire time t with ``start_ms <= t <= end_ms``, ascending, at most ``limit``."""
        if not _is_int(limit) or limit < 0:
            raise InvalidArguments(f"limit must be a whole number >= 0, got {limit!r}")
        out: list[int] = []
        if limit == 0 or end_ms < start_ms:
            return out
        t = self.next_after(start_ms - 1)
        while t <= end_ms:
            out.append(t)
            if len(out) >= limit:
                break
            t = self.next_after(t)
        return out

    def describe(self) -> str:
        """DDL text that parses back to this schedule.

        ``CRON '<expr>'`` or the EVERY text, plus `` TIMEZONE '<zone>'`` unless UTC.
        """
        text = f"CRON '{self.expr}'" if self.kind == "cron" else self.expr
        return text if self.timezone == "UTC" else f"{text} TIMEZONE '{self.timezone}'"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; :meth:`from_dict` reads it back."""
        d: dict[str, Any] = {"kind": self.kind, "expr": self.expr, "timezone": self.timezone}
        if self.kind == "every":
            d["period_s"] = self.period_s
            if self.at_s is not None:
                d["at_s"] = self.at_s
            else:
                d["offset_s"] = self.offset_s
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schedule:
        """Rebuild (and re-validate) a schedule from :meth:`to_dict` output.

        Unknown keys are ignored so that a newer writer does not break older readers.
        """
        if not isinstance(d, Mapping):
            raise InvalidArguments(f"a schedule dict is needed, got {type(d).__name__}")
        kind = d.get("kind")
        tz = d.get("timezone", "UTC")
        if kind == "cron":
            return cls(kind="cron", expr=d.get("expr"), timezone=tz)
        if kind == "every":
            return cls(kind="every", expr=d.get("expr") or "", timezone=tz,
                       period_s=d.get("period_s"), offset_s=d.get("offset_s"),
                       at_s=d.get("at_s"))
        raise InvalidArguments(f"unknown schedule kind {kind!r}: expected 'cron' or 'every'")


def cron(expr: str, timezone: str = "UTC") -> Schedule:
    """Parse and validate a cron expression (dialect in the module doc) in ``timezone``."""
    if not isinstance(expr, str):
        raise InvalidArguments(f"cron expression must be a string, got {expr!r}")
    return Schedule(kind="cron", expr=expr, timezone=timezone)


def every(n: Optional[int], unit: str, at: Optional[str] = None, offset: Optional[str] = None,
          timezone: str = "UTC") -> Schedule:
    """``EVERY n unit [AT|OFFSET BY '<time>']``; ``n=None`` means 1. See the module doc."""
    if n is None:
        n = 1
    if not _is_int(n) or n < 1:
        raise InvalidArguments(f"EVERY needs a positive whole number, got {n!r}")
    word = unit.strip().upper() if isinstance(unit, str) else ""
    size = _UNITS.get(word[:-1] if word.endswith("S") else word)
    if size is None:
        raise InvalidArguments(f"unknown EVERY unit {unit!r}: expected SECOND(S), MINUTE(S),"
                               " HOUR(S) or DAY(S) (use CRON for other calendars)")
    if at is not None and offset is not None:
        raise InvalidArguments("give AT or OFFSET BY, not both")
    clause, text = ("AT", at) if at is not None else ("OFFSET BY", offset)
    shift = 0 if text is None else _parse_time(text, clause)
    if size == _DAY:
        if n != 1:
            raise InvalidArguments(f"EVERY {n} DAYS is not supported: only EVERY DAY (once a"
                                   " day); use a CRON schedule for other day patterns")
        if shift >= _DAY:
            raise InvalidArguments(f"{clause} {text!r} for EVERY DAY must be a time of day"
                                   " before 24:00:00")
        return Schedule(kind="every", expr="", timezone=timezone, period_s=_DAY, at_s=shift)
    period = n * size
    if shift >= period:
        raise InvalidArguments(f"{clause} {text!r} ({shift} s) must be smaller than the period"
                               f" of EVERY {n} {word} ({period} s)")
    return Schedule(kind="every", expr="", timezone=timezone, period_s=period, offset_s=shift)
