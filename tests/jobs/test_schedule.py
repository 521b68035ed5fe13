"""Schedule arguments of proactive jobs: checked with a clear error, computed from the injected
clock, cron through APScheduler with standard cron weekdays, across daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bruce.jobs.schedule import ScheduleError, local_text, parse_schedule, stored_schedule

NOW = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)  # a Thursday; 07:00 in Sao Paulo
SP = ZoneInfo("America/Sao_Paulo")


def parse(**args):
    return parse_schedule(args, now=NOW, default_zone=SP)


def test_in_seconds_is_computed_from_the_clock_not_the_model():
    schedule = parse(in_seconds=120)
    assert schedule.kind == "at" and schedule.next_after(NOW) == NOW + timedelta(seconds=120)
    assert schedule.next_after(NOW + timedelta(seconds=120)) is None  # a one-off runs once


def test_at_without_an_offset_is_local_time_in_the_timezone():
    schedule = parse(at="2026-12-08T09:00:00")
    assert schedule.next_after(NOW) == datetime(2026, 12, 8, 12, 0, tzinfo=UTC)  # 09:00 at -03
    other = parse(at="2026-12-08T09:00:00", timezone="Europe/Lisbon")
    assert other.next_after(NOW) == datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
    assert parse(at="2026-12-08T09:00:00+01:00").next_after(NOW) == datetime(2026, 12, 8, 8, 0, tzinfo=UTC)


def test_weekdays_are_standard_cron_monday_to_friday():
    schedule = parse(cron="0 8 * * 1-5")
    runs, cursor = [], NOW
    for _ in range(6):
        cursor = schedule.next_after(cursor)
        runs.append(cursor.astimezone(SP).strftime("%a %H:%M"))
    assert runs == ["Thu 08:00", "Fri 08:00", "Mon 08:00", "Tue 08:00", "Wed 08:00", "Thu 08:00"]
    assert parse(cron="0 9 * * 0").next_after(NOW).astimezone(SP).strftime("%a") == "Sun"
    assert parse(cron="0 9 * * 7").next_after(NOW).astimezone(SP).strftime("%a") == "Sun"
    assert parse(cron="0 9 * * sat,sun").next_after(NOW).astimezone(SP).strftime("%a") == "Sat"
    assert "Monday through Friday" in schedule.describe() and "America/Sao_Paulo" in schedule.describe()


def test_a_cron_job_keeps_local_eight_oclock_across_a_dst_change():
    ny = ZoneInfo("America/New_York")  # DST began 2026-03-08
    schedule = parse_schedule({"cron": "0 8 * * *", "timezone": "America/New_York"},
                              now=datetime(2026, 3, 6, 20, 0, tzinfo=UTC), default_zone=SP)
    first = schedule.next_after(datetime(2026, 3, 6, 20, 0, tzinfo=UTC))
    second = schedule.next_after(first)
    third = schedule.next_after(second)
    assert [r.astimezone(ny).strftime("%d %H:%M") for r in (first, second, third)] == ["07 08:00", "08 08:00",
                                                                                      "09 08:00"]
    assert (first.astimezone(UTC).hour, third.astimezone(UTC).hour) == (13, 12)


def test_every_seconds_runs_from_its_anchor():
    schedule = parse(every_seconds=3600)
    assert schedule.next_after(NOW) == NOW + timedelta(hours=1)
    later = NOW + timedelta(hours=5, minutes=30)
    assert schedule.next_after(later) == NOW + timedelta(hours=6)


def test_a_stored_schedule_computes_the_same_runs():
    made = parse(cron="30 7 * * 1")
    again = stored_schedule(made.kind, made.value, made.zone.key, "2026-12-03T10:00:00+00:00")
    assert again.next_after(NOW) == made.next_after(NOW)


@pytest.mark.parametrize(("args", "says"), [
    ({}, "exactly one of at, in_seconds, cron and every_seconds (got none)"),
    ({"in_seconds": 60, "cron": "* * * * *"}, "(got in_seconds, cron)"),
    ({"at": "2026-12-01T09:00:00"}, "is in the past"),
    ({"at": "next tuesday"}, "not an ISO 8601 date-time"),
    ({"in_seconds": 0}, "in_seconds: must be at least 1"),
    ({"in_seconds": 1.5}, "whole number of seconds"),
    ({"in_seconds": True}, "whole number of seconds"),
    ({"every_seconds": 59}, "every_seconds: must be at least 60"),
    ({"cron": "0 8 * *"}, "not a valid 5-field cron expression"),
    ({"cron": "61 8 * * *"}, "not a valid 5-field cron expression"),
    ({"cron": "0 8 * * 8"}, "not a valid 5-field cron expression"),
    ({"cron": "0 8 31 2 *"}, "never runs"),
    ({"in_seconds": 60, "timezone": "Mars/Olympus"}, "timezone: unknown zone 'Mars/Olympus'"),
], ids=lambda v: str(v).replace("\\", "/") if not isinstance(v, dict) else "-".join(f"{k}={v[k]}" for k in v) or "none")
def test_each_bad_schedule_gets_an_error_naming_what_to_fix(args, says):
    with pytest.raises(ScheduleError) as caught:
        parse(**args)
    assert says in str(caught.value)


def test_local_text_names_weekday_offset_and_zone():
    assert local_text(NOW, SP) == "Thu 2026-12-03 07:00 -03 (America/Sao_Paulo)"


@pytest.mark.parametrize("field", ["at", "cron", "timezone"])
def test_a_huge_argument_gets_a_short_error(field):
    args = {field: "x" * 1_000_000} | ({"in_seconds": 60} if field == "timezone" else {})
    with pytest.raises(ScheduleError) as caught:
        parse(**args)
    assert len(str(caught.value)) < 400 and caught.value.args[0].startswith(field)
