"""Schedules: the cron dialect (Vixie, seconds-first, Quartz), EVERY forms, time zones and DST.

No ZooKeeper needed. DST behaviour is checked against a brute-force reference that walks
every wall-clock minute and applies the module's rules directly.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from zklock.scheduler.schedule import Schedule, check_timezone, cron, every

from zklock.errors import InvalidArguments

NY = "America/New_York"
BERLIN = "Europe/Berlin"


def ms(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, tz: str = "UTC") -> int:
    """Epoch ms of a wall-clock time in ``tz`` (fold=0)."""
    return int(datetime(y, mo, d, h, mi, s, tzinfo=ZoneInfo(tz)).timestamp()) * 1000


def local(t_ms: int, tz: str) -> datetime:
    return datetime.fromtimestamp(t_ms / 1000, ZoneInfo(tz))


def day_fires(sch: Schedule, y: int, mo: int, d: int) -> list[datetime]:
    """Fire times during one local calendar day of the schedule's zone."""
    start = ms(y, mo, d, tz=sch.timezone)
    nxt = datetime(y, mo, d) + timedelta(days=1)
    end = ms(nxt.year, nxt.month, nxt.day, tz=sch.timezone) - 1
    return [local(t, sch.timezone) for t in sch.fires_between(start, end)]


def parse_describe(text: str) -> Schedule:
    """Read describe() output back (a minimal DDL reader for the round-trip tests)."""
    m = re.fullmatch(r"(.*?)(?: TIMEZONE '([^']*)')?", text)
    assert m
    body, tz = m[1], m[2] or "UTC"
    c = re.fullmatch(r"CRON '([^']*)'", body)
    if c:
        return cron(c[1], tz)
    e = re.fullmatch(r"EVERY(?: (\d+))? (\w+)(?: (AT|OFFSET BY) '([^']*)')?", body)
    assert e, text
    n = int(e[1]) if e[1] else None
    kw = {"at": e[4]} if e[3] == "AT" else {"offset": e[4]}
    return every(n, e[2], timezone=tz, **kw)


# --------------------------------------------------------------------------- cron syntax


def test_five_field_cron():
    sch = cron("  */15 9-10 * * MON-FRI ")
    assert sch.expr == "*/15 9-10 * * MON-FRI"
    fires = day_fires(sch, 2024, 1, 5)  # a Friday
    assert [f.strftime("%H:%M:%S") for f in fires] == [
        "09:00:00", "09:15:00", "09:30:00", "09:45:00",
        "10:00:00", "10:15:00", "10:30:00", "10:45:00"]
    assert day_fires(sch, 2024, 1, 6) == []  # Saturday


def test_six_field_cron_has_seconds_first():
    sch = cron("30 0 12 * * *")
    assert [f.strftime("%H:%M:%S") for f in day_fires(sch, 2024, 1, 1)] == ["12:00:30"]
    every20 = cron("*/20 * * * * *")
    assert every20.fires_between(ms(2024, 1, 1), ms(2024, 1, 1, 0, 1)) == [
        ms(2024, 1, 1, 0, 0, s) for s in (0, 20, 40)] + [ms(2024, 1, 1, 0, 1)]
    # six fields whose second field reads like a day-of-week are still seconds first
    assert local(cron("0 0 12 * * 1").next_after(ms(2024, 1, 1)), "UTC") == datetime(
        2024, 1, 1, 12, tzinfo=ZoneInfo("UTC"))


