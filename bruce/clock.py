"""Time, injected. Nothing else in Bruce calls ``datetime.now()``."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol
from zoneinfo import ZoneInfo

__all__ = ["Clock", "SystemClock", "utc_iso", "parse_iso", "local_time", "utc_title"]


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic clock, for measuring durations."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait (a backoff between retries); a fake clock records it and moves on."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def utc_iso(moment: datetime) -> str:
    """The storage form of an instant: ISO 8601 in UTC with microseconds."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def parse_iso(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def local_time(moment: datetime | str, zone: ZoneInfo, *, date: bool = True, weekday: bool = False,
               seconds: bool = False, key: bool = False) -> str:
    """An instant as the owner reads it, in their zone, the zone named: ``2026-12-05 14:05 CET``
    (``date=False``: ``14:05 CET``). A zone whose abbreviation is only an offset is named by its
    key too: ``2026-12-05 11:05 -03 (America/Sao_Paulo)``; ``key``: always (a job's own zone).
    A stored text (ISO 8601; no offset: UTC) is read first. The one way Bruce shows a time."""
    local = (parse_iso(moment) if isinstance(moment, str) else moment).astimezone(zone)
    shape = " ".join(part for part in ("%a" if weekday else "", "%Y-%m-%d" if date else "",
                                       "%H:%M:%S" if seconds else "%H:%M") if part)
    abbreviation = local.tzname() or zone.key
    named = abbreviation if abbreviation == zone.key or (abbreviation[:1].isalpha() and not key) \
        else f"{abbreviation} ({zone.key})"
    return f"{local.strftime(shape)} {named}"


def utc_title(moment: datetime | str) -> str:
    """The same instant in UTC, to the second, as a page shows it on hover: ``2026-12-05T13:05:12+00:00``."""
    parsed = parse_iso(moment) if isinstance(moment, str) else moment
    return parsed.astimezone(UTC).isoformat(timespec="seconds")
