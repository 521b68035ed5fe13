"""Time, injected. Nothing else in Bruce calls ``datetime.now()``."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["Clock", "SystemClock", "utc_iso", "parse_iso"]


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