@pytest.mark.parametrize("expr, message", [
    ("0 61 * * *", r"field 2 \(hour\) '61' is out of range 0-23"),
    ("61 * * * *", r"field 1 \(minute\) '61' is out of range 0-59"),
    ("0 60 * * * *", r"field 2 \(minute\) '60' is out of range 0-59"),
    ("0 0 32 * *", r"field 3 \(day-of-month\) '32' is out of range 1-31"),
    ("0 0 * 13 *", r"field 4 \(month\) '13' is out of range 1-12"),
    ("0 0 * FOO *", r"field 4 \(month\) 'FOO' is not a number or a month name"),
    ("0 0 * * 8", r"field 5 \(day-of-week\) '8' is out of range 0-7"),
    ("0 0 * * FRI-MON", r"field 5 \(day-of-week\) 'FRI-MON': range FRI-MON runs backwards"),
    ("*/0 * * * *", r"field 1 \(minute\) '\*/0': the step must be a positive number"),
    ("1,,2 * * * *", r"field 1 \(minute\) .* empty value"),
    ("H * * * *", r"field 1 \(minute\) 'H' is not a number"),
    ("* * * *", r"expected 5 fields .* got 4"),
    ("* * * * * * * *", r"got 8"),
    ("", r"empty"),
    ("@fortnightly", r"unknown macro"),
    ("0 0 30 2 *", r"never fires"),
    ("0 0 * * L", r"field 5 \(day-of-week\) 'L'"),
])
def test_bad_cron_names_the_bad_part(expr, message):
    with pytest.raises(InvalidArguments, match=message) as exc:
        cron(expr)
    assert repr(expr) in str(exc.value)


def test_macros_vixie_sunday_and_day_or_rule():
    assert cron("@daily").next_after(ms(2024, 1, 1)) == ms(2024, 1, 2)
    sundays = [cron(f"0 0 * * {d}").next_after(ms(2024, 1, 1)) for d in ("0", "7", "SUN", "sun")]
    assert sundays == [ms(2024, 1, 7)] * 4
    # both day fields restricted: the 13th OR a Friday (Vixie / croniter day_or)
    days = {local(t, "UTC").day for t in cron("0 0 13 * 5").fires_between(
        ms(2024, 9, 1), ms(2024, 9, 30))}
    assert days == {6, 13, 20, 27}
    # a day field listing every value still restricts: OR with it means every day
    assert len(cron("0 0 13 * 0-6").fires_between(ms(2024, 9, 1), ms(2024, 9, 30))) == 30
    assert len(cron("0 0 13 * */1").fires_between(ms(2024, 9, 1), ms(2024, 9, 30))) == 30
    # one day field unrestricted (a bare '*'): the other decides alone
    assert len(cron("0 0 * * 5").fires_between(ms(2024, 9, 1), ms(2024, 9, 30))) == 4
    assert len(cron("0 0 13 * *,5").fires_between(ms(2024, 9, 1), ms(2024, 9, 30))) == 1


def test_last_day_nth_and_last_weekday():
    last = cron("0 0 L * *").fires_between(ms(2024, 1, 1), ms(2024, 4, 30))
    assert [local(t, "UTC").day for t in last] == [31, 29, 31, 30]
    third_friday = cron("0 0 * * 5#3").fires_between(ms(2024, 1, 1), ms(2024, 3, 31))
    assert [local(t, "UTC").date().isoformat() for t in third_friday] == [
        "2024-01-19", "2024-02-16", "2024-03-15"]
    last_sunday = cron("0 0 * * 0L").fires_between(ms(2024, 1, 1), ms(2024, 3, 31))
    assert [local(t, "UTC").day for t in last_sunday] == [28, 25, 31]
    # a fifth Monday exists only in some months
    fifth_monday = cron("0 0 * * 1#5").fires_between(ms(2024, 1, 1), ms(2024, 12, 31))
    assert [local(t, "UTC").strftime("%m-%d") for t in fifth_monday] == [
        "01-29", "04-29", "07-29", "09-30", "12-30"]


# --------------------------------------------------------------------------- Quartz


def test_quartz_day_of_week_sunday_is_one():
    start, end = ms(2024, 1, 1), ms(2024, 2, 1)
    quartz_num = cron("0 0 12 ? * 2").fires_between(start, end)
    quartz_name = cron("0 0 12 ? * MON").fires_between(start, end)
    vixie = cron("0 12 * * 1").fires_between(start, end)
    assert quartz_num == quartz_name == vixie
    assert len(vixie) == 5 and {local(t, "UTC").strftime("%a %H:%M:%S") for t in vixie} == {
        "Mon 12:00:00"}
    assert {local(t, "UTC").strftime("%a") for t in cron("0 0 12 ? * 1").fires_between(
        start, end)} == {"Sun"}
    weekend = cron("0 0 12 ? * 1,7").fires_between(start, end)
    assert {local(t, "UTC").strftime("%a") for t in weekend} == {"Sat", "Sun"}
    weekdays = cron("0 0 12 ? * 2-6").fires_between(start, end)
    assert weekdays == cron("0 12 * * MON-FRI").fires_between(start, end)
    assert cron("0 0 12 ? * */2").fires_between(start, end) == cron(
        "0 12 * * 0,2,4,6").fires_between(start, end)
    assert cron("0 0 12 ? * 6#3").fires_between(start, end) == [ms(2024, 1, 19, 12)]
    assert cron("0 0 12 ? * 6L").fires_between(start, end) == [ms(2024, 1, 26, 12)]
    assert cron("0 0 12 ? * L").fires_between(start, end) == cron(
        "0 12 * * SAT").fires_between(start, end)
    # 7 fields with a '*' year, and '?' in day-of-month with a restricted day-of-week
    assert cron("0 0 12 ? * 2 *").fires_between(start, end) == vixie
    assert cron("0 0 12 L * ?").fires_between(start, end) == [ms(2024, 1, 31, 12)]


