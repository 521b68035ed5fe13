"""When a proactive job runs: its schedule arguments checked, its next run computed, and a
line saying it in words.

The calendar arithmetic is APScheduler's (``CronTrigger``): cron fields, time zones and
daylight-saving transitions behave as that library defines them (a local time that does not
exist is skipped, one that happens twice runs once). One difference is fixed here: APScheduler
3 numbers weekdays from Monday = 0, standard cron from Sunday = 0, and users (and models) write
standard cron, so the weekday field is translated to names before APScheduler reads it. The
words come from ``cron-descriptor``. Relative times ("in 2 minutes") are computed here from the
injected clock, never by the model."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from cron_descriptor import Options, get_description

from bruce.clock import local_time, parse_iso, utc_iso

__all__ = ["Schedule", "ScheduleError", "parse_schedule", "SCHEDULE_FIELDS", "zone_named", "local_text"]

SCHEDULE_FIELDS = ("at", "in_seconds", "cron", "every_seconds")
MIN_EVERY_S = 60
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DOW_TOKEN = re.compile(r"^(\*|[0-7]|[a-z]{3})(?:-([0-7]|[a-z]{3}))?(?:/([1-9][0-9]?))?$")


class ScheduleError(ValueError):
    """A schedule argument the model (or the owner) must fix; the text says which and how."""


@dataclass(frozen=True, slots=True)
class Schedule:
    kind: str  # at | cron | every
    value: str  # at: the UTC instant (ISO); cron: the expression as given; every: seconds
    zone: ZoneInfo
    anchor: datetime  # every: the first run; at: the instant

    @property
    def recurring(self) -> bool:
        return self.kind != "at"

    def next_after(self, after: datetime) -> datetime | None:
        """The first run strictly after ``after`` (None: a one-off that has run)."""
        if self.kind == "at":
            return self.anchor if self.anchor > after else None
        if self.kind == "every":
            step = timedelta(seconds=int(self.value))
            if after < self.anchor:
                return self.anchor
            count = int((after - self.anchor) / step) + 1
            return self.anchor + step * count
        fire: datetime | None = _cron(self.value, self.zone).get_next_fire_time(None, after + timedelta(microseconds=1))
        return fire

    def describe(self) -> str:
        if self.kind == "at":
            return f"once, {local_text(self.anchor, self.zone)}"
        if self.kind == "every":
            return f"every {_duration(int(self.value))}, from {local_text(self.anchor, self.zone)}"
        options = Options()
        options.use_24hour_time_format = True
        return f"{get_description(self.value, options)} ({self.zone.key})"


def _shown(value: Any) -> str:
    """A value quoted in an error, cut short: the model may send anything, of any size."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def zone_named(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        raise ScheduleError(f"timezone: unknown zone {_shown(name)}; use an IANA name such as America/Sao_Paulo") from None


def local_text(moment: datetime, zone: ZoneInfo) -> str:
    """An instant as the user reads it: ``Tue 2026-12-08 09:00 -03 (America/Sao_Paulo)``."""
    return local_time(moment, zone, weekday=True, key=True)


def parse_schedule(args: dict[str, Any], *, now: datetime, default_zone: ZoneInfo) -> Schedule:
    """The schedule named by exactly one of ``at``, ``in_seconds``, ``cron`` and
    ``every_seconds`` (with ``timezone``), or a ScheduleError saying what is wrong."""
    given = [name for name in SCHEDULE_FIELDS if args.get(name) is not None]
    if len(given) != 1:
        which = f"got {', '.join(given)}" if given else "got none"
        raise ScheduleError(f"give exactly one of at, in_seconds, cron and every_seconds ({which})")
    zone_name = args.get("timezone")
    zone = zone_named(zone_name) if zone_name else default_zone
    field = given[0]
    value = args[field]
    if field == "at":
        return _one_off(_instant(value, zone), now, zone)
    if field == "in_seconds":
        seconds = _whole(value, "in_seconds", minimum=1)
        return _one_off(now + timedelta(seconds=seconds), now, zone)
    if field == "every_seconds":
        seconds = _whole(value, "every_seconds", minimum=MIN_EVERY_S)
        return Schedule("every", str(seconds), zone, now + timedelta(seconds=seconds))
    expression = _cron_text(value)
    schedule = Schedule("cron", expression, zone, now)
    if schedule.next_after(now) is None:
        raise ScheduleError(f"cron: {_shown(expression)} never runs")
    return schedule


def stored_schedule(kind: str, value: str, zone_name: str, anchor_at: str) -> Schedule:
    """A schedule as ``proactive_jobs`` keeps it."""
    zone = ZoneInfo(zone_name)
    anchor = parse_iso(value) if kind == "at" else parse_iso(anchor_at)
    return Schedule(kind, value, zone, anchor)


def _one_off(moment: datetime, now: datetime, zone: ZoneInfo) -> Schedule:
    if moment <= now:
        raise ScheduleError(f"at: {local_text(moment, zone)} is in the past (now it is {local_text(now, zone)}); "
                            "give a future time")
    return Schedule("at", utc_iso(moment), zone, moment)


def _instant(value: Any, zone: ZoneInfo) -> datetime:
    if not isinstance(value, str) or not value.strip():
        raise ScheduleError("at: give an ISO 8601 date-time such as 2026-12-08T09:00:00")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ScheduleError(f"at: {_shown(value)} is not an ISO 8601 date-time such as 2026-12-08T09:00:00") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=zone)  # no offset: local time in the zone


def _whole(value: Any, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ScheduleError(f"{name}: give a whole number of seconds, not {_shown(value)}")
    if value < minimum:
        raise ScheduleError(f"{name}: must be at least {minimum} (got {int(value)})")
    if value > 10 * 366 * 86400:
        raise ScheduleError(f"{name}: at most ten years (got {int(value)} seconds)")
    return int(value)


def _cron_text(value: Any) -> str:
    if not isinstance(value, str):
        raise ScheduleError("cron: give a 5-field cron expression such as '0 8 * * 1-5'")
    expression = " ".join(value.split())
    try:
        _cron(expression, ZoneInfo("UTC"))
    except ValueError as exc:
        raise ScheduleError(f"cron: {_shown(value)} is not a valid 5-field cron expression "
                            f"(minute hour day-of-month month day-of-week, e.g. '0 8 * * 1-5'): {_shown(str(exc))}") from None
    return expression


def _cron(expression: str, zone: ZoneInfo) -> CronTrigger:
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"{len(fields)} fields, expected 5")
    minute, hour, day, month, weekday = fields
    return CronTrigger(minute=minute, hour=hour, day=day, month=month, day_of_week=_weekdays(weekday),
                       timezone=zone)


def _weekdays(field: str) -> str:
    """A standard cron weekday field (0 or 7 = Sunday) as APScheduler 3 weekday names."""
    if field == "*":
        return field
    days: set[int] = set()
    for token in field.lower().split(","):
        match = _DOW_TOKEN.match(token)
        if match is None:
            raise ValueError(f"bad day-of-week {token!r}")
        first, last, step = match.groups()
        if first == "*":
            start, end = 0, 6
        else:
            start = _day(first)
            end = _day(last) if last is not None else (6 if step else start)
        if end < start:
            raise ValueError(f"bad day-of-week range {token!r}")
        days.update(d % 7 for d in range(start, end + 1, int(step or 1)))
    return ",".join(_DAYS[d] for d in sorted(days))


def _day(token: str) -> int:
    if token.isdigit():
        return int(token)
    if token not in _DAYS:
        raise ValueError(f"bad day-of-week name {token!r}")
    return _DAYS.index(token)


def _duration(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"
