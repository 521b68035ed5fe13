"""clock.now: the injected clock's instant, shown in the user's zone or one the model names."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from bruce.contracts import ToolContext
from bruce.errors import ToolInputInvalid
from bruce.values import ConversationId
from tests.fakes.clock import FakeClock
from tools.clock import clock_now


def context(moment: datetime, zone: str = "America/Sao_Paulo") -> ToolContext:
    return ToolContext(clock=FakeClock(moment), zone=ZoneInfo(zone), conversation_id=ConversationId("test", "c1"), turn_id="t1")


async def test_without_a_timezone_it_reads_the_users_zone() -> None:
    reading = await clock_now({}, context(datetime(2026, 12, 2, 12, 0, 5, tzinfo=UTC)))
    assert reading == {"iso": "2026-12-02T09:00:05-03:00", "date": "2026-12-02", "time": "09:00:05",
                       "weekday": "Wednesday", "timezone": "America/Sao_Paulo", "utc_offset": "-03:00"}


async def test_a_named_timezone_can_change_the_date_and_the_offset() -> None:
    ctx = context(datetime(2026, 12, 2, 23, 30, tzinfo=UTC))
    tokyo = await clock_now({"timezone": "Asia/Tokyo"}, ctx)
    assert (tokyo["date"], tokyo["time"], tokyo["weekday"], tokyo["utc_offset"]) == (
        "2026-12-03", "08:30:00", "Thursday", "+09:00")
    kolkata = await clock_now({"timezone": "Asia/Kolkata"}, ctx)
    assert (kolkata["time"], kolkata["utc_offset"]) == ("05:00:00", "+05:30")


async def test_summer_time_shows_in_the_offset() -> None:
    reading = await clock_now({"timezone": "Europe/Lisbon"}, context(datetime(2026, 7, 1, 12, 0, tzinfo=UTC)))
    assert (reading["time"], reading["utc_offset"]) == ("13:00:00", "+01:00")


@pytest.mark.parametrize("name", ["Mars/Olympus_Mons", "../../etc/passwd", "x" * 300])
async def test_an_unknown_timezone_is_the_models_input_error(name: str) -> None:
    with pytest.raises(ToolInputInvalid) as err:
        await clock_now({"timezone": name}, context(datetime(2026, 12, 2, 12, 0, tzinfo=UTC)))
    assert str(err.value).startswith("unknown timezone ") and "America/Sao_Paulo" in str(err.value)
    assert len(str(err.value)) < 160  # a long name is cut