@pytest.mark.parametrize("expr, message", [
    ("0 0 12 15W * ?", r"field 4 \(day-of-month\) '15W': 'W' \(nearest weekday\) is not supp"),
    ("0 0 12 LW * ?", r"'W' \(nearest weekday\)"),
    ("0 0 12 L-3 * ?", r"field 4 \(day-of-month\) 'L-3': offsets from the last day"),
    ("0 0 12 ? * 2 2025", r"field 7 \(year\) '2025': the Quartz year field is not supported"),
    ("0 0 12 ? * 0", r"field 6 \(day-of-week\) '0' is out of range 1-7 \(Quartz"),
    ("0 0 12 ? * 8", r"out of range 1-7"),
    ("0 0 12 1 * 2 *", r"Quartz needs '\?'"),
    ("0 ? 12 * * 2", r"field 2 \(minute\) '\?': '\?' is only allowed in day-of-month"),
    ("0 12 ? * 2", r"Quartz expression .* needs 6 or 7 fields"),
])
def test_quartz_refusals(expr, message):
    with pytest.raises(InvalidArguments, match=message):
        cron(expr)


# --------------------------------------------------------------------------- time zones


def test_timezones():
    assert check_timezone("UTC") == "UTC"
    assert check_timezone(" europe/paris ") == "Europe/Paris"
    assert cron("0 0 * * *", "america/new_york").timezone == NY
    for bad in ("Mars/Base", "", "../etc/passwd", None, "Europe/", "localtime"):
        with pytest.raises(InvalidArguments, match="timezone"):
            check_timezone(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArguments, match="unknown timezone 'Mars/Base'"):
        cron("0 0 * * *", "Mars/Base")
    # cron fields are read on the zone's wall clock
    assert cron("0 9 * * *", "Asia/Kolkata").next_after(ms(2024, 1, 1)) == ms(2024, 1, 1, 3, 30)
    assert cron("0 9 * * *", "Asia/Kolkata").next_after(ms(2024, 1, 1)) == ms(
        2024, 1, 1, 9, tz="Asia/Kolkata")


# --------------------------------------------------------------------------- DST


@pytest.mark.parametrize("tz, day", [(NY, (2024, 11, 3)), (BERLIN, (2024, 10, 27))])
def test_fall_back(tz, day):
    hour = 1 if tz == NY else 2  # the wall-clock hour that repeats
    fixed = day_fires(cron(f"30 {hour} * * *", tz), *day)
    assert len(fixed) == 1 and fixed[0].fold == 0  # once, in the first pass
    assert fixed[0].hour == hour and fixed[0].minute == 30
    # an all-hours schedule follows real time: both passes of the repeated hour
    half_hourly = day_fires(cron("*/30 * * * *", tz), *day)
    assert len(half_hourly) == 48 + 2
    ts = [f.timestamp() for f in half_hourly]
    assert all(b - a == 1800 for a, b in zip(ts, ts[1:]))
    assert len(day_fires(cron("0 0 * * * *", tz), *day)) == 25
    # a fixed hour with every minute: the first pass only
    assert len(day_fires(cron(f"* {hour} * * *", tz), *day)) == 60
    assert len(day_fires(every(1, "DAY", at=f"0{hour}:30", timezone=tz), *day)) == 1


