"""bruce.clock: the storage form of an instant, and the system clock behind the Clock port."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from bruce.clock import Clock, SystemClock, local_time, parse_iso, utc_iso, utc_title

SAO_PAULO = timezone(timedelta(hours=-3))


def test_utc_iso_stores_every_instant_in_utc_with_microseconds() -> None:
    assert utc_iso(datetime(2026, 12, 2, 9, 0, tzinfo=SAO_PAULO)) == "2026-12-02T12:00:00.000000+00:00"
    assert utc_iso(datetime(2026, 12, 2, 12, 0, 0, 5, tzinfo=UTC)) == "2026-12-02T12:00:00.000005+00:00"


def test_stored_forms_sort_in_time_order() -> None:
    """The same width and zone for every instant, so SQL can compare the text."""
    earlier = datetime(2026, 12, 2, 23, 30, tzinfo=SAO_PAULO)  # 02:30 UTC the next day
    later = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
    assert utc_iso(earlier) < utc_iso(later)


def test_parse_iso_reads_back_what_utc_iso_wrote() -> None:
    moment = datetime(2026, 12, 2, 9, 15, 30, 123456, tzinfo=SAO_PAULO)
    parsed = parse_iso(utc_iso(moment))
    assert parsed == moment and parsed.utcoffset() == timedelta(0)


def test_parse_iso_takes_a_time_without_zone_as_utc() -> None:
    assert parse_iso("2026-12-02T12:00:00") == datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert parse_iso("2026-12-02T09:00:00-03:00") == datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


async def test_system_clock_is_aware_utc_and_monotonic() -> None:
    clock: Clock = SystemClock()
    before = datetime.now(UTC)
    now = clock.now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert before <= now <= datetime.now(UTC)
    first = clock.monotonic()
    await clock.sleep(0.01)
    assert clock.monotonic() - first >= 0.009


def test_a_time_is_shown_in_the_owners_zone_with_the_zone_named() -> None:
    moment = datetime(2026, 12, 5, 13, 5, 12, 123456, tzinfo=UTC)
    assert local_time(moment, ZoneInfo("Europe/Berlin")) == "2026-12-05 14:05 CET"
    assert local_time(moment, ZoneInfo("Europe/Berlin"), date=False) == "14:05 CET"
    assert local_time("2026-12-05T13:05:12.123456+00:00", ZoneInfo("America/Sao_Paulo"), seconds=True) == \
        "2026-12-05 10:05:12 -03 (America/Sao_Paulo)"  # an offset is no name: the key says which zone
    assert local_time(moment, ZoneInfo("Asia/Tokyo"), weekday=True, key=True) == "Sat 2026-12-05 22:05 JST (Asia/Tokyo)"
    assert local_time("2026-12-05T13:05:12", ZoneInfo("UTC")) == "2026-12-05 13:05 UTC"  # no offset: stored UTC
    assert utc_title("2026-12-05T10:05:12.5-03:00") == "2026-12-05T13:05:12+00:00"  # to the second, on hover
