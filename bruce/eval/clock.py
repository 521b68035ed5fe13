"""A case's clock: set to the case's moment (``setup.clock``), then running at the real pace, so
model latency and deadlines still measure real time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bruce.clock import Clock, SystemClock

__all__ = ["CaseClock"]


class CaseClock:
    def __init__(self, start: datetime | None = None, base: Clock | None = None) -> None:
        self._base = base or SystemClock()
        self._start = (start or self._base.now()).astimezone(UTC)  # the Clock protocol's instants are UTC
        self._origin = self._base.monotonic()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._base.monotonic() - self._origin)

    def monotonic(self) -> float:
        return self._base.monotonic()

    async def sleep(self, seconds: float) -> None:
        await self._base.sleep(seconds)