def test_spring_forward():
    fixed = day_fires(cron("30 2 * * *", NY), 2024, 3, 10)
    assert [f.strftime("%H:%M %z") for f in fixed] == ["03:30 -0400"]  # shifted by the gap
    assert len(day_fires(cron("*/30 * * * *", NY), 2024, 3, 10)) == 48 - 2
    # the shifted 02:30 and the real 03:30 are the same instant: one fire
    both = day_fires(cron("30 2,3 * * *", NY), 2024, 3, 10)
    assert [f.strftime("%H:%M") for f in both] == ["03:30"]
    shifted = day_fires(cron("0,59 2 * * *", BERLIN), 2024, 3, 31)
    assert [f.strftime("%H:%M %z") for f in shifted] == ["03:00 +0200", "03:59 +0200"]
    daily = day_fires(every(1, "day", at="02:30:00", timezone=NY), 2024, 3, 10)
    assert [f.strftime("%H:%M:%S") for f in daily] == ["03:30:00"]
    # a zone whose DST moves the clock by 30 minutes
    lh = day_fires(cron("15 2 * * *", "Australia/Lord_Howe"), 2024, 10, 6)
    assert [f.strftime("%H:%M") for f in lh] == ["02:45"]


@pytest.mark.parametrize("year, days", [(2023, 365), (2024, 366)])
def test_fixed_daily_time_fires_once_a_day_for_a_year(year, days):
    for sch in (cron("0 30 2 * * *", BERLIN), every(None, "DAY", at="01:30", timezone=NY),
                cron("30 1 * * *", NY)):
        start, end = ms(year, 1, 1, tz=sch.timezone), ms(year + 1, 1, 1, tz=sch.timezone) - 1
        fires = sch.fires_between(start, end)
        assert len(fires) == days
        assert all(a < b for a, b in zip(fires, fires[1:]))
        assert len({local(t, sch.timezone).date() for t in fires}) == days


# --------------------------------------------------------------------------- EVERY


def test_every_second_minute_hour_are_epoch_aligned():
    q = every(15, "MINUTES")
    assert q.describe() == "EVERY 15 MINUTES" and (q.period_s, q.offset_s) == (900, 0)
    assert q.fires_between(ms(2024, 1, 1, 10, 1), ms(2024, 1, 1, 11)) == [
        ms(2024, 1, 1, 10, m) for m in (15, 30, 45)] + [ms(2024, 1, 1, 11)]
    seven = every(7, "minute").fires_between(ms(2024, 1, 1), ms(2024, 1, 1, 1))
    assert all(t % 420_000 == 0 for t in seven) and len(seven) == 9
    off = every(2, "Minutes", offset="30s")
    assert off.describe() == "EVERY 2 MINUTES OFFSET BY '30s'"
    assert off.next_after(ms(2024, 1, 1)) == ms(2024, 1, 1, 0, 0, 30)
    assert off.next_after(ms(2024, 1, 1, 0, 0, 30)) == ms(2024, 1, 1, 0, 2, 30)
    assert every(2, "minutes", at="00:00:30") == off  # AT means OFFSET BY for these units
    assert every(3, "hours", offset="1h30m").offset_s == 5400
    assert every(1, "hour", offset="90").describe() == "EVERY 1 HOUR OFFSET BY '1m30s'"
    assert every(120, "seconds").describe() == "EVERY 2 MINUTES"
    assert every(None, "second").next_after(1500) == 2000
    # absolute time: the zone changes nothing, also across a DST change
    in_ny = every(1, "hour", timezone=NY)
    start, end = ms(2024, 11, 3, tz=NY), ms(2024, 11, 4, tz=NY) - 1
    assert in_ny.fires_between(start, end) == every(1, "hour").fires_between(start, end)
    assert len(in_ny.fires_between(start, end)) == 25


def test_every_day_at_in_a_zone():
    sch = every(1, "DAY", at="02:30", timezone="Europe/Paris")
    assert sch.describe() == "EVERY DAY AT '02:30:00' TIMEZONE 'Europe/Paris'"
    assert (sch.period_s, sch.at_s, sch.offset_s) == (86400, 9000, None)
    assert sch.next_after(ms(2024, 7, 1)) == ms(2024, 7, 1, 0, 30)  # CEST = UTC+2
    assert every(1, "days", offset="02:30", timezone="Europe/Paris") == sch
    assert every(1, "day").describe() == "EVERY DAY AT '00:00:00'"
    assert every(1, "day").next_after(ms(2024, 1, 1)) == ms(2024, 1, 2)


