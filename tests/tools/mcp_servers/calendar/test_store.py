"""The calendar's SQLite file (tools.mcp_servers.calendar.store): times as sortable UTC text,
overlap and upcoming queries, and a create that stores all of its events or none, never twice."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from tools.mcp_servers.calendar.store import CalendarStore, Change, EventNotFound, NewEvent, from_utc_text, to_utc_text

T = datetime(2030, 1, 10, 13, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def event(title: str, start: datetime, hours: float = 1, **more: str) -> NewEvent:
    return NewEvent(title=title, start=start, end=start + timedelta(hours=hours), **more)


def test_times_are_stored_as_whole_seconds_in_utc() -> None:
    moment = datetime(2030, 1, 10, 10, 0, 30, 999_999, tzinfo=timezone(timedelta(hours=-3)))
    assert to_utc_text(moment) == "2030-01-10T13:00:30Z"
    assert from_utc_text("2030-01-10T13:00:30Z") == datetime(2030, 1, 10, 13, 0, 30, tzinfo=UTC)


def test_a_failed_create_writes_none_of_its_events(tmp_path: Path) -> None:
    store = CalendarStore(tmp_path / "deep" / "cal.db")
    good = NewEvent(title="Good", start=T, end=T + HOUR)
    broken = NewEvent(title=None, start=T, end=T + HOUR)  # type: ignore[arg-type]
    with pytest.raises(sqlite3.IntegrityError):
        store.create([good, broken], now=T)
    assert store.overlapping(T - timedelta(days=1), T + timedelta(days=1)) == []
    [(stored, created)] = store.create([good], now=T)
    assert created and store.create([good], now=T) == [(stored, False)]


def test_a_created_event_reads_back_in_utc_with_its_details(tmp_path: Path) -> None:
    store = CalendarStore(tmp_path / "cal.db")
    local_start = datetime(2030, 1, 10, 10, 0, tzinfo=timezone(timedelta(hours=-3)))
    [(stored, created)] = store.create([event("Dentist", local_start, location="Rua A, 1", notes="bring the card")],
                                       now=T - timedelta(days=2))
    assert created and stored.id.startswith("ev_")
    assert (stored.title, stored.start, stored.end, stored.location, stored.notes, stored.created_at) == (
        "Dentist", T, T + HOUR, "Rua A, 1", "bring the card", T - timedelta(days=2))
    assert stored.start.tzinfo is UTC
    assert CalendarStore(tmp_path / "cal.db").overlapping(T, T + HOUR) == [stored]  # the file keeps it


def test_the_same_event_in_one_create_is_stored_once(tmp_path: Path) -> None:
    store = CalendarStore(tmp_path / "cal.db")
    [(first, made_first), (second, made_second)] = store.create([event("Gym", T), event("Gym", T)], now=T)
    assert (made_first, made_second) == (True, False) and first == second
    [(_, other)] = store.create([event("Gym", T, hours=2)], now=T)  # another end: another event
    assert other


def test_overlapping_takes_events_that_touch_the_range_inside_not_at_its_edges(tmp_path: Path) -> None:
    store = CalendarStore(tmp_path / "cal.db")
    store.create([event("before", T - HOUR), event("across start", T - HOUR / 2), event("inside", T + HOUR / 4, 0.25),
                  event("around", T - HOUR, 4), event("after", T + HOUR)], now=T)
    found = store.overlapping(T, T + HOUR)
    assert [e.title for e in found] == ["around", "across start", "inside"]  # by start


def test_upcoming_skips_ended_events_and_stops_at_the_limit(tmp_path: Path) -> None:
    store = CalendarStore(tmp_path / "cal.db")
    store.create([event("ended", T - 2 * HOUR), event("running", T - HOUR / 2), event("next", T + HOUR),
                  event("later", T + 3 * HOUR), event("next week", T + timedelta(days=7))], now=T)
    assert [e.title for e in store.upcoming(T, T + timedelta(days=1), limit=10)] == ["running", "next", "later"]
    assert [e.title for e in store.upcoming(T, T + timedelta(days=1), limit=2)] == ["running", "next"]


def test_update_keeps_what_it_is_not_given_and_delete_removes_the_event(tmp_path: Path) -> None:
    store = CalendarStore(tmp_path / "cal.db")
    [(stored, _)] = store.create([event("Gym", T, location="Club")], now=T)
    moved = store.update(stored.id, Change(start=T + HOUR, end=T + 2 * HOUR, notes="bring shoes"))
    assert (moved.title, moved.start, moved.end, moved.location, moved.notes) == (
        "Gym", T + HOUR, T + 2 * HOUR, "Club", "bring shoes")
    assert store.update(stored.id, Change(location="")).location is None  # an empty text clears it
    assert store.delete(stored.id).title == "Gym"
    assert store.overlapping(T - HOUR, T + 3 * HOUR) == []
    with pytest.raises(EventNotFound):
        store.delete(stored.id)