@pytest.mark.parametrize("args, kwargs, message", [
    ((1, "WEEK"), {}, r"unknown EVERY unit 'WEEK'"),
    ((1, "fortnights"), {}, r"unknown EVERY unit"),
    ((0, "minutes"), {}, r"positive whole number, got 0"),
    ((True, "minutes"), {}, r"positive whole number"),
    ((1.5, "minutes"), {}, r"positive whole number"),
    ((2, "days"), {}, r"EVERY 2 DAYS is not supported.*CRON"),
    ((1, "second"), {"offset": "500ms"}, r"'500ms'.*whole seconds"),
    ((15, "minutes"), {"offset": "20m"}, r"'20m' \(1200 s\) must be smaller than the period"),
    ((15, "minutes"), {"offset": "15m"}, r"smaller than the period"),
    ((1, "minute"), {"at": "noon"}, r"bad time 'noon' in AT"),
    ((1, "hour"), {"offset": "1.5s"}, r"bad time '1.5s' in OFFSET BY"),
    ((1, "day"), {"at": "24:00"}, r"before 24:00:00"),
    ((1, "day"), {"at": "12:60"}, r"00-59"),
    ((1, "day"), {"at": "02:00", "offset": "1h"}, r"AT or OFFSET BY, not both"),
    ((1, "day"), {"timezone": "Nowhere/Land"}, r"unknown timezone 'Nowhere/Land'"),
])
def test_bad_every(args, kwargs, message):
    with pytest.raises(InvalidArguments, match=message):
        every(*args, **kwargs)


# --------------------------------------------------------------------------- round trips


ROUND_TRIP = [
    cron("0 */5 * * * *"), cron("0 0 12 ? * 2", BERLIN), cron("*/15 9-17 * * MON-FRI", NY),
    cron("@hourly"), every(2, "minutes", offset="30s"), every(1, "day", at="02:30", timezone=NY),
    every(7, "minutes"), every(1, "day"), every(3, "hours", at="01:00:05", timezone=BERLIN),
]


@pytest.mark.parametrize("sch", ROUND_TRIP, ids=lambda s: s.describe())
def test_describe_and_dict_round_trip(sch):
    assert parse_describe(sch.describe()) == sch
    d = json.loads(json.dumps(sch.to_dict()))
    back = Schedule.from_dict(d)
    assert back == sch and back.describe() == sch.describe()
    t = ms(2024, 3, 9)
    assert back.next_after(t) == sch.next_after(t)


def test_describe_examples_and_dict_validation():
    assert cron("0 */5 * * * *").describe() == "CRON '0 */5 * * * *'"
    assert cron("0 0 * * *", "Europe/Paris").describe() == (
        "CRON '0 0 * * *' TIMEZONE 'Europe/Paris'")
    assert cron("0 0 * * *").to_dict() == {"kind": "cron", "expr": "0 0 * * *",
                                           "timezone": "UTC"}
    assert Schedule.from_dict({"kind": "every", "period_s": 900, "offset_s": 60,
                               "future": 1}).describe() == "EVERY 15 MINUTES OFFSET BY '1m'"
    with pytest.raises(InvalidArguments, match="unknown schedule kind"):
        Schedule.from_dict({"kind": "at", "expr": "x"})
    with pytest.raises(InvalidArguments, match="does not match"):
        Schedule(kind="every", expr="EVERY 5 MINUTES", period_s=900, offset_s=0)
    with pytest.raises(InvalidArguments, match="offset_s"):
        Schedule.from_dict({"kind": "every", "period_s": 900, "offset_s": 900})
    with pytest.raises(InvalidArguments, match="field 2"):
        Schedule.from_dict({"kind": "cron", "expr": "0 99 * * *"})
    with pytest.raises(InvalidArguments, match="unknown timezone"):
        Schedule.from_dict({"kind": "cron", "expr": "0 0 * * *", "timezone": "X/Y"})


# --------------------------------------------------------------------------- next_after


def test_single_value_ranges_are_not_wildcards():
    # croniter 7.0.0 expands '0-0' to '*' and '5-5/2' to '*/2'; this module does not
    assert cron("0-0 * * * *").fires_between(ms(2024, 1, 1), ms(2024, 1, 1, 2)) == [
        ms(2024, 1, 1), ms(2024, 1, 1, 1), ms(2024, 1, 1, 2)]
    assert cron("5-5/2 0 * * *").fires_between(ms(2024, 1, 1), ms(2024, 1, 1, 1)) == [
        ms(2024, 1, 1, 0, 5)]


def test_next_after_and_fires_between_bounds():
    sch = cron("*/10 * * * * *")
    t = ms(2024, 1, 1)
    assert sch.next_after(t) == t + 10_000  # strictly after a fire time
    assert sch.next_after(t - 1) == t
    assert sch.next_after(t + 9_999) == t + 10_000
    assert sch.fires_between(t, t + 30_000) == [t, t + 10_000, t + 20_000, t + 30_000]
    assert sch.fires_between(t + 1, t + 29_999) == [t + 10_000, t + 20_000]
    assert sch.fires_between(t, t + 30_000, limit=2) == [t, t + 10_000]
    assert sch.fires_between(t, t - 1) == [] and sch.fires_between(t, t, limit=0) == []
    assert cron("0 0 29 2 *").next_after(ms(2097, 1, 1)) == ms(2104, 2, 29)  # 2100: no leap
    with pytest.raises(InvalidArguments, match="epoch milliseconds"):
        sch.next_after(1.5)  # type: ignore[arg-type]


def test_next_after_is_fast():
    sch = cron("0 */5 * * * *")
    t = ms(2024, 5, 1)
    start = time.perf_counter()
    for _ in range(5000):
        t = sch.next_after(t)
    assert (time.perf_counter() - start) / 5000 < 100e-6  # typically a few microseconds
    paris = cron("*/5 * * * *", "Europe/Paris")
    paris.next_after(t)
    start = time.perf_counter()
    for _ in range(5000):
        t = paris.next_after(t)
    assert (time.perf_counter() - start) / 5000 < 200e-6


# --------------------------------------------------------------------------- properties


def _item(lo: int, hi: int, names: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    value = st.integers(lo, hi).map(str)
    if names:
        value = value | st.sampled_from(names)
    # a-a ranges are left out: croniter.expand (the reference's parser) reads '0-0' as '*'
    pair = st.tuples(st.integers(lo, hi), st.integers(lo, hi)).filter(
        lambda p: p[0] != p[1]).map(sorted)
    return st.one_of(
        st.just("*"), value,
        pair.map(lambda p: f"{p[0]}-{p[1]}"),
        st.tuples(st.sampled_from(["*", str(lo)]), st.integers(1, hi - lo + 1)).map(
            lambda p: f"{p[0]}/{p[1]}"),
        pair.flatmap(lambda p: st.integers(1, 5).map(lambda s: f"{p[0]}-{p[1]}/{s}")),
    )


def _field(lo: int, hi: int, names: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    return st.lists(_item(lo, hi, names), min_size=1, max_size=3).map(",".join)


VIXIE5 = st.tuples(
    _field(0, 59), _field(0, 23), _field(1, 31), _field(1, 12, ("JAN", "jun", "Dec")),
    _field(0, 7, ("MON", "fri", "SUN")),
).map(" ".join)
ZONES = st.sampled_from(["UTC", NY, BERLIN, "Australia/Lord_Howe", "Asia/Kolkata"])
# instants near the 2024 DST changes of the zones above, and elsewhere
STARTS = st.sampled_from([
    ms(2024, 3, 10, 5), ms(2024, 11, 3, 4), ms(2024, 3, 30, 23), ms(2024, 10, 26, 23),
    ms(2024, 4, 6, 14), ms(2024, 10, 5, 15), ms(2024, 7, 1), ms(2024, 2, 28),
]).flatmap(lambda t: st.integers(-8 * 3600_000, 8 * 3600_000).map(lambda d: t + d))


def reference_fires(expr: str, tz: str, start_ms: int, end_ms: int) -> list[int]:
    """Brute force: every wall-clock minute, the module's DST rules spelled out directly.

    Field values come from croniter.expand (an independent parser); day matching uses
    the Vixie OR rule as the module defines it (croniter.expand turns a full day field
    into '*' when the other day field's text merely contains a '*', e.g. '*/2').
    """
    zone = ZoneInfo(tz)
    expanded, _ = croniter.expand(expr)
    mins, hours, doms, months, dows = (
        None if "*" in values else set(values) for values in expanded)
    if dows is not None:
        dows = {d % 7 for d in dows}
    all_hours = hours is None or len(hours) == 24
    # the module's rule: a day field is unrestricted only with a bare '*' item
    dom_text, dow_text = expr.split()[2], expr.split()[4]
    dom_restricted = "*" not in dom_text.split(",")
    dow_restricted = "*" not in dow_text.split(",")

    def ok(values: set[int] | None, v: int) -> bool:
        return values is None or v in values

    def day_ok(w: datetime) -> bool:
        dom_ok, dow_ok = ok(doms, w.day), ok(dows, w.isoweekday() % 7)
        if dom_restricted and dow_restricted:
            return dom_ok or dow_ok
        return (dom_ok or not dom_restricted) and (dow_ok or not dow_restricted)

    fires: set[int] = set()
    w = datetime.fromtimestamp(start_ms // 1000, zone).replace(tzinfo=None, second=0)
    w -= timedelta(hours=3)
    last = datetime.fromtimestamp(end_ms // 1000, zone).replace(tzinfo=None) + timedelta(hours=3)
    while w <= last:
        if (ok(mins, w.minute) and ok(hours, w.hour) and ok(months, w.month) and day_ok(w)):
            first = int(w.replace(tzinfo=zone, fold=0).timestamp())
            second = int(w.replace(tzinfo=zone, fold=1).timestamp())
            if first == second:  # exists once
                fires.add(first)
            elif first < second:  # repeated: both passes only when all hours are allowed
                fires.update((first, second) if all_hours else (first,))
            elif not all_hours:  # in a gap: fixed hours fire shifted by the gap (fold=0)
                fires.add(first)
        w += timedelta(minutes=1)
    return sorted(t * 1000 for t in fires if start_ms <= t * 1000 <= end_ms)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=VIXIE5, tz=ZONES, start=STARTS)
def test_property_matches_brute_force_reference(expr, tz, start):
    try:
        sch = cron(expr, tz)
    except InvalidArguments as exc:
        assert "never fires" in str(exc)
        return
    end = start + 2 * 86400_000
    fires = sch.fires_between(start, end)
    assert fires == reference_fires(expr, tz, start, end)


@settings(max_examples=60, deadline=None)
@given(expr=VIXIE5, seconds=_field(0, 59), tz=ZONES, start=STARTS)
def test_property_next_after_increasing_and_consistent(expr, seconds, tz, start):
    try:
        sch = cron(f"{seconds} {expr}", tz)
    except InvalidArguments as exc:
        assert "never fires" in str(exc)
        return
    chain, t = [], start - 1
    for _ in range(50):
        t = sch.next_after(t)
        chain.append(t)
    assert all(a < b for a, b in zip(chain, chain[1:]))
    assert all(t % 1000 == 0 for t in chain)
    assert sch.fires_between(start, chain[-1]) == chain
    # strictly after, also from between fire times
    assert all(sch.next_after(c + 1) > c + 1 for c in chain[:5])
    assert all(sch.next_after(c - 1) == c for c in chain)


@settings(max_examples=40, deadline=None)
@given(expr=VIXIE5, start=st.integers(ms(2000, 1, 1), ms(2040, 1, 1)))
def test_property_agrees_with_croniter_in_utc(expr, start):
    # skip croniter's quirk: a full day field counts as '*' if the other one contains '*'
    dom, dow = expr.split()[2], expr.split()[4]
    assume(all(f == "*" or "*" not in f for f in (dom, dow)))
    try:
        sch = cron(expr)
    except InvalidArguments:
        return
    it = croniter(expr, datetime.fromtimestamp(start // 1000, ZoneInfo("UTC")))
    t = start - start % 1000
    for _ in range(5):
        t = sch.next_after(t)
        assert t == int(it.get_next(float)) * 1000
